/* Feeding and draining a running sandbox (see src/sandbox/sandbox_io.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lib/fs_util.h"
#include "lib/clock.h"
#include "sandbox_io.h"

#define CHUNK          65536
#define READS_PER_TURN 16 /* a flooding fd must not starve the deadline */

/* Keep what fits under the limit; count the rest. */
static int keep(struct sb_capture *c, const char *buf, size_t n)
{
	size_t room = c->limit - c->len, take = n < room ? n : room;

	c->seen += n;
	if (c->seen > c->limit)
		c->truncated = true;
	if (!take)
		return 0;
	if (c->len + take + 1 > c->alloc) {
		size_t want = c->alloc ? c->alloc * 2 : CHUNK;
		char *p;

		if (want < c->len + take + 1)
			want = c->len + take + 1;
		if (want > c->limit + 1)
			want = c->limit + 1;
		p = realloc(c->data, want);
		if (!p)
			return -ENOMEM;
		c->data = p;
		c->alloc = want;
	}
	memcpy(c->data + c->len, buf, take);
	c->len += take;
	c->data[c->len] = '\0';
	return 0;
}

/* Read what is there (bounded per turn), through buf (CHUNK bytes). 0, or
 * -errno. */
static int drain(struct sb_capture *c, char *buf)
{
	for (int i = 0; i < READS_PER_TURN && c->fd >= 0; i++) {
		ssize_t n = read(c->fd, buf, CHUNK);

		if (n > 0) {
			int err = keep(c, buf, (size_t)n);
			if (err)
				return err;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		fs_close(&c->fd); /* EOF, or an error we cannot do anything about */
	}
	return 0;
}

void sb_feed(struct sb_feed *f)
{
	while (f->fd >= 0 && f->off < f->len) {
		size_t n = f->len - f->off;
		ssize_t w = write(f->fd, f->data + f->off, n < CHUNK ? n : CHUNK);

		if (w > 0) {
			f->off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		break; /* EPIPE: the program closed its stdin; its business */
	}
	fs_close(&f->fd);
}

/* Reads what is there on stdout and stderr; SB_PUMP_OVERSIZE when stdout
 * went over its limit, 0, or -errno. */
static int collect(struct sb_pump *p, const struct pollfd *fds, int out_i, int err_i)
{
	int err;

	/* Once per run, not per read: 64 KiB on the stack here left a session
	 * step some 40 KiB of a serve worker's 256 KiB to spare. */
	if (!p->chunk && (out_i >= 0 || err_i >= 0) && !(p->chunk = malloc(CHUNK)))
		return -ENOMEM;
	if (out_i >= 0 && fds[out_i].revents) {
		err = drain(&p->out, p->chunk);
		if (err)
			return err;
		if (p->out.seen > p->out.limit)
			return SB_PUMP_OVERSIZE;
	}
	if (err_i >= 0 && fds[err_i].revents)
		return drain(&p->err, p->chunk);
	return 0;
}

/* One turn: poll the pipes (and end_fd when watch_end), until `until`.
 * Returns collect()'s answer, or 1 when end_fd is ready. */
static int turn(struct sb_pump *p, bool watch_end, uint64_t until)
{
	struct pollfd fds[4];
	int nfds = 0, in_i = -1, out_i = -1, err_i = -1, end_i = -1, ret;
	uint64_t now = clock_ms(CLOCK_MONOTONIC);

	if (p->in.fd >= 0 && watch_end) {
		in_i = nfds;
		fds[nfds++] = (struct pollfd){ .fd = p->in.fd, .events = POLLOUT };
	}
	if (p->out.fd >= 0) {
		out_i = nfds;
		fds[nfds++] = (struct pollfd){ .fd = p->out.fd, .events = POLLIN };
	}
	if (p->err.fd >= 0) {
		err_i = nfds;
		fds[nfds++] = (struct pollfd){ .fd = p->err.fd, .events = POLLIN };
	}
	if (watch_end) {
		end_i = nfds;
		fds[nfds++] = (struct pollfd){ .fd = p->end_fd, .events = POLLIN };
	}
	uint64_t left = until > now ? until - now : 0;

	if (poll(fds, (nfds_t)nfds, left > INT_MAX ? INT_MAX : (int)left) < 0)
		return errno == EINTR ? 0 : -errno;
	if (in_i >= 0 && fds[in_i].revents)
		sb_feed(&p->in);
	ret = collect(p, fds, out_i, err_i);
	if (ret)
		return ret;
	return end_i >= 0 && fds[end_i].revents ? 1 : 0;
}

int sb_pump_run(struct sb_pump *p)
{
	if (p->in.len == 0)
		fs_close(&p->in.fd);
	if (p->end_fd < 0) {
		p->end_ms = clock_ms(CLOCK_MONOTONIC);
		fs_close(&p->in.fd); /* nobody left to read it */
		return SB_PUMP_EXITED;
	}
	for (;;) {
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		int ret;

		if (now >= p->deadline_ms) {
			p->end_ms = now;
			return SB_PUMP_DEADLINE;
		}
		ret = turn(p, true, p->deadline_ms);
		if (ret == 0)
			continue;
		p->end_ms = clock_ms(CLOCK_MONOTONIC);
		if (ret == 1) {
			fs_close(&p->in.fd); /* nobody left to read it */
			return SB_PUMP_EXITED;
		}
		return ret;
	}
}

int sb_pump_drain(struct sb_pump *p, uint64_t until_ms)
{
	fs_close(&p->in.fd);
	while ((p->out.fd >= 0 || p->err.fd >= 0) && clock_ms(CLOCK_MONOTONIC) < until_ms) {
		int ret = turn(p, false, until_ms);

		if (ret < 0 || ret == SB_PUMP_OVERSIZE)
			return ret;
	}
	return SB_PUMP_EXITED;
}

void sb_pump_close(struct sb_pump *p)
{
	free(p->chunk);
	p->chunk = NULL;
	fs_close(&p->in.fd);
	fs_close(&p->out.fd);
	fs_close(&p->err.fd);
}

void sb_sigpipe_block(struct sb_sigpipe_guard *g)
{
	sigset_t set, pending;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigpending(&pending);
	g->was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

void sb_sigpipe_restore(struct sb_sigpipe_guard *g)
{
	sigset_t set, pending;
	struct timespec zero = { 0 };

	sigpending(&pending);
	if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}
