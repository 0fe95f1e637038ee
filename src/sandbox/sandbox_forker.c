/* The init forker (see src/sandbox/sandbox_forker.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/log.h"
#include "lib/priority.h"
#include "sandbox_forker.h"

#define FORKER_MAGIC   0x53474b31u
#define FORKER_MSG_MAX (1u << 20)
#define FORKER_ENV     3
/* ctl, the cgroup, Landlock's ruleset, the first run's channel and
 * cgroup, and the v1 `tasks` files. */
#define FORKER_FDS (5 + SB_CTRL__COUNT)

/* A plan, flattened: no pointers (the forker's copy is rebuilt around
 * its own memory). The tail holds the root's operations, its string
 * arena, then the host name, the scratch and the environment, each
 * NUL-ended. */
struct forker_req {
	uint32_t magic;
	uint32_t tail_len;
	int nice; /* the asking thread's: a pool prepares below the runs */
	int unshare_flags;
	bool loopback;
	uint64_t proc_read;
	uid_t uid;
	gid_t gid;
	int n_rlimits;
	struct sb_rlimit rlimits[SB_MAX_RLIMITS];
	bool seccomp;
	bool landlock;
	bool pre;
	int8_t tasks[SB_CTRL__COUNT]; /* the index of its fd; -1: none */
	uint64_t n_ops, arena_len;
	struct sock_filter insns[SB_SECCOMP_MAX_INSNS];
	unsigned short n_insns;
	char base[sizeof(((struct sb_root_plan *)0)->base)];
	uint64_t tail[]; /* aligned for the operations */
};

/* How long a clone may take before the forker is given up on. A clone3
 * into a cgroup waits for the cgroup's fork lock at worst (an RCU grace
 * period: milliseconds, a second on a node in trouble); a forker that
 * takes longer is stuck or stopped, and every sandbox's preparation would
 * queue behind it for ever (the round trip holds the forker's lock).
 * SANDGUARD_FORKER_REPLY_MS sets another (tests). */
#define FORKER_REPLY_MS 10000

struct forker_reply {
	int err; /* errno of the clone; 0 */
	pid_t pid;
};

static struct {
	pthread_mutex_t lock;
	int sock; /* -1: none, or gone */
	pid_t pid;
} fk = { PTHREAD_MUTEX_INITIALIZER, -1, 0 };

/* ---- the forker's side: one process, one thread, no allocation ---- */

static union {
	struct forker_req req;
	char bytes[FORKER_MSG_MAX];
} in;
static struct sb_init_plan plan;
static struct sb_cgroup cg;
static struct sb_root_plan root;
static struct sb_seccomp filter;
static char *envp[FORKER_ENV + 1];
static char comm[17]; /* the executor's name: its inits keep it, as before */

/* The next NUL-ended string of the tail at *off, or NULL. */
static char *tail_str(char *tail, size_t len, size_t *off)
{
	char *s = tail + *off;
	char *nul = *off < len ? memchr(s, '\0', len - *off) : NULL;

	if (!nul)
		return NULL;
	*off += (size_t)(nul - s) + 1;
	return s;
}

