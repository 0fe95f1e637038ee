/* The sandbox's init, PID 1 of its PID namespace (see
 * src/sandbox/sandbox_child.h). It does what needs root before any tenant
 * code exists, says READY, and then serves runs: for each START it starts
 * the relay and main inside the run's cgroup, reaps, and says DONE with
 * main's wait status (the first run's main it forks right after READY, to
 * wait for its START: sandbox_child.c). It never runs tenant code; it
 * keeps only the capabilities a run's start needs (its processes' uid
 * change, the relay's way back to the host's network, the next run's
 * fresh IPC namespace), and its exit takes everything left in the
 * namespace with it.
 * Async-signal-safe calls only. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "lib/array_len.h"
#include "lib/fs_util.h"
#include "sandbox_child.h"
#include "sandbox_relay.h"

/* What init keeps: the uid change of a run's processes, the relay's setns
 * back to the host's network and the next run's unshare(CLONE_NEWIPC). */
#define KEPT_CAPS ((1ULL << CAP_SETUID) | (1ULL << CAP_SETGID) | (1ULL << CAP_SYS_ADMIN))

struct init_state {
	const struct sb_init_plan *p;
	int sigfd;
	int listeners[SB_NET_MAX_LISTENERS], n_listeners;
	int host_netns;
	pid_t main, relay; /* 0: none */
	int main_status;
	bool main_done;
	int life_fd;          /* write end: closing it tells the relay to drain; -1 */
	uint64_t drain_until; /* ms, CLOCK_MONOTONIC */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void tell(int fd, const struct sb_child_report *r)
{
	if (send(fd, r, sizeof(*r), MSG_NOSIGNAL) < 0) {
		/* the executor is gone: the closed socket ends us next */
	}
}

static _Noreturn void fail(const struct sb_init_plan *p, int step, int err, int op)
{
	struct sb_child_report r = {
		.type = SB_REPORT_FAILED, .step = step, .err = err > 0 ? err : -err, .op = op
	};

	tell(p->ctl, &r);
	_exit(127);
}

static int keep_only_needed_caps(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };

	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (!(KEPT_CAPS & (1ULL << cap)))
			prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	data[0].permitted = data[0].effective = (uint32_t)KEPT_CAPS;
	data[1].permitted = data[1].effective = (uint32_t)(KEPT_CAPS >> 32);
	if (syscall(SYS_capset, &hdr, data) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return -errno;
	return 0;
}

/* The network, before init is in the sandbox's cgroup (only when there is
 * a relay: init was born outside for this). A socket belongs to the cgroup
 * that made it, and an accepted one to its listener's: the relay's end of
 * a tenant's connection is plumbing, not tenant traffic for the agent's
 * egress filter to judge. */
static void make_network(const struct sb_init_plan *p, struct init_state *st)
{
	int err;

	st->host_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (st->host_netns < 0)
		fail(p, SB_STEP_NETWORK, errno, -1);
	if (syscall(SYS_unshare, CLONE_NEWNET))
		fail(p, SB_STEP_UNSHARE, errno, -1);
	err = sb_net_setup(p->child.net, st->listeners, &st->n_listeners);
	if (err)
		fail(p, SB_STEP_NETWORK, err, -1);
}

static void set_up(const struct sb_init_plan *p, struct init_state *st)
{
	int keep[SB_NET_MAX_LISTENERS + 8], n = 0, unshare_flags = p->unshare_flags, err;
	sigset_t chld;
	size_t op;

	if (p->child.net) {
		make_network(p, st);
		unshare_flags &= ~CLONE_NEWNET;
	}
	err = sb_cgroup_join_self(p->cg, p->migrate);
	if (err)
		fail(p, SB_STEP_CGROUP, err, -1);
	keep[n++] = p->ctl;
	keep[n++] = p->child.landlock_fd;
	keep[n++] = st->host_netns;
	keep[n++] = p->pre_chan;
	keep[n++] = p->pre_cgroup;
	for (int i = 0; i < st->n_listeners; i++)
		keep[n++] = st->listeners[i];
	/* Nothing of the executor's stays open in init: not its stdio, not
	 * other sandboxes' pipes (an idle init holding them would keep them
	 * open). */
	sb_close_all_but(keep, n);
	/* Nothing of the executor's signal handling; SIGCHLD arrives on a
	 * signalfd (not an open: the agent judges every open in here). */
	err = sb_child_reset_signals();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (err || sigprocmask(SIG_BLOCK, &chld, NULL))
		fail(p, SB_STEP_SIGNALS, err ? err : errno, -1);
	st->sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (st->sigfd < 0)
		fail(p, SB_STEP_SIGNALS, errno, -1);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		fail(p, SB_STEP_PDEATHSIG, errno, -1);
	if (syscall(SYS_unshare, unshare_flags))
		fail(p, SB_STEP_UNSHARE, errno, -1);
	/* Listeners without a relay: a loopback of the sandbox's own, in the
	 * namespace just made (a relay's set-up above brought it up). */
	if (p->loopback && (unshare_flags & CLONE_NEWNET)) {
		err = sb_net_setup(NULL, st->listeners, &st->n_listeners);
		if (err)
			fail(p, SB_STEP_NETWORK, err, -1);
	}
	if (sethostname(p->hostname, strlen(p->hostname)))
		fail(p, SB_STEP_HOSTNAME, errno, -1);
	err = sb_root_enter(p->root, p->child.landlock_fd, p->proc_read, &op);
	if (err)
		fail(p, SB_STEP_ROOT, err, (int)op);
	/* A pool prepares at a lower priority; the runs get the normal one. */
	if (setpriority(PRIO_PROCESS, 0, 0))
		fail(p, SB_STEP_CAPABILITIES, errno, -1);
	err = keep_only_needed_caps();
	if (err)
		fail(p, SB_STEP_CAPABILITIES, err, -1);
}

static pid_t start_in(const struct sb_init_plan *p, struct sb_child_plan *run, int cgroup_fd)
{
	if (p->clone3)
		return sb_clone_into(0, cgroup_fd);
	run->cgroup_procs_fd = cgroup_fd;
	return sb_clone(0);
}

static void start_run(struct init_state *st)
{
	/* In init's memory only: the executor's copies are never touched. */
	static struct sb_start msg;
	static char *argv[SB_START_ARGS + 1];
	const struct sb_init_plan *p = st->p;
	struct sb_child_plan run = p->child;
	int fds[SB_START_FDS], life[2] = { -1, -1 }, err;

	err = sb_start_receive(p->ctl, &msg, fds);
	if (err == -ESHUTDOWN)
		_exit(0); /* the executor closed the socket: the sandbox is done */
	if (!err)
		err = sb_start_decode(&msg, fds, argv, &run);
	if (!err && run.net && pipe2(life, O_CLOEXEC))
		err = -errno;
	if (!err && run.net) {
		st->relay = start_in(p, &run, fds[SB_FD_CGROUP]);
		if (st->relay == 0) {
			close(life[1]);
			sb_relay_run(&run, st->listeners, st->n_listeners, st->host_netns, life[0]);
		}
		if (st->relay < 0)
			err = -errno;
		close(life[0]);
		st->life_fd = life[1];
		if (err)
			fs_close(&st->life_fd);
	}
	if (!err) {
		st->main = start_in(p, &run, fds[SB_FD_CGROUP]);
		if (st->main == 0)
			sb_child_exec(&run);
		if (st->main < 0)
			err = -errno;
	}
	if (err) {
		st->main = 0;
		st->main_done = true; /* DONE, main_ran 0 */
		sb_start_refuse(fds[SB_FD_REPORT],
				err == -EPROTO || err == -EBADF ? SB_STEP_START : SB_STEP_FORK,
				-err);
	}
	for (int i = 0; i < SB_START_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Reap everything; note main's end and start the relay's drain. */
static void reap(struct init_state *st)
{
	struct signalfd_siginfo si;

	while (read(st->sigfd, &si, sizeof(si)) > 0)
		;
	for (;;) {
		int ws;
		pid_t pid = waitpid(-1, &ws, WNOHANG);

		if (pid <= 0)
			break;
		if (pid == st->relay)
			st->relay = 0;
		if (pid == st->main) {
			st->main = 0;
			st->main_status = ws;
			st->main_done = true;
			/* The relay gets a moment to deliver what main sent
			 * before it exited (a network would, after close()). */
			fs_close(&st->life_fd);
			st->drain_until = now_ms() + SB_RELAY_DRAIN_MS;
		}
	}
}

/* Main is gone (and the relay, or its drain time): DONE, and a fresh IPC
 * namespace for the next run, so that no SysV object or POSIX message
 * queue of this one is there for it. */
static void finish_run(struct init_state *st, bool main_ran)
{
	struct sb_child_report r = { .type = SB_REPORT_DONE,
				     .main_ran = main_ran,
				     .wait_status = st->main_status };

	tell(st->p->ctl, &r);
	st->main_done = false;
	st->relay = 0;
	if (syscall(SYS_unshare, CLONE_NEWIPC))
		_exit(127); /* the executor finds the sandbox dead: not reused */
}

_Noreturn void sb_init_run(const struct sb_init_plan *p)
{
	struct init_state st = { .p = p, .host_netns = -1, .life_fd = -1 };
	struct sb_child_report ready = { .type = SB_REPORT_READY };
	bool ran = false;

	set_up(p, &st);
	tell(p->ctl, &ready);
	/* After READY: the executor reads it before the first run's execve
	 * (the pre-forked main's START can be queued before READY is). */
	if (p->pre_chan >= 0) {
		pid_t pid = sb_prerun_fork(p);

		if (pid < 0)
			fail(p, SB_STEP_FORK, -pid, -1);
		st.main = pid;
		ran = true;
	}
	for (;;) {
		bool running = st.main > 0 || st.main_done;
		/* A START is read only between runs (the executor sends one
		 * at a time); a hang-up is seen always. */
		struct pollfd fds[2] = { { .fd = p->ctl, .events = running ? 0 : POLLIN },
					 { .fd = st.sigfd, .events = POLLIN } };
		int timeout = -1;

		if (st.main_done) {
			uint64_t now = now_ms();

			if (st.relay == 0 || now >= st.drain_until) {
				finish_run(&st, ran);
				continue;
			}
			timeout = (int)(st.drain_until - now);
		}
		if (poll(fds, 2, timeout) < 0 && errno != EINTR)
			_exit(127);
		if (fds[1].revents)
			reap(&st);
		if (fds[0].revents & (POLLHUP | POLLERR))
			_exit(0); /* the executor is done with the sandbox, or gone */
		if ((fds[0].revents & POLLIN) && !running) {
			start_run(&st);
			ran = st.main > 0;
		}
	}
}
