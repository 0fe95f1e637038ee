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
 *    from the executor directly; init forks it after READY, so that the
 *    executor has READY before the run's execve; a failed step is reported
 *    on the run's report pipe, as main's would be; the executor's close of
 *    the channel without a START ends it (and init's end does);
 *  - only the first run has one: a verifier's next test starts from
 *    init's START, so no process waits beside a running test.
 * Async-signal-safe calls only. */
#include <errno.h>
#include <unistd.h>
#include "sandbox_cgroup.h"
#include "sandbox_child.h"

/* The child: confined, then the run. A failed step of its confinement is
 * reported on the run's report pipe, once a START brings one, as main's
 * would be. */
static _Noreturn void prerun(const struct sb_init_plan *p)
{
	/* In this process's memory only: init's copies are never touched. */
	static struct sb_start msg;
	static char *argv[SB_START_ARGS + 1];
	struct sb_child_plan run = p->child;
	int keep[] = { p->pre_chan, run.landlock_fd }, fds[SB_START_FDS], step, err, failed;

	sb_close_all_but(keep, 2);
	failed = sb_child_confine(&run, &step);
	err = sb_start_receive(p->pre_chan, &msg, fds);
	if (err == -ESHUTDOWN)
		_exit(0); /* the sandbox is torn down before its first run */
	close(p->pre_chan);
	if (!err)
		err = sb_start_decode(&msg, fds, argv, &run);
	if (err || failed) {
		sb_start_refuse(fds[SB_FD_REPORT], err ? SB_STEP_START : step,
				err ? -err : -failed);
		_exit(127);
	}
	close(fds[SB_FD_CGROUP]); /* born in it */
	sb_child_start(&run);
}

pid_t sb_prerun_fork(const struct sb_init_plan *p)
{
	pid_t pid = sb_clone_into(0, p->pre_cgroup);

	if (pid == 0)
		prerun(p);
	/* The channel and the cgroup are the child's now. */
	close(p->pre_chan);
	close(p->pre_cgroup);
	return pid < 0 ? -errno : pid;
}