/* The plan around the forker's copy of the request; fds[] as received. */
static int unflatten(size_t got, const int *fds, int nfds)
{
	struct forker_req *r = &in.req;
	char *tail = (char *)r->tail;
	size_t ops = r->n_ops * sizeof(struct sb_root_op), off, want = 2;
	struct sb_child_plan *c = &plan.child;

	want += r->landlock + 2 * r->pre;
	if (got < sizeof(*r) || r->magic != FORKER_MAGIC || got - sizeof(*r) != r->tail_len ||
	    r->n_ops > r->tail_len / sizeof(struct sb_root_op) ||
	    r->arena_len > r->tail_len - ops || r->n_rlimits < 0 || r->n_rlimits > SB_MAX_RLIMITS ||
	    r->n_insns > SB_SECCOMP_MAX_INSNS)
		return -EPROTO;
	memset(&plan, 0, sizeof(plan));
	memset(&cg, 0, sizeof(cg));
	cg.dir_fd = cg.procs_fd = -1;
	for (int i = 0; i < SB_CTRL__COUNT; i++) {
		cg.tasks_fd[i] = r->tasks[i] >= 0 && r->tasks[i] < nfds ? fds[r->tasks[i]] : -1;
		want += r->tasks[i] >= 0;
	}
	if ((size_t)nfds != want)
		return -EPROTO;
	memset(&root, 0, sizeof(root));
	root.ops = (struct sb_root_op *)r->tail;
	root.n_ops = root.cap_ops = r->n_ops;
	root.arena = tail + ops;
	root.len = root.cap = r->arena_len;
	memcpy(root.base, r->base, sizeof(root.base));
	root.base[sizeof(root.base) - 1] = '\0';
	off = ops + r->arena_len;
	plan.hostname = tail_str(tail, r->tail_len, &off);
	c->scratch = tail_str(tail, r->tail_len, &off);
	for (int i = 0; i < FORKER_ENV; i++)
		envp[i] = tail_str(tail, r->tail_len, &off);
	envp[FORKER_ENV] = NULL;
	if (!plan.hostname || !c->scratch || !envp[FORKER_ENV - 1])
		return -EPROTO;
	memcpy(filter.insns, r->insns, sizeof(filter.insns));
	filter.prog.len = r->n_insns;
	filter.prog.filter = filter.insns;

	plan.cg = &cg;
	plan.clone3 = true;
	plan.ctl = fds[0];
	plan.unshare_flags = r->unshare_flags;
	plan.loopback = r->loopback;
	plan.root = &root;
	plan.proc_read = r->proc_read;
	off = 2;
	c->landlock_fd = r->landlock ? fds[off++] : -1;
	plan.pre_chan = r->pre ? fds[off++] : -1;
	plan.pre_cgroup = r->pre ? fds[off++] : -1;
	c->report_fd = c->cgroup_procs_fd = -1;
	c->stdio[0] = c->stdio[1] = c->stdio[2] = -1;
	c->uid = r->uid;
	c->gid = r->gid;
	c->seccomp = r->seccomp ? &filter : NULL;
	c->n_rlimits = r->n_rlimits;
	memcpy(c->rlimits, r->rlimits, sizeof(c->rlimits));
	c->envp = envp;
	return 0;
}

static pid_t clone_init(int cgroup_fd)
{
	/* CLONE_PARENT: the executor's child (it reaps and kills it);
	 * exit_signal must be 0 with it (the forker's own, SIGCHLD, is
	 * used). */
	struct clone_args a = { .flags = CLONE_NEWPID | CLONE_INTO_CGROUP | CLONE_PARENT,
				.cgroup = (uint64_t)cgroup_fd };
	pid_t pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));

	if (pid == 0) {
		prctl(PR_SET_NAME, comm, 0, 0, 0);
		sb_init_run(&plan);
	}
	return pid;
}

static _Noreturn void forker_run(int sock, pid_t parent)
{
	bool may_renice = sg_can_raise_priority();

	/* Dies with the executor: its parent-death signal, and the
	 * socket's hang-up (read below). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) || getppid() != parent)
		_exit(0);
	prctl(PR_GET_NAME, comm, 0, 0, 0);
	prctl(PR_SET_NAME, "sg-forker", 0, 0, 0);
	/* Nothing of the executor's stays open here. */
	sb_close_all_but(&sock, 1);
	/* 0-2 taken, so that what it receives lands above them, as in the
	 * executor (a run's stdio goes there). */
	for (int fd = 0; fd >= 0 && fd <= 2;)
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int) * FORKER_FDS)];
		struct iovec iov = { .iov_base = in.bytes, .iov_len = sizeof(in.bytes) };
		struct msghdr mh = { .msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		struct forker_reply rep = { 0 };
		int fds[FORKER_FDS], nfds = 0;
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* the executor is done, or gone */
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

				for (int i = 0; i < k && nfds < FORKER_FDS; i++)
					memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int),
					       sizeof(int));
			}
		rep.err = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
				  ? EPROTO
				  : -unflatten((size_t)n, fds, nfds);
		/* The asking thread's priority for the clone, where it can be
		 * raised again (init returns to nice 0 before its run); never
		 * lowered otherwise: the next init would inherit it for good. */
		if (!rep.err && may_renice && setpriority(PRIO_PROCESS, 0, in.req.nice)) {
			/* the normal priority, then: init sets it anyway */
		}
		if (!rep.err) {
			rep.pid = clone_init(fds[1]);
			rep.err = rep.pid < 0 ? errno : 0;
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (send(sock, &rep, sizeof(rep), MSG_NOSIGNAL) != (ssize_t)sizeof(rep))
			_exit(0);
	}
}

/* ---- the executor's side ---- */

