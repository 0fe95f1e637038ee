/* Attaching and detaching the on-demand programs (see ondemand.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include "ondemand.h"
#include "pinned.h"
#include "pinset.h"

/* How long to wait for a detached link's release: up to 2 s. */
#define RELEASE_WAIT_US    2000
#define RELEASE_WAIT_TRIES 1000


int sg_ondemand_lock(void)
{
	int fd = open(sg_pin_root(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX)) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

void sg_ondemand_unlock(int lock_fd)
{
	if (lock_fd >= 0)
		close(lock_fd); /* releases the flock */
}

/* <pin root>/gen-<gen>/ondemand, or -ENOENT for gen 0 (none active). */
static int ondemand_dir(uint32_t gen, char *buf, size_t len)
{
	if (!gen)
		return -ENOENT;
	snprintf(buf, len, "%s/gen-%u/ondemand", sg_pin_root(), gen);
	return 0;
}

/* The tracefs id of category:event; tracefs is mounted where missing
 * (a fresh container, a minimal VM). */
static int tracepoint_id(const char *category, const char *event)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char path[PATH_MAX], text[32] = "";
	int fd = -1;
	ssize_t n;

	for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
		for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]) && fd < 0; i++) {
			snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[i], category,
				 event);
			fd = open(path, O_RDONLY | O_CLOEXEC);
		}
		if (fd < 0 && attempt == 0)
			mount("tracefs", roots[0], "tracefs", 0, NULL);
	}
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	return atoi(text);
}

/* -errno, with `why` saying which step failed. */
static int fail(char *why, size_t len, const char *name, const char *step)
{
	int err = -errno;

	snprintf(why, len, "attaching %s: %s: %s", name, step, strerror(errno));
	return err;
}

/* Attach the pinned program prog/`name` to its tracepoint and pin the
 * link as link/`name`. */
static int attach_one(const char *dir, const char *name, char *why, size_t len)
{
	struct perf_event_attr attr = { .type = PERF_TYPE_TRACEPOINT, .size = sizeof(attr) };
	char path[PATH_MAX], category[64];
	const char *colon = strchr(name, ':');
	int prog_fd = -1, pfd = -1, link_fd = -1, id, err = 0;

	if (!colon || (size_t)(colon - name) >= sizeof(category)) {
		snprintf(why, len, "on-demand program %s/%s: not <category>:<tracepoint>", dir,
			 name);
		return -EINVAL;
	}
	snprintf(category, sizeof(category), "%.*s", (int)(colon - name), name);
	id = tracepoint_id(category, colon + 1);
	if (id < 0) {
		snprintf(why, len, "tracepoint %s: no id in tracefs: %s", name, strerror(-id));
		return id;
	}
	snprintf(path, sizeof(path), "%s/link", dir);
	if (mkdir(path, 0700) && errno != EEXIST)
		return fail(why, len, name, "creating the link directory");
	snprintf(path, sizeof(path), "%s/prog/%s", dir, name);
	prog_fd = bpf_obj_get(path);
	if (prog_fd < 0)
		return fail(why, len, name, "opening the pinned program");
	attr.config = (uint64_t)id;
	pfd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		err = fail(why, len, name, "perf_event_open");
	/* A link unpinned a moment ago is released after an RCU grace period
	 * (bpffs frees its inode then): until then the program is still
	 * attached (watching), and the kernel refuses it a second time. */
	for (int tries = 0; !err && link_fd < 0; tries++) {
		link_fd = bpf_link_create(prog_fd, pfd, BPF_PERF_EVENT, NULL);
		if (link_fd < 0 && (errno != EEXIST || tries >= RELEASE_WAIT_TRIES))
			err = fail(why, len, name, "creating the link");
		else if (link_fd < 0)
			usleep(RELEASE_WAIT_US);
	}
	snprintf(path, sizeof(path), "%s/link/%s", dir, name);
	if (!err && bpf_obj_pin(link_fd, path))
		err = fail(why, len, name, "pinning the link");
	/* The pinned link holds the program and the perf event. */
	if (link_fd >= 0)
		close(link_fd);
	if (pfd >= 0)
		close(pfd);
	if (prog_fd >= 0)
		close(prog_fd);
	return err;
}

/* Calls fn(dir, name) for each on-demand program; stops at the first
 * error. */
