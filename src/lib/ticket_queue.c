/* A first-come, first-served line across processes (see ticket_queue.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "clock.h"
#include "fs_util.h"
#include "ticket_queue.h"

struct ticket {
	uint64_t seq, until; /* until: its waiter's deadline, CLOCK_MONOTONIC ms */
	char name[72];       /* t-<16 hex seq>-<16 hex until>-<pid>-<8 hex> */
};

/* <dir>/queue, created on first use. An fd, or -errno. */
static int open_queue(const char *dir)
{
	char q[PATH_MAX];
	int fd;

	if ((size_t)snprintf(q, sizeof(q), "%s/queue", dir) >= sizeof(q))
		return -ENAMETOOLONG;
	fd = open(q, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT && (mkdir(q, 0755) == 0 || errno == EEXIST))
		fd = open(q, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

/* The line's lock, held: an fd, or -errno. */
static int lock_queue(int qfd)
{
	int fd = openat(qfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX)) {
		if (errno != EINTR) {
			int err = -errno;
			close(fd);
			return err;
		}
	}
	return fd;
}

static int by_seq(const void *a, const void *b)
{
	uint64_t x = ((const struct ticket *)a)->seq, y = ((const struct ticket *)b)->seq;

	return x < y ? -1 : x > y;
}

/* The tickets in the line, oldest first (malloc'd; *n may be 0), and the
 * highest ticket number seen. 0 or -errno. */
static int list_tickets(int qfd, struct ticket **out, size_t *n, uint64_t *last)
{
	DIR *d = fdopendir(dup(qfd));
	struct ticket *v = NULL;
	size_t cap = 0;
	struct dirent *e;
	int err = 0;

	*out = NULL;
	*n = 0;
	*last = 0;
	if (!d)
		return -errno;
	rewinddir(d); /* the dup shares qfd's offset, at its end after a first look */
	while ((e = readdir(d))) {
		unsigned long long seq, until;

		if (strncmp(e->d_name, "t-", 2) || strlen(e->d_name) >= sizeof(v->name) ||
		    sscanf(e->d_name, "t-%16llx-%16llx-", &seq, &until) != 2)
			continue;
		if (*n == cap) {
			struct ticket *nv = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));
			if (!nv) {
				err = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[*n].seq = seq;
		v[*n].until = until;
		snprintf(v[*n].name, sizeof(v[*n].name), "%s", e->d_name);
		if (seq > *last)
			*last = seq;
		(*n)++;
	}
	closedir(d);
	if (err) {
		free(v);
		*n = 0;
		return err;
	}
	if (*n)
		qsort(v, *n, sizeof(*v), by_seq);
	*out = v;
	return 0;
}

/* A writer end of a waiter's FIFO, or -1 when that waiter is gone (its
 * file is removed when it died without removing it itself). */
static int watch(int qfd, const char *name)
{
	int fd = openat(qfd, name, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;

	if (fd < 0) {
		if (errno == ENXIO) /* no reader: its waiter died */
			unlinkat(qfd, name, 0);
		return -1;
	}
	if (fstat(fd, &st) || !S_ISFIFO(st.st_mode)) {
		close(fd);
		unlinkat(qfd, name, 0); /* not a waiter's: it would hold up the line */
		return -1;
	}
	return fd;
}

/* The nearest live waiter ahead of ticket `mine` (watched: an fd whose
 * poll reports POLLERR when it leaves; *until its deadline), -ENOENT when
 * none, or -errno; and the highest ticket number in the line. A waiter
 * past its deadline is passed over: it is leaving, or stopped (SIGSTOP),
 * and must not hold up the line beyond its own queue timeout. Under the
 * lock. */
static int ahead_of(int qfd, uint64_t mine, uint64_t now, uint64_t *until, uint64_t *last)
{
	struct ticket *v;
	size_t n;
	int err = list_tickets(qfd, &v, &n, last), fd = -ENOENT;

	if (err)
		return err;
	for (size_t i = n; i-- > 0 && fd < 0;) {
		if (v[i].seq >= mine)
			continue;
		fd = watch(qfd, v[i].name); /* also removes a dead waiter's file */
		*until = v[i].until;
		if (fd >= 0 && v[i].until <= now)
			fs_close(&fd);
	}
	free(v);
	return fd < 0 ? -ENOENT : fd;
}

/* Join the line with ticket `seq`, waiting until `until`: *fd holds its
 * FIFO open. 0 or -errno. */
static int join(int qfd, uint64_t seq, uint64_t until, char *name, size_t len, int *fd)
{
	for (int tries = 0; tries < 8; tries++) {
		uint32_t rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
			rnd = (uint32_t)clock_ms(CLOCK_MONOTONIC) + (uint32_t)tries;
		snprintf(name, len, "t-%016llx-%016llx-%d-%08x", (unsigned long long)seq,
			 (unsigned long long)until, (int)getpid(), rnd);
		if (mkfifoat(qfd, name, 0600)) {
			if (errno == EEXIST)
				continue;
			return -errno;
		}
		/* O_RDWR: the waiter is its FIFO's reader (watchers' opens
		 * succeed while it lives) and opening never blocks. */
		*fd = openat(qfd, name, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
		if (*fd < 0) {
			int err = -errno;
			unlinkat(qfd, name, 0);
			return err;
		}
		return 0;
	}
	return -EEXIST;
}

/* The bell, held by the head of the line while it waits: -1 when it cannot
 * be had (the head then only rechecks). */
static int open_bell(int qfd)
{
	int fd = openat(qfd, "bell", O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 && errno == ENOENT && (mkfifoat(qfd, "bell", 0600) == 0 || errno == EEXIST))
		fd = openat(qfd, "bell", O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	return fd;
}

static void drain(int fd)
{
	char buf[256];

	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		;
}

/* The connection of the caller this thread waits for (ticket_queue_watch()). */
static __thread int watched = -1;

void ticket_queue_watch(int fd)
{
	watched = fd;
}

/* Sleep until fd reports `events` (or POLLERR), the watched caller hangs
 * up, or ms pass. A negative fd: only the last two. */
static void wait_on(int fd, short events, uint64_t ms)
{
	struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = watched } };

	poll(p, 2, (int)(ms > INT_MAX ? INT_MAX : ms));
}

static bool caller_gone(void)
{
	struct pollfd p = { .fd = watched };

	return watched >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

int ticket_queue_take(const char *dir, uint64_t wait_ms, ticket_queue_try_fn try, void *arg)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC), deadline = now + wait_ms, mine = UINT64_MAX, last,
		 until = 0;
	int qfd = open_queue(dir), lock = -1, ticket = -1, bell = -1, front, err;
	char name[sizeof(((struct ticket *)0)->name)];

	if (qfd < 0)
		return qfd;
	for (;;) {
		if (lock < 0 && (lock = err = lock_queue(qfd)) < 0)
			break;
		now = clock_ms(CLOCK_MONOTONIC);
		if (ticket >= 0 && now >= deadline) {
			err = -ETIMEDOUT; /* those behind may have passed us over */
			break;
		}
		front = ahead_of(qfd, mine, now, &until, &last);
		if (front == -ENOENT) { /* at the head of the line, or no line */
			if (ticket >= 0 && bell < 0)
				bell = open_bell(qfd);
			drain(bell); /* what rang before this try is seen by it */
			err = try(arg);
			if (err != -EBUSY)
				break;
		} else if (front < 0) {
			err = front;
			break;
		} else {
			err = -EBUSY;
		}
		now = clock_ms(CLOCK_MONOTONIC);
		if (!wait_ms || now >= deadline) {
			if (front >= 0)
				close(front);
			err = wait_ms ? -ETIMEDOUT : -EBUSY;
			break;
		}
		if (ticket < 0) {
			mine = last + 1;
			if ((err = join(qfd, mine, deadline, name, sizeof(name), &ticket))) {
				if (front >= 0)
					close(front);
				break;
			}
			if (front < 0)
				continue; /* the head now: take the bell, then try again */
		}
		fs_close(&lock);
		if (front >= 0) { /* until the one ahead leaves, or its deadline */
			wait_on(front, 0, (until < deadline ? until + 1 : deadline) - now);
			close(front);
		} else { /* until a release rings, or a holder may have died */
			wait_on(bell, POLLIN,
				deadline - now < TICKET_QUEUE_RECHECK_MS ? deadline - now
									 : TICKET_QUEUE_RECHECK_MS);
		}
		if (caller_gone()) {
			err = -ECONNABORTED; /* nobody to serve: leave the line */
			break;
		}
	}
	if (ticket >= 0) { /* leave the line: the one behind wakes */
		unlinkat(qfd, name, 0);
		close(ticket);
	}
	fs_close(&bell);
	fs_close(&lock);
	close(qfd);
	return err;
}

void ticket_queue_ring(const char *dir)
{
	char bell[PATH_MAX];
	int fd;

	if ((size_t)snprintf(bell, sizeof(bell), "%s/queue/bell", dir) >= sizeof(bell))
		return;
	/* O_RDWR: never blocks, and never SIGPIPE should the head just leave. */
	fd = open(bell, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	if (write(fd, "", 1) < 0) {
		/* full: the head has rings enough to wake on */
	}
	close(fd);
}
