/* In-flight records and the orphan reaper (see src/sandbox/sandbox_record.h). */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/first_trace.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_cgroup.h"
#include "sandbox_record.h"
#include "sandbox_scratch.h"

#define RECORD_MAX_BYTES 16384
#define RECORD_PAGE      4096 /* what one pwrite() copies whole (rewrite_in_place()) */
#define SUFFIX           ".json"
#define RUN_SUFFIX       ".run.json"
#define TMP_TRIES        8 /* a .tmp file discarded before we locked it: another */

#define RECORDS "inflight" /* <run>/inflight */
#define SPARES  64         /* released records kept for reuse, per process */

static const char *const kind_names[] = {
	[SB_RECORD_BOTH] = "both", [SB_RECORD_SANDBOX] = "sandbox", [SB_RECORD_RUN] = "run"
};

static json_t *record_json(const struct sb_record *r)
{
	return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:i, s:I}",
			 "version", 3, "kind", kind_names[r->kind], "tenant", r->tenant, "run_id",
			 r->run_id, "batch_id", r->batch_id, "mode", r->mode, "sandbox", r->sandbox,
			 "outcome", r->outcome, "final", r->final_id, "attempt", (int)r->attempt,
			 "cgroup_root", r->cgroup_root, "scratch_root", r->scratch_root, "executor",
			 (int)r->executor, "started_ms", (json_int_t)r->started_ms);
}

/* A name that becomes a path component: nothing but what executors write. */
static bool id_valid(const char *id)
{
	return id[0] && id[0] != '.' && !strchr(id, '/');
}

static bool id_empty_or_valid(const char *id)
{
	return !id[0] || id_valid(id);
}

/* What a record names: a sandbox its resources, a run what it owes. */
static bool names_valid(const struct sb_record *r)
{
	if (!tenant_name_valid(r->tenant))
		return false;
	if (r->kind != SB_RECORD_RUN)
		return id_valid(r->sandbox) && id_valid(r->outcome) &&
		       id_empty_or_valid(r->final_id);
	/* A run's record may owe nothing: a verifier worker's, kept between
	 * its tests (sb_run_record_idle()). */
	return id_empty_or_valid(r->sandbox) && id_empty_or_valid(r->outcome) &&
	       id_empty_or_valid(r->final_id);
}

