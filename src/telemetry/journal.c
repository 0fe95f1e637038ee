/* The outcome journal's append side, its segments and its disk check (see
 * journal.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include "journal.h"
#include "lib/fs_util.h"
#include "lib/log.h"

#define SEGMENT_PREFIX "outcomes-"
#define SEGMENT_SUFFIX ".jsonl"
#define LOCK_NAME      ".lock"

static pthread_mutex_t append_lock = PTHREAD_MUTEX_INITIALIZER;

/* The lock file and the newest segment, kept open between this process's
 * appends (under append_lock): a booking then costs no readdir of the
 * journal and no open. Whatever other processes did meanwhile is checked
 * under the flock (current_segment(), lock_journal()). A child of a fork
 * opens its own: the parent's flock is on the same open file. */
static struct {
	char dir[PATH_MAX];
	pid_t pid;
	int lock_fd, seg_fd;
	uint64_t seq;
} kept = { .lock_fd = -1, .seg_fd = -1 };

int journal_state_dir(char *buf, size_t len)
{
	const char *v = getenv(SG_STATE_DIR_ENV);

	if ((size_t)snprintf(buf, len, "%s", v && *v ? v : SG_STATE_DIR_DEFAULT_PATH) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* An unsigned tuning value from the environment, at least `min`. */
static uint64_t env_u64(const char *name, uint64_t def, uint64_t min)
{
	const char *v = getenv(name);
	unsigned long long x;
	char *end;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end || v[0] == '-' || x < min) {
		sg_warn("journal: %s=%s is not a whole number >= %llu: using %llu", name, v,
			(unsigned long long)min, (unsigned long long)def);
		return def;
	}
	return x;
}

int journal_init(struct journal *j, const char *state_dir)
{
	char state[PATH_MAX];
	int err = 0;

	memset(j, 0, sizeof(*j));
	if (!state_dir) {
		err = journal_state_dir(state, sizeof(state));
		state_dir = state;
	}
	if (err || (size_t)snprintf(j->dir, sizeof(j->dir), "%s/%s", state_dir, JOURNAL_SUBDIR) >=
			   sizeof(j->dir))
		return -ENAMETOOLONG;
	j->segment_bytes =
		env_u64("SANDGUARD_JOURNAL_SEGMENT_BYTES", JOURNAL_SEGMENT_BYTES_DEFAULT, 4096);
	j->keep = (unsigned)env_u64("SANDGUARD_JOURNAL_KEEP", JOURNAL_KEEP_DEFAULT, 2);
	j->reserve_bytes =
		env_u64("SANDGUARD_JOURNAL_RESERVE_BYTES", JOURNAL_RESERVE_BYTES_DEFAULT, 0);
	return 0;
}

int journal_segment_path(const char *dir, uint64_t seq, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/" SEGMENT_PREFIX "%010" PRIu64 SEGMENT_SUFFIX, dir,
			     seq) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* The number of a segment's file name, 0 if it is not one. */
static uint64_t segment_number(const char *name)
{
	size_t pl = strlen(SEGMENT_PREFIX), sl = strlen(SEGMENT_SUFFIX), n = strlen(name);
	unsigned long long x = 0;

	if (n != pl + 10 + sl || strncmp(name, SEGMENT_PREFIX, pl) ||
	    strcmp(name + n - sl, SEGMENT_SUFFIX))
		return 0;
	for (size_t i = pl; i < pl + 10; i++) {
		if (name[i] < '0' || name[i] > '9')
			return 0;
		x = x * 10 + (unsigned)(name[i] - '0');
	}
	return x;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int journal_segments(const char *dir, uint64_t **seqs, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t cap = 0;
	uint64_t *v = NULL;

	*seqs = NULL;
	*n = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		uint64_t seq = segment_number(e->d_name);
		if (!seq)
			continue;
		if (*n == cap) {
			uint64_t *grown = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof(*v));
			if (!grown) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = grown;
		}
		v[(*n)++] = seq;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_u64);
	*seqs = v;
	return 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

/* Delete the segments older than the newest `keep` (called at rotation, lock
 * held). A reader holding one open keeps reading it. */
static void prune(const struct journal *j, uint64_t newest)
{
	uint64_t *seqs;
	size_t n;
	char path[PATH_MAX];

	if (newest <= j->keep || journal_segments(j->dir, &seqs, &n))
		return;
	for (size_t i = 0; i < n && seqs[i] <= newest - j->keep; i++)
		if (!journal_segment_path(j->dir, seqs[i], path, sizeof(path)) && unlink(path))
			sg_warn("journal: cannot delete the old segment %s: %s", path,
				strerror(errno));
	free(seqs);
}

/* Open segment `seq` for appending; `create` makes a new one (fails if it
 * exists), and makes its directory entry durable. */
static int open_segment(const struct journal *j, uint64_t seq, bool create)
{
	char path[PATH_MAX];
	int fd, err;

	if ((err = journal_segment_path(j->dir, seq, path, sizeof(path))))
		return err;
	fd = open(path,
		  O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_EXCL : 0),
		  0640);
	if (fd < 0)
		return -errno;
	if (create && (err = fsync_dir(j->dir))) {
		close(fd);
		return err;
	}
	return fd;
}

