/* The sandbox's egress relay (see src/sandbox/sandbox_relay.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sandbox_landlock.h"
#include "sandbox_relay.h"

#define RELAY_BUF     16384
#define MAX_EVENTS    64
#define LISTENER_FLAG (1ULL << 63)
#define LIFE_TAG      (1ULL << 62)
#define FD_HEADROOM   16

/* Bytes flowing one way, from `from` to `to`. */
struct flow {
	size_t len, off;
	bool eof;  /* `from` said it is done */
	bool shut; /* and `to` was told (shutdown SHUT_WR) */
	char buf[RELAY_BUF];
};

struct conn {
	bool used, connecting;
	int fd[2];           /* 0: the tenant's side, 1: the destination's */
	uint32_t armed[2];   /* epoll events registered, 0: not registered */
	struct flow flow[2]; /* flow[0]: tenant -> destination, flow[1]: back */
};

struct relay {
	const struct sg_policy *policy;
	int ep;
	struct conn *conns;
	uint32_t n_conns, active;
	bool draining; /* main exited: deliver what the tenant sent, then go */
};

static void arm(struct relay *rl, uint32_t idx, int side, uint32_t events)
{
	struct conn *c = &rl->conns[idx];
	struct epoll_event ev = { .events = events, .data.u64 = ((uint64_t)idx << 1) | side };

	if (events == c->armed[side])
		return;
	if (!events)
		epoll_ctl(rl->ep, EPOLL_CTL_DEL, c->fd[side], NULL);
	else
		epoll_ctl(rl->ep, c->armed[side] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd[side], &ev);
	c->armed[side] = events;
}

/* Read from a side while its flow has room, write to it while the other
 * flow has data. (An unregistered fd reports nothing, so a closed peer
 * whose data we cannot take yet does not spin the loop.) */
static void rearm(struct relay *rl, uint32_t idx)
{
	struct conn *c = &rl->conns[idx];

	for (int side = 0; side < 2; side++) {
		const struct flow *out = &c->flow[side], *in = &c->flow[!side];
		uint32_t ev = 0;

		if (side == 1 && c->connecting) {
			ev = EPOLLOUT;
		} else if (!(side == 0 && c->connecting)) {
			if (!out->eof && out->len == 0)
				ev |= EPOLLIN;
			if (in->len > in->off)
				ev |= EPOLLOUT;
		}
		arm(rl, idx, side, ev);
	}
}

static void drop(struct relay *rl, uint32_t idx)
{
	struct conn *c = &rl->conns[idx];

	for (int side = 0; side < 2; side++) {
		arm(rl, idx, side, 0);
		close(c->fd[side]);
	}
	c->used = false;
	rl->active--;
}

/* The destination the tenant asked for: where its connect landed. */
static int destination(int fd, struct sockaddr_storage *dst, socklen_t *len, uint8_t addr16[16],
		       uint16_t *port)
{
	*len = sizeof(*dst);
	if (getsockname(fd, (struct sockaddr *)dst, len))
		return -errno;
	memset(addr16, 0, 16);
	if (dst->ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)dst;
		addr16[10] = addr16[11] = 0xff;
		memcpy(addr16 + 12, &a->sin_addr, 4);
		*port = ntohs(a->sin_port);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)dst;
		memcpy(addr16, &a->sin6_addr, 16);
		*port = ntohs(a->sin6_port);
	}
	return 0;
}

static void open_conn(struct relay *rl, int in)
{
	struct sockaddr_storage dst;
	socklen_t len;
	uint8_t addr16[16] = { 0 };
	uint16_t port = 0;
	uint32_t idx;
	int out;

	for (idx = 0; idx < rl->n_conns && rl->conns[idx].used; idx++)
		;
	/* Full, not allowed (a listener's port with another rule's
	 * address), or unreachable: the tenant sees its connection close. */
	if (idx == rl->n_conns || destination(in, &dst, &len, addr16, &port) ||
	    !egress_allowed(rl->policy, addr16, port, IPPROTO_TCP)) {
		close(in);
		return;
	}
	out = socket(dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (out < 0 || (connect(out, (struct sockaddr *)&dst, len) && errno != EINPROGRESS)) {
		if (out >= 0)
			close(out);
		close(in);
		return;
	}
	memset(&rl->conns[idx], 0, sizeof(rl->conns[idx]));
	rl->conns[idx] = (struct conn){ .used = true, .connecting = true, .fd = { in, out } };
	rl->active++;
	rearm(rl, idx);
}

static void accept_all(struct relay *rl, int listener)
{
	for (;;) {
		int in = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (in < 0)
			return; /* EAGAIN, or an error of that one connection */
		open_conn(rl, in);
	}
}

/* Move what can be moved; false when the connection is over. */
static bool pump(struct conn *c, int side, uint32_t events)
{
	struct flow *out = &c->flow[side], *in = &c->flow[!side];
	int err;
	socklen_t elen = sizeof(err);
	ssize_t n;

	if (c->connecting && side == 1) {
		if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &elen) || err)
			return false;
		c->connecting = false;
		return true;
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !out->eof && out->len == 0) {
		n = recv(c->fd[side], out->buf, sizeof(out->buf), 0);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (n == 0)
			out->eof = true;
		if (n > 0)
			out->len = (size_t)n;
	}
	if ((events & EPOLLOUT) && in->len > in->off) {
		n = send(c->fd[side], in->buf + in->off, in->len - in->off, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (n > 0)
			in->off += (size_t)n;
		if (in->off == in->len)
			in->len = in->off = 0;
	}
	/* A side that is done reading has its half-close passed on. */
	for (int s = 0; s < 2; s++) {
		struct flow *f = &c->flow[s];
		if (f->eof && f->len == 0 && !f->shut) {
			shutdown(c->fd[!s], SHUT_WR);
			f->shut = true;
		}
	}
	return !(c->flow[0].shut && c->flow[1].shut);
}