static int copy_field(json_t *o, const char *key, char *dst, size_t len)
{
	const char *v = json_string_value(json_object_get(o, key));

	if (!v || strlen(v) >= len)
		return -EINVAL;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int record_parse(const char *text, size_t n, struct sb_record *r)
{
	json_t *o = json_loadb(text, n, 0, NULL);
	const char *kind;
	int err;

	memset(r, 0, sizeof(*r));
	if (!o)
		return -EINVAL;
	err = copy_field(o, "tenant", r->tenant, sizeof(r->tenant));
	err = err ?: copy_field(o, "run_id", r->run_id, sizeof(r->run_id));
	err = err ?: copy_field(o, "batch_id", r->batch_id, sizeof(r->batch_id));
	err = err ?: copy_field(o, "mode", r->mode, sizeof(r->mode));
	err = err ?: copy_field(o, "sandbox", r->sandbox, sizeof(r->sandbox));
	err = err ?: copy_field(o, "cgroup_root", r->cgroup_root, sizeof(r->cgroup_root));
	err = err ?: copy_field(o, "scratch_root", r->scratch_root, sizeof(r->scratch_root));
	/* Version 1 has neither: a sandbox and its one run, whose outcome id
	 * is the sandbox's. */
	kind = json_string_value(json_object_get(o, "kind"));
	r->kind = SB_RECORD_BOTH;
	for (int k = SB_RECORD_SANDBOX; kind && k <= SB_RECORD_RUN; k++)
		if (!strcmp(kind, kind_names[k]))
			r->kind = k;
	if (copy_field(o, "outcome", r->outcome, sizeof(r->outcome)) ||
	    (!r->outcome[0] && r->kind != SB_RECORD_RUN))
		memcpy(r->outcome, r->sandbox, sizeof(r->outcome));
	/* Before version 3 a run's outcome was booked as the final. */
	if (!json_object_get(o, "final") || r->kind == SB_RECORD_BOTH)
		snprintf(r->final_id, sizeof(r->final_id), "%s",
			 r->kind == SB_RECORD_SANDBOX ? "" : r->outcome);
	else if (copy_field(o, "final", r->final_id, sizeof(r->final_id)))
		err = err ?: -EINVAL;
	r->attempt = (uint32_t)json_integer_value(json_object_get(o, "attempt"));
	r->executor = (pid_t)json_integer_value(json_object_get(o, "executor"));
	r->started_ms = (uint64_t)json_integer_value(json_object_get(o, "started_ms"));
	json_decref(o);
	/* Names that become paths: nothing but what the executor writes. */
	if (!err && !names_valid(r))
		err = -EINVAL;
	return err;
}

/* The record's name: a run's after the id it owes first (or its sandbox,
 * when it owes nothing yet). */
static const char *record_name(const struct sb_record *rec)
{
	if (rec->kind != SB_RECORD_RUN)
		return rec->sandbox;
	return rec->outcome[0] ? rec->outcome : rec->final_id[0] ? rec->final_id : rec->sandbox;
}

/* Released records' files, kept locked under a .tmp name for the next
 * record instead of unlinked: on ext4 a new inode's allocation searches
 * past the recently deleted ones, and a verifier request made two (its
 * sandbox's record and its workers' run records), a tenth of the
 * executor's CPU per test on this node (docs/performance-executor-cost.md).
 * A .tmp file is no record for a reaper: it leaves it while it is locked
 * and deletes it once its executor is gone (sb_records_reap()). */
static struct {
	pthread_mutex_t lock;
	char dir[PATH_MAX];
	pid_t pid;
	unsigned n, made;
	struct spare {
		int fd;
		char path[PATH_MAX + 32];
	} s[SPARES];
} spares = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* This process's kept files unlinked (spares.lock held); a forked
 * child's inherited list is its parent's, and left alone. */
static void spares_drop_locked(void)
{
	for (unsigned i = 0; spares.pid == getpid() && i < spares.n; i++) {
		unlink(spares.s[i].path);
		close(spares.s[i].fd);
	}
	spares.n = 0;
}

/* The kept files go with an orderly exit (atexit, and `sandguard exec`'s
 * _exit() calls it): a one-shot run would otherwise leave its spares to
 * the next run's reaper, and the in-flight directory would never be empty
 * between runs. A killed process's are the reaper's. The pid is checked
 * before the lock: a child forked while another thread held it must not
 * wait on it. */
void sb_records_drop_kept(void)
{
	if (spares.pid != getpid())
		return;
	pthread_mutex_lock(&spares.lock);
	spares_drop_locked();
	pthread_mutex_unlock(&spares.lock);
}

/* A kept file of `dir` (locked, still linked under a .tmp name) now
 * holding `text`: its fd with *tmp its name, or -1 when none is kept. */
static int spare_take(const char *dir, const char *text, char *tmp, size_t tmp_len)
{
	struct spare sp = { .fd = -1 };
	size_t n = strlen(text);

	pthread_mutex_lock(&spares.lock);
	if (spares.n && spares.pid == getpid() && !strcmp(spares.dir, dir))
		sp = spares.s[--spares.n];
	pthread_mutex_unlock(&spares.lock);
	if (sp.fd < 0)
		return -1;
	if (ftruncate(sp.fd, 0) || pwrite(sp.fd, text, n, 0) != (ssize_t)n) {
		unlink(sp.path);
		close(sp.fd);
		return -1;
	}
	snprintf(tmp, tmp_len, "%s", sp.path);
	return sp.fd;
}

/* Keep a released record's file (fd locked, at `path`) instead of
 * unlinking it: 0 when kept, -1 when it is to be unlinked as before. */
static int spare_keep(const char *path, int fd)
{
	char dir[PATH_MAX], *slash;
	struct spare *sp;
	int ret = -1;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	pthread_mutex_lock(&spares.lock);
	if (spares.pid != getpid() || strcmp(spares.dir, dir)) {
		spares_drop_locked();
		if (spares.pid != getpid() && atexit(sb_records_drop_kept))
			sg_debug(
				"in-flight records: no exit handler: %s's spares wait for a reaper",
				dir);
		spares.pid = getpid();
		snprintf(spares.dir, sizeof(spares.dir), "%s", dir);
	}
	if (spares.n < SPARES) {
		sp = &spares.s[spares.n];
		snprintf(sp->path, sizeof(sp->path), "%s/.tmp-spare-%d-%u", dir, (int)getpid(),
			 spares.made++);
		if (rename(path, sp->path) == 0) {
			sp->fd = fd;
			spares.n++;
			ret = 0;
		}
	}
	pthread_mutex_unlock(&spares.lock);
	return ret;
}

/* A new file holding `rec`, locked, under a temporary name in `dir`:
 * its fd, or -errno. *tmp is its name. */
static int write_locked(const char *dir, const struct sb_record *rec, char *tmp, size_t tmp_len)
{
	json_t *j = record_json(rec);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	uint32_t rnd = 0;
	int fd = -1, err = text ? 0 : -ENOMEM;

	json_decref(j);
	if (text && (fd = spare_take(dir, text, tmp, tmp_len)) >= 0) {
		free(text);
		return fd;
	}
	/* A reaper (sb_records_reap()) discards a .tmp file it can lock: one
	 * made but not locked yet may go. Locked and still linked, it stays. */
	for (int tries = 0; !err && tries < TMP_TRIES; tries++) {
		struct stat st;

		if (getrandom(&rnd, sizeof(rnd), 0) < 0)
			rnd = (uint32_t)getpid() + (uint32_t)tries;
		snprintf(tmp, tmp_len, "%s/.tmp-%08x-%s", dir, rnd, record_name(rec));
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 || flock(fd, LOCK_EX) || fstat(fd, &st)) {
			err = -errno;
			break;
		}
		if (st.st_nlink)
			break; /* still linked once locked: a reaper leaves it now */
		fs_close(&fd);
		err = tries + 1 < TMP_TRIES ? 0 : -ENOENT;
	}
	if (!err && write(fd, text, strlen(text)) < 0)
		err = -errno;
	free(text);
	if (err) {
		if (fd >= 0)
			unlink(tmp);
		fs_close(&fd);
		return err;
	}
	return fd;
}

