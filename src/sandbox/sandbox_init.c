/* The sandbox's init, PID 1 of its PID namespace (see
 * src/sandbox/sandbox_child.h). It does what needs root before any tenant
 * code exists, starts the relay and main, and then only reaps: it never
 * runs tenant code, holds no capability once main is started, and its
 * exit (when main's ends) takes everything left in the namespace with it.
 * Async-signal-safe calls only. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sandbox_child.h"
#include "sandbox_relay.h"

static const char *const oom_never = "-1000";

/* Out of the OOM killer's reach: it would pick init only if nothing else
 * were left, and its death would be a platform error, not the tenant's. */
static void oom_protect(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, oom_never, 5) < 0) {
		/* best effort: the sandbox's memory limit still holds */
	}
	close(fd);
}

/* init's side of the run, once main started. */
struct init_state {
	pid_t main, relay;
	int status_fd; /* struct sb_init_status to the parent */
	int life_fd;   /* write end: closing it tells the relay to drain; -1 */
};

/* After main started: no fd but the status pipe and the relay's life pipe
 * (no stdio either: init opens nothing once in the sandbox, where the
 * agent would judge it), no capabilities, nothing to gain by exec. */
static int shed(const struct sb_child_plan *p, struct init_state *st)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct none[2] = { { 0 } };

	if (dup2(p->status_fd, 3) != 3 || (st->life_fd >= 0 && dup2(st->life_fd, 4) != 4))
		return -errno;
	st->status_fd = 3;
	st->life_fd = st->life_fd >= 0 ? 4 : -1;
	syscall(__NR_close_range, 0U, 2U, 0U);
	syscall(__NR_close_range, st->life_fd >= 0 ? 5U : 4U, ~0U, 0U);
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	if (syscall(SYS_capset, &hdr, none) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return -errno;
	return 0;
}

/* Main is gone: the relay gets a moment to deliver what main sent
 * before it exited (a network would, after close()), not longer. */
static void drain_relay(struct init_state *st)
{
	struct pollfd exited = { .events = POLLIN };

	if (st->relay <= 0)
		return;
	exited.fd = (int)syscall(SYS_pidfd_open, st->relay, 0);
	close(st->life_fd);
	if (exited.fd >= 0) {
		while (poll(&exited, 1, SB_RELAY_DRAIN_MS) < 0 && errno == EINTR)
			;
		close(exited.fd);
	}
}

/* Reap everything; when main is reaped, tell the parent how it ended. */
static _Noreturn void reap(struct init_state *st)
{
	struct sb_init_status report = { 0 };

	for (;;) {
		int ws;
		pid_t pid = waitpid(-1, &ws, 0);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid == st->relay)
			st->relay = 0;
		if (pid < 0 || pid == st->main) {
			report.main_ran = pid == st->main;
			report.wait_status = ws;
			drain_relay(st);
			if (write(st->status_fd, &report, sizeof(report)) < 0) {
				/* the parent is gone: nobody to tell */
			}
			_exit(0);
		}
	}
}

static int start_relay(const struct sb_child_plan *p, const int *listeners, int n, int host_netns,
		       struct init_state *st)
{
	int life[2];

	if (pipe2(life, O_CLOEXEC))
		return -errno;
	st->relay = sb_clone(0);
	if (st->relay < 0)
		return -errno;
	if (st->relay == 0) {
		close(life[1]);
		sb_relay_run(p, listeners, n, host_netns, life[0]);
	}
	close(life[0]);
	st->life_fd = life[1];
	return 0;
}

_Noreturn void sb_init_run(const struct sb_child_plan *p)
{
	int listeners[SB_NET_MAX_LISTENERS], n_listeners = 0, host_netns = -1, err;
	struct init_state st = { .life_fd = -1 };
	size_t op;

	/* Before init is in the sandbox: the two files it opens (from the
	 * sandbox's cgroup on, the agent judges every open as the tenant's),
	 * and its network with the relay's listeners. A socket belongs to
	 * the cgroup that made it, and an accepted one to its listener's:
	 * the relay's end of a tenant's connection is plumbing, not tenant
	 * traffic for the agent's egress filter to judge. */
	oom_protect();
	if (p->net && (host_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		sb_child_fail(p, SB_STEP_NETWORK, errno, -1);
	if (syscall(SYS_unshare, CLONE_NEWNET))
		sb_child_fail(p, SB_STEP_UNSHARE, errno, -1);
	if (p->net && (err = sb_net_setup(p->net, listeners, &n_listeners)))
		sb_child_fail(p, SB_STEP_NETWORK, err, -1);
	/* Then into the sandbox, so that anything done here is charged to
	 * it; then nothing of the executor's signal handling. */
	err = sb_cgroup_join_self(p->cg);
	if (err)
		sb_child_fail(p, SB_STEP_CGROUP, err, -1);
	err = sb_child_reset_signals();
	if (err)
		sb_child_fail(p, SB_STEP_SIGNALS, err, -1);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		sb_child_fail(p, SB_STEP_PDEATHSIG, errno, -1);
	if (syscall(SYS_unshare, p->unshare_flags & ~CLONE_NEWNET))
		sb_child_fail(p, SB_STEP_UNSHARE, errno, -1);
	if (sethostname(p->hostname, strlen(p->hostname)))
		sb_child_fail(p, SB_STEP_HOSTNAME, errno, -1);
	err = sb_root_enter(p->root, p->landlock_fd, p->proc_read, &op);
	if (err)
		sb_child_fail(p, SB_STEP_ROOT, err, (int)op);
	if (p->net && (err = start_relay(p, listeners, n_listeners, host_netns, &st)))
		sb_child_fail(p, SB_STEP_FORK, err, -1);
	st.main = sb_clone(0);
	if (st.main < 0)
		sb_child_fail(p, SB_STEP_FORK, errno, -1);
	if (st.main == 0)
		sb_child_exec(p);
	if (shed(p, &st))
		_exit(127); /* main runs; without a status, the parent sees a kill */
	reap(&st);
}
