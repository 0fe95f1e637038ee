/* The first run's main, forked by init ahead of its START (see
 * src/sandbox/sandbox_child.h). A warm launch then pays for the START's
 * delivery and the execve only: the fork, the child's first wake-up and
 * every step that does not depend on the run are done while the sandbox
 * waits in its pool.
 *
 * What keeps it as safe as a main forked at START:
 *  - it is born in the first run's cgroup (clone3), so the agent and the
 *    limits see it as that run's from its first instruction, and a kill of
 *    the run's cgroup, or the end of init's PID namespace, takes it;
 *  - before it waits, it holds nothing but its channel: init's fds are
 *    closed, the Landlock ruleset is enforced and closed, its identity is
 *    the slot's, and the seccomp filter is installed (all of which a START
 *    cannot change);
 *  - what a START brings (argv, rlimits, stdio, the report pipe) it takes
 *    from the executor directly, after init said READY; the executor's
 *    close of the channel without a START ends it (and init's end does);
 *  - only the first run has one: a verifier's next test starts from
 *    init's START, so no process waits beside a running test.
 * Async-signal-safe calls only. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include "sandbox_cgroup.h"
#include "sandbox_child.h"

/* The child: confined, then the run. Its confinement's failure goes to
 * init on `sync` (as a FAILED report), a START's to the run's report
 * pipe. */
static _Noreturn void prerun(const struct sb_init_plan *p, int sync)
{
	/* In this process's memory only: init's copies are never touched. */
	static struct sb_start msg;
	static char *argv[SB_START_ARGS + 1];
	struct sb_child_plan run = p->child;
	struct sb_child_report ok = { .type = SB_REPORT_READY };
	int keep[] = { sync, p->pre_chan, run.landlock_fd }, fds[SB_START_FDS], err;
	char go;

	sb_close_all_but(keep, 3);
	run.report_fd = sync;
	sb_child_confine(&run);
	/* READY to init, and wait for its go: init's READY reaches the
	 * executor before this process can exec. */
	if (write(sync, &ok, sizeof(ok)) != sizeof(ok) || read(sync, &go, 1) != 1)
		_exit(127);
	close(sync);
	err = sb_start_receive(p->pre_chan, &msg, fds);
	if (err == -ESHUTDOWN)
		_exit(0); /* the sandbox is torn down before its first run */
	close(p->pre_chan);
	if (!err)
		err = sb_start_decode(&msg, fds, argv, &run);
	if (err) {
		sb_start_refuse(fds[SB_FD_REPORT], SB_STEP_START, -err);
		_exit(127);
	}
	close(fds[SB_FD_CGROUP]); /* born in it */
	sb_child_start(&run);
}

pid_t sb_prerun_fork(const struct sb_init_plan *p, int *step, int *sync)
{
	struct sb_child_report r;
	int pair[2];
	pid_t pid;
	ssize_t n;

	*step = SB_STEP_FORK;
	*sync = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		return -errno;
	pid = sb_clone_into(0, p->pre_cgroup);
	if (pid == 0) {
		close(pair[0]);
		prerun(p, pair[1]);
	}
	close(pair[1]);
	/* The channel and the cgroup are the child's now. */
	close(p->pre_chan);
	close(p->pre_cgroup);
	if (pid < 0) {
		n = -errno;
		close(pair[0]);
		return (pid_t)n;
	}
	do
		n = recv(pair[0], &r, sizeof(r), 0);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(r) && r.type == SB_REPORT_READY) {
		*sync = pair[0];
		return pid;
	}
	close(pair[0]);
	if (n == (ssize_t)sizeof(r) && r.type == SB_REPORT_FAILED) {
		*step = r.step;
		return -(r.err ? r.err : EIO);
	}
	return n < 0 ? -errno : -EPIPE;
}

void sb_prerun_go(int sync)
{
	char go = 1;

	if (write(sync, &go, 1) != 1) {
		/* it is gone: init reaps it, and the run finds its channel closed */
	}
	close(sync);
}