int sb_record_open(const struct sb_record *rec, struct sb_record_lock *lk, char *detail,
		   size_t dlen)
{
	char dir[PATH_MAX] = "", tmp[PATH_MAX + 32];
	int err = fs_run_subdir(RECORDS, 0700, dir, sizeof(dir));

	lk->fd = -1;
	lk->path[0] = '\0';
	lk->abandon = false;
	if (!err)
		snprintf(lk->path, sizeof(lk->path), "%s/%s%s", dir, record_name(rec),
			 rec->kind == SB_RECORD_RUN ? RUN_SUFFIX : SUFFIX);
	if (!err && (err = write_locked(dir, rec, tmp, sizeof(tmp))) >= 0) {
		lk->fd = err;
		err = rename(tmp, lk->path) ? -errno : 0;
		if (err) {
			unlink(tmp);
			fs_close(&lk->fd);
		}
	}
	if (err) {
		snprintf(detail, dlen, "cannot record sandbox %s in %s: %s", record_name(rec), dir,
			 strerror(-err));
		lk->path[0] = '\0';
	}
	return err;
}

int sb_record_replace(const struct sb_record *rec, struct sb_record_lock *lk, char *detail,
		      size_t dlen)
{
	char dir[PATH_MAX] = "", tmp[PATH_MAX + 32];
	int fd, err = fs_run_subdir(RECORDS, 0700, dir, sizeof(dir));

	if (!err && (err = fd = write_locked(dir, rec, tmp, sizeof(tmp))) >= 0) {
		/* The old file is unlinked by the rename while still locked: a
		 * reaper that opened it sees another inode at the name, and
		 * leaves it (reap_one()). */
		err = rename(tmp, lk->path) ? -errno : 0;
		if (err) {
			unlink(tmp);
			close(fd);
		} else {
			fs_close(&lk->fd);
			lk->fd = fd;
		}
	}
	if (err)
		snprintf(detail, dlen, "cannot rewrite the in-flight record %s: %s", lk->path,
			 strerror(-err));
	return err;
}