int sb_forker_start(char *detail, size_t dlen)
{
	int pair[2], size = (int)FORKER_MSG_MAX + 65536;
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair)) {
		snprintf(detail, dlen, "init forker: socketpair: %s", strerror(errno));
		return -errno;
	}
	/* A plan is a few tens of KB; a bigger one is cloned by the caller. */
	if (setsockopt(pair[0], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) ||
	    setsockopt(pair[1], SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)))
		sg_debug("init forker: larger socket buffers: %s", strerror(errno));
	pid = sb_clone(0);
	if (pid == 0)
		forker_run(pair[1], parent);
	close(pair[1]);
	if (pid < 0) {
		int err = errno;

		close(pair[0]);
		snprintf(detail, dlen, "init forker: fork: %s", strerror(err));
		return -err;
	}
	pthread_mutex_lock(&fk.lock);
	fk.sock = pair[0];
	fk.pid = pid;
	pthread_mutex_unlock(&fk.lock);
	return 0;
}

void sb_forker_stop(void)
{
	pid_t pid;

	pthread_mutex_lock(&fk.lock);
	if (fk.sock >= 0)
		close(fk.sock);
	fk.sock = -1;
	pid = fk.pid;
	fk.pid = 0;
	pthread_mutex_unlock(&fk.lock);
	/* Killed, not only hung up on: a stopped or stuck forker would
	 * never read the hang-up, and the wait would never end. It holds
	 * nothing (its inits are the executor's children). */
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
}

static int reply_ms(void)
{
	static int ms;
	const char *v;
	char *end;
	long x;

	if (ms)
		return ms;
	ms = FORKER_REPLY_MS;
	if ((v = getenv("SANDGUARD_FORKER_REPLY_MS")) && *v) {
		errno = 0;
		x = strtol(v, &end, 10);
		if (errno || *end || x < 1 || x > 3600000)
			sg_warn("init forker: SANDGUARD_FORKER_REPLY_MS=%s is not a number of "
				"milliseconds from 1 to 3600000: using %d",
				v, FORKER_REPLY_MS);
		else
			ms = (int)x;
	}
	return ms;
}

/* The request for plan p, its fds in fds[] (*nfds); NULL when it does
 * not fit. */
static struct forker_req *flatten(const struct sb_init_plan *p, int cgroup_fd, int *fds, int *nfds)
{
	const struct sb_child_plan *c = &p->child;
	const char *strs[2 + FORKER_ENV] = { p->hostname, c->scratch };
	size_t ops = p->root->n_ops * sizeof(struct sb_root_op), len = ops + p->root->len, off;
	struct forker_req *r;
	int n = 0;

	for (int i = 0; i < FORKER_ENV; i++)
		if (!c->envp || !(strs[2 + i] = c->envp[i]))
			return NULL;
	if (c->envp[FORKER_ENV] || (c->seccomp && c->seccomp->prog.len > SB_SECCOMP_MAX_INSNS))
		return NULL;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		len += strlen(strs[i]) + 1;
	if (sizeof(*r) + len > FORKER_MSG_MAX || !(r = calloc(1, sizeof(*r) + len)))
		return NULL;
	r->magic = FORKER_MAGIC;
	r->tail_len = (uint32_t)len;
	r->nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	r->unshare_flags = p->unshare_flags;
	r->loopback = p->loopback;
	r->proc_read = p->proc_read;
	r->uid = c->uid;
	r->gid = c->gid;
	r->n_rlimits = c->n_rlimits;
	memcpy(r->rlimits, c->rlimits, sizeof(r->rlimits));
	r->n_ops = p->root->n_ops;
	r->arena_len = p->root->len;
	memcpy(r->base, p->root->base, sizeof(r->base));
	if ((r->seccomp = c->seccomp != NULL)) {
		r->n_insns = c->seccomp->prog.len;
		memcpy(r->insns, c->seccomp->prog.filter, r->n_insns * sizeof(r->insns[0]));
	}
	if (ops)
		memcpy(r->tail, p->root->ops, ops);
	if (p->root->len)
		memcpy((char *)r->tail + ops, p->root->arena, p->root->len);
	off = ops + p->root->len;
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		size_t l = strlen(strs[i]) + 1;