static void forget_segment(void)
{
	if (kept.seg_fd >= 0)
		close(kept.seg_fd);
	kept.seg_fd = -1;
	kept.seq = 0;
}

/* Whether the kept segment is still the newest: still linked (a wiped
 * journal unlinks it), and no segment after it (another executor rotates
 * by creating the next one; segments are pruned oldest first, so the
 * next one cannot be gone while this one is there). */
static bool kept_is_newest(const struct journal *j, struct stat *st)
{
	char next[PATH_MAX];

	if (kept.seg_fd < 0 || fstat(kept.seg_fd, st) || st->st_nlink == 0)
		return false;
	if (journal_segment_path(j->dir, kept.seq + 1, next, sizeof(next)))
		return false;
	return access(next, F_OK) && errno == ENOENT;
}

/* The newest segment, found by a readdir, opened and kept; lock held. */
static int find_segment(const struct journal *j, struct stat *st)
{
	uint64_t *seqs, seq;
	size_t n;
	int fd, err = journal_segments(j->dir, &seqs, &n);

	if (err)
		return err;
	seq = n ? seqs[n - 1] : 1;
	free(seqs);
	fd = open_segment(j, seq, n == 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, st)) {
		err = -errno;
		close(fd);
		return err;
	}
	kept.seg_fd = fd;
	kept.seq = seq;
	return 0;
}

/* The segment to append `need` bytes to, rotated if full; lock held.
 * Returns the kept segment's fd (owned by `kept`), or -errno. */
static int current_segment(const struct journal *j, size_t need, uint64_t *seq, off_t *size)
{
	struct stat st;
	int fd, err;

	if (!kept_is_newest(j, &st)) {
		forget_segment();
		if ((err = find_segment(j, &st)))
			return err;
	}
	*seq = kept.seq;
	*size = st.st_size;
	if (!S_ISREG(st.st_mode)) {
		forget_segment();
		return -EINVAL;
	}
	if (st.st_size == 0 || (uint64_t)st.st_size + need <= j->segment_bytes)
		return kept.seg_fd;
	forget_segment();
	fd = open_segment(j, ++*seq, true);
	if (fd < 0)
		return fd;
	*size = 0;
	kept.seg_fd = fd;
	kept.seq = *seq;
	prune(j, *seq);
	return fd;
}

/* Room for `want` bytes at the end of the segment, taken before anything
 * is written, so that a full disk refuses the whole line instead of taking
 * a part of it. 0, or -errno (-ENOSPC) with nothing written; a filesystem
 * without fallocate() goes on without it (its short write is handled by
 * the caller). */
static int reserve_room(int fd, off_t size, ssize_t want)
{
	int ret;

	do
		ret = fallocate(fd, FALLOC_FL_KEEP_SIZE, size, want);
	while (ret && errno == EINTR);
	if (ret == 0 || errno == EOPNOTSUPP || errno == ENOSYS)
		return 0;
	return -errno;
}

/* Lock held: the line goes in one writev, after a newline if the segment
 * ends in a torn line. Returns the segment's fd (the line written, not yet
 * synced) or -errno.
 *
 * Bytes once written are never taken back (no ftruncate): a reader may
 * have read them already, and a cut-off tail rewritten by the next append
 * spliced the head of one record onto the tail of another in the agent's
 * fold (issue 32: the ledger moved outcomes between tenants). What a short
 * write leaves stays as a torn line, which the next append ends with a
 * newline: one bad line for every reader alike. */