/* Rewrite a held record in its own file: one pwrite() of at most a page
 * at offset 0, padded with blanks to the file's length (JSON allows them),
 * so the file holds the old text or the new, never a mix: a process dies
 * between two system calls, and a write of one page is copied whole or not
 * at all (a pending SIGKILL is checked before each page). A reaper reads
 * it only once our lock is gone. Saves the new inode, rename and unlink of
 * sb_record_replace() (on ext4, an inode allocation searches past the
 * recently deleted ones: a quarter of the executor's CPU per verifier
 * test, docs/performance-executor-cost.md). -E2BIG when it does not fit in
 * a page (the caller replaces it instead), else 0 or -errno. */
static int rewrite_in_place(const struct sb_record *rec, struct sb_record_lock *lk)
{
	json_t *j = record_json(rec);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	struct stat st;
	size_t n = text ? strlen(text) : 0, size;
	int err = text ? 0 : -ENOMEM;
	char page[RECORD_PAGE];

	json_decref(j);
	if (!err && fstat(lk->fd, &st))
		err = -errno;
	size = !err && (size_t)st.st_size > n ? (size_t)st.st_size : n;
	if (!err && size > sizeof(page))
		err = -E2BIG;
	if (!err) {
		memcpy(page, text, n);
		memset(page + n, ' ', size - n);
		if (pwrite(lk->fd, page, size, 0) != (ssize_t)size)
			err = errno ? -errno : -EIO;
	}
	free(text);
	return err;
}

int sb_run_record_write(struct sb_run_record *r, const struct sb_record *rec, char *detail,
			size_t dlen)
{
	int err;

	if (rec->kind == SB_RECORD_RUN && !r->lk.path[0])
		first_trace_now(); /* a warm client is told first (lib/first_trace.h) */
	if (rec->kind == SB_RECORD_RUN && r->lk.path[0] && r->lk.fd >= 0 && !r->lk.abandon) {
		errno = 0;
		err = rewrite_in_place(rec, &r->lk);
		if (!err) {
			if (rec != &r->rec)
				r->rec = *rec;
			return 0;
		}
		/* -E2BIG, or the file refused the write (nothing of the new
		 * text can be in it but a whole page): replaced instead. */
	}
	err = rec->kind != SB_RECORD_RUN ? -EINVAL
	      : r->lk.path[0]            ? sb_record_replace(rec, &r->lk, detail, dlen)
					 : sb_record_open(rec, &r->lk, detail, dlen);

	if (!err && rec != &r->rec)
		r->rec = *rec;
	else if (err == -EINVAL && rec->kind != SB_RECORD_RUN)
		snprintf(detail, dlen, "not a run's record");
	return err;
}

int sb_run_record_idle(struct sb_run_record *r)
{
	struct sb_record idle = r->rec;
	char detail[256];

	if (!r->lk.path[0] || r->lk.abandon || (!r->rec.outcome[0] && !r->rec.final_id[0]))
		return 0;
	idle.outcome[0] = '\0';
	idle.final_id[0] = '\0';
	idle.attempt = 0;
	if (!sb_run_record_write(r, &idle, detail, sizeof(detail)))
		return 0;
	sg_warn("exec: %s: %s: the record is deleted instead", r->lk.path, detail);
	sb_record_release(&r->lk);
	return -EIO;
}

void sb_record_release(struct sb_record_lock *lk)
{
	if (!lk->path[0])
		return;
	/* Renamed away (kept) or unlinked: either way no record is left at
	 * its name, for a reaper to book. */
	if (!lk->abandon && lk->fd >= 0 && spare_keep(lk->path, lk->fd) == 0) {
		lk->fd = -1;
		lk->path[0] = '\0';
		return;
	}
	if (!lk->abandon && unlink(lk->path) && errno != ENOENT)
		sg_warn("cannot remove in-flight record %s: %s", lk->path, strerror(errno));
	fs_close(&lk->fd);
	lk->path[0] = '\0';
}

