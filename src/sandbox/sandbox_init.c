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
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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

/* After main started: no fd but the status pipe, stdio on /dev/null,
 * no capabilities, nothing to gain by exec. */
static int shed(const struct sb_child_plan *p, int *status_fd)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct none[2] = { { 0 } };
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	for (int i = 0; fd >= 0 && i < 3; i++)
		dup2(fd, i);
	if (dup2(p->status_fd, 3) != 3)
		return -errno;
	*status_fd = 3;
	syscall(__NR_close_range, 4U, ~0U, 0U);
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	if (syscall(SYS_capset, &hdr, none) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return -errno;
	return 0;
}

/* Reap everything; when main is reaped, tell the parent how it ended. */
static _Noreturn void reap(pid_t main, int status_fd)
{
	struct sb_init_status st = { 0 };

	for (;;) {
		int ws;
		pid_t pid = waitpid(-1, &ws, 0);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0 || pid == main) {
			st.main_ran = pid == main;
			st.wait_status = ws;
			if (write(status_fd, &st, sizeof(st)) < 0) {
				/* the parent is gone: nobody to tell */
			}
			_exit(0);
		}
	}
}

static int start_relay(const struct sb_child_plan *p, const int *listeners, int n, int host_netns)
{
	pid_t pid = sb_clone(0);

	if (pid < 0)
		return -errno;
	if (pid == 0)
		sb_relay_run(p, listeners, n, host_netns);
	return 0;
}

_Noreturn void sb_init_run(const struct sb_child_plan *p)
{
	int listeners[SB_NET_MAX_LISTENERS], n_listeners = 0, host_netns = -1, status_fd, err;
	size_t op;
	pid_t main;

	/* First, so that anything done here is inside the sandbox and is
	 * charged to it; then nothing of the executor's signal handling. */
	err = sb_cgroup_join_self(p->cg);
	if (err)
		sb_child_fail(p, SB_STEP_CGROUP, err, -1);
	err = sb_child_reset_signals();
	if (err)
		sb_child_fail(p, SB_STEP_SIGNALS, err, -1);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		sb_child_fail(p, SB_STEP_PDEATHSIG, errno, -1);
	oom_protect();
	if (p->net && (host_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		sb_child_fail(p, SB_STEP_NETWORK, errno, -1);
	if (syscall(SYS_unshare, p->unshare_flags))
		sb_child_fail(p, SB_STEP_UNSHARE, errno, -1);
	if (sethostname(p->hostname, strlen(p->hostname)))
		sb_child_fail(p, SB_STEP_HOSTNAME, errno, -1);
	if (p->net && (err = sb_net_setup(p->net, listeners, &n_listeners)))
		sb_child_fail(p, SB_STEP_NETWORK, err, -1);
	err = sb_root_enter(p->root, p->landlock_fd, p->proc_read, &op);
	if (err)
		sb_child_fail(p, SB_STEP_ROOT, err, (int)op);
	if (p->net && (err = start_relay(p, listeners, n_listeners, host_netns)))
		sb_child_fail(p, SB_STEP_FORK, err, -1);
	main = sb_clone(0);
	if (main < 0)
		sb_child_fail(p, SB_STEP_FORK, errno, -1);
	if (main == 0)
		sb_child_exec(p);
	if (shed(p, &status_fd))
		_exit(127); /* main runs; without a status, the parent sees a kill */
	reap(main, status_fd);
}