/* Draining, a connection is done once what the tenant sent is delivered
 * (its side is closed: main and its processes are gone). */
static bool delivered(const struct conn *c)
{
	return !c->connecting && c->flow[0].shut;
}

static void start_draining(struct relay *rl, const int *listeners, int n, int life_fd)
{
	rl->draining = true;
	epoll_ctl(rl->ep, EPOLL_CTL_DEL, life_fd, NULL);
	for (int i = 0; i < n; i++)
		close(listeners[i]); /* closing drops them from the epoll set */
	for (uint32_t idx = 0; idx < rl->n_conns; idx++)
		if (rl->conns[idx].used && delivered(&rl->conns[idx]))
			drop(rl, idx);
}

static _Noreturn void relay_loop(struct relay *rl, const int *listeners, int n, int life_fd)
{
	struct epoll_event evs[MAX_EVENTS], life = { .events = EPOLLIN, .data.u64 = LIFE_TAG };

	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.u64 = LISTENER_FLAG | (uint64_t)i };
		epoll_ctl(rl->ep, EPOLL_CTL_ADD, listeners[i], &ev);
	}
	epoll_ctl(rl->ep, EPOLL_CTL_ADD, life_fd, &life);
	for (;;) {
		int got;

		if (rl->draining && rl->active == 0)
			_exit(0);
		got = epoll_wait(rl->ep, evs, MAX_EVENTS, -1);
		for (int i = 0; i < got; i++) {
			uint64_t tag = evs[i].data.u64;
			uint32_t idx = (uint32_t)(tag >> 1);
			int side = (int)(tag & 1);

			if (tag == LIFE_TAG) {
				start_draining(rl, listeners, n, life_fd);
				continue;
			}
			if (tag & LISTENER_FLAG) {
				if (!rl->draining)
					accept_all(rl, listeners[tag & ~LISTENER_FLAG]);
				continue;
			}
			if (!rl->conns[idx].used)
				continue; /* dropped earlier in this batch */
			if (pump(&rl->conns[idx], side, evs[i].events) &&
			    !(rl->draining && delivered(&rl->conns[idx])))
				rearm(rl, idx);
			else
				drop(rl, idx);
		}
	}
}

/* Out of init's namespaces (network only) and privileges, into the
 * sandbox's confinement. */
static int confine(const struct sb_child_plan *p, int host_netns, int n_listeners)
{
	struct rlimit nofile = { 0 };
	int err;

	if (setns(host_netns, CLONE_NEWNET))
		return -errno;
	close(host_netns);
	nofile.rlim_cur = nofile.rlim_max =
		(rlim_t)n_listeners + 2 * p->net->policy->max_connections + FD_HEADROOM;
	if (setrlimit(RLIMIT_NOFILE, &nofile))
		return -errno;
	err = sb_child_drop_identity(p->uid, p->gid);
	if (err)
		return err;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (p->landlock_fd >= 0 && (err = landlock_enforce(p->landlock_fd)))
		return err;
	if (p->seccomp && (err = seccomp_filter_install(p->seccomp)))
		return err;
	return 0;
}

_Noreturn void sb_relay_run(const struct sb_child_plan *p, const int *listeners, int n,
			    int host_netns, int life_fd)
{
	int keep[SB_NET_MAX_LISTENERS + 5], n_keep = 0, err;
	struct relay rl = { .policy = p->net->policy };
	size_t bytes;

	err = sb_child_join_run(p);
	if (err)
		sb_child_fail(p, SB_STEP_CGROUP, err, -1);
	sb_child_reset_signals();
	for (int i = 0; i < n; i++)
		keep[n_keep++] = listeners[i];
	keep[n_keep++] = host_netns;
	keep[n_keep++] = life_fd;
	keep[n_keep++] = p->report_fd;
	if (p->landlock_fd >= 0)
		keep[n_keep++] = p->landlock_fd;
	/* Nothing else: not stdio, not init's or the executor's fds (the
	 * tenant's pipes among them). Nothing is opened instead: in the
	 * sandbox's cgroup the agent would judge that open as the tenant's. */
	sb_close_all_but(keep, n_keep);
	err = confine(p, host_netns, n);
	if (err)
		sb_child_fail(p, SB_STEP_NETWORK, err, -1);
	rl.n_conns = p->net->policy->max_connections;
	bytes = (size_t)rl.n_conns * sizeof(struct conn);
	rl.conns = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rl.ep = epoll_create1(EPOLL_CLOEXEC);
	if (rl.conns == MAP_FAILED || rl.ep < 0)
		sb_child_fail(p, SB_STEP_NETWORK, errno, -1);
	if (p->landlock_fd >= 0)
		close(p->landlock_fd);
	close(p->report_fd); /* set up: the parent waits for main's exec only */
	relay_loop(&rl, listeners, n, life_fd);
}