static int for_each_program(const char *dir, int (*fn)(const char *, const char *, void *),
			    void *arg)
{
	char progs[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int err = 0;

	snprintf(progs, sizeof(progs), "%s/prog", dir);
	d = opendir(progs);
	if (!d)
		return -errno;
	while (!err && (de = readdir(d)))
		if (de->d_name[0] != '.')
			err = fn(dir, de->d_name, arg);
	closedir(d);
	return err;
}

static bool link_pinned(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/link/%s", dir, name);
	return stat(path, &st) == 0;
}

struct attach_arg {
	char *why;
	size_t len;
};

static int attach_missing(const char *dir, const char *name, void *arg_)
{
	struct attach_arg *arg = arg_;

	return link_pinned(dir, name) ? 0 : attach_one(dir, name, arg->why, arg->len);
}

/* Lock held: attach what generation `gen` (0: none active) has not. */
static int attach_locked(uint32_t gen, char *why, size_t len)
{
	struct attach_arg arg = { why, len };
	char dir[PATH_MAX];
	int err = ondemand_dir(gen, dir, sizeof(dir));

	if (!err)
		err = for_each_program(dir, attach_missing, &arg);
	return err == -ENOENT ? 0 : err; /* nothing on demand: LSM mode, or an older agent */
}

int sg_ondemand_attach(int lock_fd, uint32_t gen, char *why, size_t len)
{
	int lock = lock_fd, err;

	if (lock < 0) {
		lock = sg_ondemand_lock();
		if (lock < 0) {
			snprintf(why, len, "cannot lock %s: %s", sg_pin_root(), strerror(-lock));
			return lock;
		}
	}
	/* The generation is read under the lock: an agent switching
	 * generations holds it. */
	err = attach_locked(gen ? gen : sg_pinned_generation(), why, len);
	if (lock_fd < 0)
		sg_ondemand_unlock(lock);
	return err;
}

/* Lock held: attach what of the programs named in `facts` (generation
 * `gen`'s) is not attached. Each link is still looked for: a detacher
 * may have unpinned it since the last enrollment. */
static int attach_named(uint32_t gen, const struct sg_gen_facts *facts, char *why, size_t len)
{
	char dir[PATH_MAX];
	int err = ondemand_dir(gen, dir, sizeof(dir));

	for (int i = 0; !err && i < facts->ondemand_n; i++)
		if (!link_pinned(dir, facts->ondemand[i]))
			err = attach_one(dir, facts->ondemand[i], why, len);
	return err;
}

int sg_ondemand_attach_set(const struct sg_pinset *set, const struct sg_gen_facts *facts, char *why,
			   size_t len)
{
	int lock = sg_ondemand_lock(), err;
	uint32_t gen;

	if (lock < 0) {
		snprintf(why, len, "cannot lock %s: %s", sg_pin_root(), strerror(-lock));
		return lock;
	}
	/* The generation is read under the lock (an agent switching holds
	 * it); its names are used only when they are this generation's. */
	gen = sg_pinset_generation(set);
	if (gen && facts && facts->gen == gen && facts->ondemand_n >= 0)
		err = attach_named(gen, facts, why, len);
	else
		err = attach_locked(gen, why, len);
	sg_ondemand_unlock(lock);
	return err;
}

static int unpin_link(const char *dir, const char *name, void *arg)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/link/%s", dir, name);
	if (unlink(path) == 0)
		*(int *)arg = 1;
	return 0;
}

bool sg_ondemand_no_sandbox(void)
{
	int fd = sg_pinned_map("sg_sandboxes");
	uint64_t key;
	bool empty;

	if (fd < 0)
		return false;
	empty = bpf_map_get_next_key(fd, NULL, &key) != 0 && errno == ENOENT;
	close(fd);
	return empty;
}

int sg_ondemand_detach_if_idle(void)
{
	char dir[PATH_MAX];
	int lock = sg_ondemand_lock(), detached = 0, err;

	if (lock < 0)
		return lock;
	err = ondemand_dir(sg_pinned_generation(), dir, sizeof(dir));
	/* Unpinning a link detaches its program (nothing else holds it). */
	if (!err && sg_ondemand_no_sandbox())
		err = for_each_program(dir, unpin_link, &detached);
	sg_ondemand_unlock(lock);
	if (err == -ENOENT)
		return 0;
	return err ? err : detached;
}

static int count_linked(const char *dir, const char *name, void *arg)
{
	int *n = arg;

	n[0]++;
	n[1] += link_pinned(dir, name);
	return 0;
}

int sg_ondemand_attached(void)
{
	char dir[PATH_MAX];
	int n[2] = { 0, 0 }; /* programs, linked */
	int err = ondemand_dir(sg_pinned_generation(), dir, sizeof(dir));

	if (!err)
		err = for_each_program(dir, count_linked, n);
	if (err)
		return err;
	if (!n[0])
		return -ENOENT;
	return n[1] == n[0];
}