/* The orphan's resources, the way a dying executor would have removed
 * them. 0 when nothing of the sandbox is left. */
static int reclaim(const struct sb_record *r)
{
	int err = sb_cgroup_reclaim(r->cgroup_root, r->tenant, r->sandbox);

	if (err) {
		sg_warn("orphan sandbox %s/%s: cgroup not removed yet (%s); trying again later",
			r->tenant, r->sandbox, strerror(-err));
		return err;
	}
	return sb_scratch_remove(r->scratch_root, r->tenant, r->sandbox);
}

/* An orphan: its resources reclaimed (a sandbox), its run booked (a run),
 * or both (version 1). 0 when the record can go. */
static int reap_record(const struct sb_record *rec, sb_orphan_fn fn, void *arg)
{
	int err = 0;

	if (rec->kind != SB_RECORD_RUN) {
		err = reclaim(rec);
		if (err)
			return err;
		sg_warn("reclaimed sandbox %s of tenant %s, left by executor %d", rec->sandbox,
			rec->tenant, (int)rec->executor);
	}
	if (rec->kind == SB_RECORD_SANDBOX || !fn)
		return 0;
	if (rec->outcome[0]) {
		sg_warn("booking run %s of tenant %s (batch %s, attempt %u), left by executor %d",
			rec->outcome, rec->tenant, rec->batch_id, rec->attempt, (int)rec->executor);
		err = fn(rec, rec->outcome, !strcmp(rec->outcome, rec->final_id), arg);
	}
	if (!err && rec->final_id[0] && strcmp(rec->final_id, rec->outcome)) {
		sg_warn("booking the final outcome %s of tenant %s (batch %s), left by executor %d",
			rec->final_id, rec->tenant, rec->batch_id, (int)rec->executor);
		err = fn(rec, rec->final_id, true, arg);
	}
	return err;
}

/* Reap one record if nobody holds it. 1 reaped, 0 live or gone, -errno. */
static int reap_one(int dirfd, const char *name, sb_orphan_fn fn, void *arg)
{
	char text[RECORD_MAX_BYTES];
	struct stat held, now;
	struct sb_record rec;
	ssize_t n;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), err = 0;

	if (fd < 0)
		return 0;
	/* Locked: its executor lives. Unlinked meanwhile: reaped by another. */
	if (flock(fd, LOCK_EX | LOCK_NB) || fstat(fd, &held) ||
	    fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) || held.st_ino != now.st_ino) {
		close(fd);
		return 0;
	}
	n = read(fd, text, sizeof(text));
	if (n < 0 || record_parse(text, (size_t)n, &rec)) {
		/* Died while writing it: nothing was made yet. */
		sg_warn("discarding unreadable in-flight record %s", name);
	} else {
		err = reap_record(&rec, fn, arg);
	}
	if (!err)
		unlinkat(dirfd, name, 0);
	close(fd);
	return err ? 0 : 1;
}

/* A record its executor died while writing (never renamed into place):
 * nothing of its sandbox was made yet. */
static void discard_unlocked(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0 && !flock(fd, LOCK_EX | LOCK_NB))
		unlinkat(dirfd, name, 0);
	if (fd >= 0)
		close(fd);
}

int sb_records_reap(sb_orphan_fn fn, void *arg)
{
	char dir[PATH_MAX];
	struct dirent *e;
	int reaped = 0, err = fs_run_subdir(RECORDS, 0, dir, sizeof(dir));
	DIR *d;

	if (err)
		return err;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (!strncmp(e->d_name, ".tmp-", 5)) {
			discard_unlocked(dirfd(d), e->d_name);
			continue;
		}
		if (e->d_name[0] == '.' || len <= strlen(SUFFIX) ||
		    strcmp(e->d_name + len - strlen(SUFFIX), SUFFIX))
			continue;
		reaped += reap_one(dirfd(d), e->d_name, fn, arg);
	}
	closedir(d);
	return reaped;
}