static int append_locked(const struct journal *j, const char *line, size_t len,
			 struct journal_pos *at)
{
	struct iovec iov[3];
	uint64_t seq = 0;
	off_t size = 0;
	char last = '\n';
	int fd = current_segment(j, len + 2, &seq, &size), err = 0, n_iov = 0;
	ssize_t want = 0, w;

	if (fd < 0)
		return fd;
	if (size > 0 && pread(fd, &last, 1, size - 1) != 1) {
		err = -errno;
		forget_segment();
		return err ? err : -EIO;
	}
	if (last != '\n')
		iov[n_iov++] = (struct iovec){ .iov_base = "\n", .iov_len = 1 };
	iov[n_iov++] = (struct iovec){ .iov_base = (void *)line, .iov_len = len };
	iov[n_iov++] = (struct iovec){ .iov_base = "\n", .iov_len = 1 };
	for (int i = 0; i < n_iov; i++)
		want += iov[i].iov_len;
	if ((err = reserve_room(fd, size, want)))
		return err;
	w = writev(fd, iov, n_iov);
	/* All of the line but its newline is a record: the next append (or
	 * the segment's end, for a reader) ends it, and the fold books it. */
	if (w < want - 1) {
		err = w < 0 ? -errno : -ENOSPC;
		if (w > 0)
			sg_warn("journal: an append to segment %" PRIu64 " was cut short after %zd "
				"of %zd bytes (%s): the part written stays, as one bad line",
				seq, w, want, strerror(-err));
		return err;
	}
	if (at)
		*at = (struct journal_pos){ seq, (uint64_t)size + (last != '\n') };
	return fd;
}

/* The kept lock file of j's journal, opened (and the journal's directory
 * made) when there is none for it in this process. */
static int lock_file(const struct journal *j)
{
	char lock[PATH_MAX];
	int fd, err;

	if (kept.lock_fd >= 0 && kept.pid == getpid() && !strcmp(kept.dir, j->dir))
		return kept.lock_fd;
	if (kept.pid == getpid()) { /* another journal's: closed (a fork's copies are left) */
		if (kept.lock_fd >= 0)
			close(kept.lock_fd);
		forget_segment();
	}
	kept.lock_fd = kept.seg_fd = -1;
	kept.seq = 0;
	if ((size_t)snprintf(lock, sizeof(lock), "%s/" LOCK_NAME, j->dir) >= sizeof(lock))
		return -ENAMETOOLONG;
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT) {
		if ((err = fs_mkdir_p(j->dir, 0755)))
			return err;
		fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return -errno;
	snprintf(kept.dir, sizeof(kept.dir), "%s", j->dir);
	kept.pid = getpid();
	kept.lock_fd = fd;
	return fd;
}

static void forget_lock(void)
{
	close(kept.lock_fd);
	kept.lock_fd = -1;
	forget_segment();
}

/* The journal's flock, on the kept lock file: a lock file since removed
 * (the journal wiped) is no lock for the others, who open the new one. */
static int lock_journal(const struct journal *j)
{
	struct stat st;

	for (int tries = 0; tries < 3; tries++) {
		int fd = lock_file(j);

		if (fd < 0)
			return fd;
		while (flock(fd, LOCK_EX) && errno == EINTR)
			;
		if (fstat(fd, &st) == 0 && st.st_nlink > 0)
			return fd;
		forget_lock();
	}
	return -ESTALE;
}

/* Append one line under the locks. *sync_fd is a copy of the segment's
 * descriptor for the caller to sync (and the return 0), or -1: the append
 * failed, or there was no descriptor to spare for a copy and the line
 * was synced here (the return is that sync's). */
