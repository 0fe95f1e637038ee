/* Node-wide CPU commitments (see src/node/node_cpu.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/ticket_queue.h"
#include "node_cpu.h"

unsigned node_cpu_count(void)
{
	cpu_set_t set;
	long online;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	online = sysconf(_SC_NPROCESSORS_ONLN);
	return online > 0 ? (unsigned)online : 1;
}

/* CPUs (>= 0, bounded by the policy's and the variable's checks) to
 * millicores, rounded half up. Not llround(): the binary needs no libm, one
 * shared library less for every `sandguard exec` to load (Makefile). */
static uint32_t millicores(double cpus)
{
	return (uint32_t)(cpus * 1000 + 0.5);
}

int node_cpu_capacity(uint32_t *milli)
{
	const char *env = getenv("SANDGUARD_NODE_CPUS");
	char *end;
	double v;

	if (!env || !*env) {
		*milli = node_cpu_count() * 1000;
		return 0;
	}
	v = strtod(env, &end);
	if (*end || !(v >= 0.01 && v <= 65536))
		return -EINVAL;
	*milli = millicores(v);
	return 0;
}

/* This process's mark in the names of the commitments it makes, so that
 * admission counts its own without opening them: a commitment is unlinked
 * before its lock goes (node_cpu_release()), so a file with our mark is one
 * we hold. Another's is checked by its lock, an open, a flock and a close
 * under the line's lock. With a hundred sandboxes at once, nearly all of
 * them serve's own, those checks were most of an admission and held every
 * other admission of the node behind them. A fork makes a mark of its own:
 * its parent's files are not its. */
static uint64_t own_mark(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static pid_t marked_pid;
	static uint64_t mark;
	uint64_t m;

	pthread_mutex_lock(&lock);
	if (marked_pid != getpid() || !mark) {
		if (getrandom(&mark, sizeof(mark), 0) != sizeof(mark))
			mark = ((uint64_t)getpid() << 32) ^ clock_ms(CLOCK_MONOTONIC);
		mark |= 1; /* never 0, the unmarked */
		marked_pid = getpid();
	}
	m = mark;
	pthread_mutex_unlock(&lock);
	return m;
}

/* Millicores held by live commitments; dead holders' files are removed. */
static uint32_t committed(int dirfd)
{
	DIR *d = fdopendir(dup(dirfd));
	struct dirent *e;
	uint32_t sum = 0;
	char own[48]; /* "-<pid>-<mark>-", what follows the millicores in ours */
	size_t own_len = (size_t)snprintf(own, sizeof(own), "-%d-%016llx-", (int)getpid(),
					  (unsigned long long)own_mark());

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		unsigned long milli;
		char *end;
		int fd;

		if (strncmp(e->d_name, "c-", 2))
			continue;
		milli = strtoul(e->d_name + 2, &end, 10);
		if (end == e->d_name + 2 || *end != '-' || milli > UINT32_MAX)
			continue;
		if (!strncmp(end, own, own_len)) {
			sum += (uint32_t)milli; /* ours, held */
			continue;
		}
		fd = openat(dirfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			unlinkat(dirfd, e->d_name, 0); /* its holder died */
		else
			sum += (uint32_t)milli;
		close(fd);
	}
	closedir(d);
	return sum;
}