		memcpy((char *)r->tail + off, strs[i], l);
		off += l;
	}
	fds[n++] = p->ctl;
	fds[n++] = cgroup_fd;
	if ((r->landlock = c->landlock_fd >= 0))
		fds[n++] = c->landlock_fd;
	if ((r->pre = p->pre_chan >= 0 && p->pre_cgroup >= 0)) {
		fds[n++] = p->pre_chan;
		fds[n++] = p->pre_cgroup;
	}
	for (int i = 0; i < SB_CTRL__COUNT; i++) {
		r->tasks[i] = p->cg->tasks_fd[i] >= 0 ? (int8_t)n : -1;
		if (p->cg->tasks_fd[i] >= 0)
			fds[n++] = p->cg->tasks_fd[i];
	}
	*nfds = n;
	return r;
}

static int ask(const struct forker_req *r, const int *fds, int nfds, struct forker_reply *rep)
{
	char cbuf[CMSG_SPACE(sizeof(int) * FORKER_FDS)] = { 0 };
	struct iovec iov = { .iov_base = (void *)r, .iov_len = sizeof(*r) + r->tail_len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	ssize_t n;

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	do
		n = sendmsg(fk.sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	/* Not sent (a datagram goes whole or not at all): the caller may
	 * clone init itself. */
	if (n < 0)
		return errno == EMSGSIZE || errno == ENOBUFS ? -EMSGSIZE : -ESHUTDOWN;
	do
		n = poll(&(struct pollfd){ .fd = fk.sock, .events = POLLIN }, 1, reply_ms());
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ETIMEDOUT;
	do
		n = recv(fk.sock, rep, sizeof(*rep), MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*rep) ? 0 : n < 0 ? -errno : -EPIPE;
}

bool sb_forker_clone_init(const struct sb_init_plan *p, int cgroup_fd, pid_t *pid)
{
	struct forker_reply rep = { 0 };
	struct forker_req *r;
	int fds[FORKER_FDS], nfds, err, dead_sock = -1;
	pid_t dead = 0;

	/* A relay's init is born outside the cgroup and moves in; without
	 * clone3, every init does: the caller's own clone. */
	if (p->migrate || !p->clone3 || p->child.net || cgroup_fd < 0 || p->ctl < 0)
		return false;
	/* The forker is looked for before the request is built: with none
	 * (a cold `sandguard exec`), not even the zeroed request and its page
	 * faults on the way to the clone. The lock is held for the round
	 * trip anyway, so building under it serializes nothing more. */
	pthread_mutex_lock(&fk.lock);
	r = fk.sock < 0 ? NULL : flatten(p, cgroup_fd, fds, &nfds);
	if (!r) {
		pthread_mutex_unlock(&fk.lock);
		return false;
	}
	err = ask(r, fds, nfds, &rep);
	if (err && err != -EMSGSIZE) {
		/* Gone, stuck, or out of step: no more asking. */
		if (err == -ETIMEDOUT)
			sg_warn("init forker: no answer to a clone within %d ms: killed; sandboxes' "
				"inits are cloned by the executor from now on",
				reply_ms());
		else
			sg_warn("init forker: %s: sandboxes' inits are cloned by the executor from "
				"now on",
				strerror(-err));
		/* Killed, and reaped below by this thread (outside the lock:
		 * the others clone their inits themselves meanwhile), so
		 * that it clones nothing more once it moves again. */
		dead = fk.pid;
		fk.pid = 0;
		if (dead > 0)
			kill(dead, SIGKILL);
		dead_sock = fk.sock;
		fk.sock = -1;
	}
	pthread_mutex_unlock(&fk.lock);
	free(r);
	if (dead > 0)
		while (waitpid(dead, NULL, 0) < 0 && errno == EINTR)
			;
	if (dead_sock >= 0) {
		/* An answer it sent before it died: this init, known after all. */
		if (err != -ESHUTDOWN &&
		    recv(dead_sock, &rep, sizeof(rep), MSG_DONTWAIT) == (ssize_t)sizeof(rep))
			err = 0;
		close(dead_sock);
	}
	if (err == -EMSGSIZE || err == -ESHUTDOWN)
		return false; /* not sent: the caller clones */
	/* Sent, no answer: the forker may have cloned this init before it
	 * died (then it is in the sandbox's cgroup, the caller's child:
	 * start_init() finds it there and the sandbox's teardown reaps it),
	 * so no second one on the same control socket: EAGAIN, the sandbox
	 * is made again. */
	if (err) {
		*pid = -1;
		errno = EAGAIN;
		return true;
	}
	*pid = rep.err ? -1 : rep.pid;
	if (rep.err)
		errno = rep.err;
	return true;
}