static int append_one(const struct journal *j, const char *line, size_t len, struct journal_pos *at,
		      int *sync_fd)
{
	int lock, seg, err = 0;

	*sync_fd = -1;
	if (memchr(line, '\n', len))
		return -EINVAL; /* one record, one line */
	/* One thread of this process at a time asks for the flock: the
	 * kernel wakes every waiter of an flock at each release, and a
	 * hundred threads booking at once (serve at a deadline) would spend
	 * seconds in that herd. The mutex queues them here instead. */
	pthread_mutex_lock(&append_lock);
	lock = lock_journal(j);
	if (lock < 0) {
		pthread_mutex_unlock(&append_lock);
		return lock;
	}
	seg = append_locked(j, line, len, at);
	/* The kept fd may be replaced as soon as the lock is released: the
	 * sync goes through a copy of it. */
	if (seg >= 0 && (*sync_fd = fcntl(seg, F_DUPFD_CLOEXEC, 0)) < 0)
		err = fdatasync(seg) ? -errno : 0;
	flock(lock, LOCK_UN);
	pthread_mutex_unlock(&append_lock);
	return seg < 0 ? seg : err;
}

int journal_append(const struct journal *j, const char *line, size_t len, struct journal_pos *at)
{
	int sync_fd, err = append_one(j, line, len, at, &sync_fd);

	/* Synced outside the lock: concurrent executors' syncs overlap (the
	 * filesystem commits them together) instead of queueing one by one.
	 * Ours covers our line, written before it began. */
	if (sync_fd >= 0) {
		err = fdatasync(sync_fd) ? -errno : 0;
		close(sync_fd);
	}
	return err;
}

/* Sync and forget every segment the group wrote to; lock held. The first
 * failure is kept for the commit. */
static void group_sync_locked(struct journal_group *g)
{
	for (unsigned i = 0; i < g->n; i++) {
		if (fdatasync(g->fd[i]) && !g->err)
			g->err = -errno;
		close(g->fd[i]);
	}
	g->n = 0;
}

int journal_group_append(const struct journal *j, struct journal_group *g, const char *line,
			 size_t len, struct journal_pos *at)
{
	struct journal_pos pos = { 0, 0 };
	int fd, err = append_one(j, line, len, &pos, &fd);
	unsigned i;

	if (at)
		*at = pos;
	if (fd < 0)
		return err; /* failed, or synced already */
	pthread_mutex_lock(&g->lock);
	for (i = 0; i < g->n && g->seq[i] != pos.segment; i++)
		;
	if (i < g->n) { /* the segment is the group's already: its sync covers this line */
		close(fd);
	} else {
		if (g->n == JOURNAL_GROUP_SEGMENTS)
			group_sync_locked(g); /* a long request: its older segments now */
		g->seq[g->n] = pos.segment;
		g->fd[g->n++] = fd;
	}
	pthread_mutex_unlock(&g->lock);
	return 0;
}

int journal_group_commit(struct journal_group *g)
{
	int err;

	pthread_mutex_lock(&g->lock);
	group_sync_locked(g);
	err = g->err;
	g->err = 0;
	pthread_mutex_unlock(&g->lock);
	return err;
}

int journal_sync_segments(const char *dir, uint64_t from, uint64_t to)
{
	char path[PATH_MAX];
	int err = 0;

	for (uint64_t seq = from ? from : 1; seq <= to; seq++) {
		int fd, ret = journal_segment_path(dir, seq, path, sizeof(path));

		if (ret)
			return ret;
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			if (errno != ENOENT && !err) /* pruned: nothing of it is kept */
				err = -errno;
			continue;
		}
		if (fdatasync(fd) && !err)
			err = -errno;
		close(fd);
	}
	return err;
}

int journal_space(const struct journal *j, uint64_t *free_bytes)
{
	char path[PATH_MAX], *slash;
	struct statvfs st;

	/* The journal's filesystem: that of its nearest existing ancestor
	 * while it is not created yet (a check has no side effect). */
	snprintf(path, sizeof(path), "%s", j->dir);
	*free_bytes = 0;
	while (statvfs(path, &st)) {
		if (errno != ENOENT || !(slash = strrchr(path, '/')) || !strcmp(path, "/"))
			return -errno;
		slash[slash == path] = '\0'; /* "/x" -> "/" */
	}
	*free_bytes = (uint64_t)st.f_bavail * st.f_frsize;
	return *free_bytes < j->reserve_bytes ? -ENOSPC : 0;
}

void journal_space_describe(const struct journal *j, uint64_t free_bytes, char *buf, size_t len)
{
	snprintf(buf, len, "%s has %.1f MiB free, below the reserve of %.1f MiB", j->dir,
		 (double)free_bytes / (1 << 20), (double)j->reserve_bytes / (1 << 20));
}