/* The directory's lock, held: an fd, or -errno. */
static int lock_dir(int dirfd)
{
	int lock = openat(dirfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (lock >= 0 && flock(lock, LOCK_EX)) {
		int err = -errno;
		close(lock);
		return err;
	}
	return lock < 0 ? -errno : lock;
}

struct attempt {
	const char *dir;
	uint32_t milli, cap;
	struct node_cpu_commit *c;
	uint32_t *used;
	bool tried;
};

/* One attempt (a ticket_queue_try_fn), under the directory's lock: 0 held,
 * -EBUSY full, -errno. */
static int try_commit(void *arg)
{
	struct attempt *a = arg;
	struct node_cpu_commit *c = a->c;
	int dirfd = open(a->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), lock = -1, err = 0;
	uint32_t rnd = 0;

	if (dirfd < 0)
		return -errno;
	a->tried = true;
	if ((lock = err = lock_dir(dirfd)) < 0)
		goto out;
	err = 0;
	*a->used = committed(dirfd);
	if (*a->used + a->milli > a->cap) {
		err = -EBUSY;
		goto out;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) < 0)
		rnd = (uint32_t)clock_ms(CLOCK_MONOTONIC);
	snprintf(c->path, sizeof(c->path), "%s/c-%u-%d-%016llx-%08x", a->dir, a->milli,
		 (int)getpid(), (unsigned long long)own_mark(), rnd);
	c->fd = open(c->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c->fd < 0 || flock(c->fd, LOCK_EX)) {
		err = -errno;
		if (c->fd >= 0)
			unlink(c->path); /* marked ours: never left unheld */
		fs_close(&c->fd);
		goto out;
	}
	c->milli = a->milli;
out:
	fs_close(&lock);
	close(dirfd);
	return err;
}

/* What is held, for the message of a caller that never reached the head
 * of the line. */
static uint32_t peek_used(const char *dir)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), lock;
	uint32_t used = 0;

	if (dirfd < 0)
		return 0;
	if ((lock = lock_dir(dirfd)) >= 0) {
		used = committed(dirfd);
		close(lock);
	}
	close(dirfd);
	return used;
}

int node_line_commit(const char *sub, uint32_t amount, uint32_t cap, uint64_t wait_ms,
		     struct node_cpu_commit *c, uint32_t *used)
{
	char dir[PATH_MAX];
	struct attempt a = { .dir = dir, .c = c, .used = used, .milli = amount, .cap = cap };
	int err;

	c->fd = -1;
	c->path[0] = '\0';
	*used = 0;
	err = fs_run_subdir(sub, 0755, dir, sizeof(dir));
	if (err)
		return err;
	/* In arrival order: a newcomer never takes what a waiter waits for. */
	err = ticket_queue_take(dir, wait_ms, try_commit, &a);
	if ((err == -EBUSY || err == -ETIMEDOUT) && !a.tried)
		*used = peek_used(dir);
	return err;
}

/* Commit `cpu` cores in the line <run>/<sub> of capacity *cap. */
static int commit_in(const char *sub, double cpu, uint64_t wait_ms, struct node_cpu_commit *c,
		     uint32_t *used, const uint32_t *cap)
{
	uint32_t milli = millicores(cpu), node = node_cpu_count() * 1000;

	/* The whole node (or all it may commit), and no more: admissible
	 * whenever the node is idle. */
	if (milli > node)
		milli = node;
	if (milli > *cap)
		milli = *cap;
	if (milli == 0)
		milli = 1;
	return node_line_commit(sub, milli, *cap, wait_ms, c, used);
}

int node_cpu_commit(double cpu, uint64_t wait_ms, struct node_cpu_commit *c, uint32_t *used,
		    uint32_t *cap)
{
	int err;

	c->fd = -1;
	c->path[0] = '\0';
	*used = 0;
	err = node_cpu_capacity(cap);
	return err ?: commit_in("cpu", cpu, wait_ms, c, used, cap);
}

int node_cpu_commit_confirmation(double cpu, uint64_t wait_ms, struct node_cpu_commit *c,
				 uint32_t *used, uint32_t *cap)
{
	c->fd = -1;
	c->path[0] = '\0';
	*used = 0;
	*cap = node_cpu_count() * 1000; /* the real CPUs: never overcommitted */
	return commit_in("cpu-confirm", cpu, wait_ms, c, used, cap);
}

/* The directory a commitment's file is in. */
static const char *dirname_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	snprintf(buf, len, "%.*s", (int)n, path);
	return buf;
}

void node_cpu_release(struct node_cpu_commit *c)
{
	char dir[PATH_MAX];

	if (c->fd < 0)
		return;
	unlink(c->path); /* before the lock goes: no one counts it after */
	fs_close(&c->fd);
	ticket_queue_ring(dirname_of(c->path, dir, sizeof(dir)));
	c->path[0] = '\0';
}
