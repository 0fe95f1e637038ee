/* The sandbox's main process from init's clone to the tenant's execve
 * (see src/sandbox/sandbox_child.h). Only async-signal-safe calls: raw
 * syscalls for the identity change (the glibc wrappers would try to
 * broadcast to threads the child no longer has), no malloc, no stdio. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sandbox_child.h"
#include "sandbox_landlock.h"
#include "lib/array_len.h"

static const char *const step_names[] = {
	[SB_STEP_CGROUP] = "joining the sandbox cgroups",
	[SB_STEP_UNSHARE] = "entering new mount, UTS, IPC and network namespaces",
	[SB_STEP_SETSID] = "setsid",
	[SB_STEP_STDIO] = "setting up stdin/stdout/stderr",
	[SB_STEP_CLOSE_FDS] = "closing inherited fds",
	[SB_STEP_SIGNALS] = "resetting signals",
	[SB_STEP_IDENTITY] = "switching to the slot uid/gid",
	[SB_STEP_PDEATHSIG] = "setting the parent-death signal",
	[SB_STEP_RLIMIT] = "setting rlimits",
	[SB_STEP_CHDIR] = "entering the scratch directory",
	[SB_STEP_NO_NEW_PRIVS] = "setting no_new_privs",
	[SB_STEP_LANDLOCK] = "enforcing Landlock",
	[SB_STEP_SECCOMP] = "installing the seccomp filter",
	[SB_STEP_EXEC] = "execve",
	[SB_STEP_HOSTNAME] = "setting the host name",
	[SB_STEP_NETWORK] = "setting up the sandbox's network",
	[SB_STEP_ROOT] = "building the sandbox's root filesystem",
	[SB_STEP_FORK] = "starting a process in the sandbox",
	[SB_STEP_CAPABILITIES] = "dropping capabilities",
	[SB_STEP_START] = "receiving the run",
};

const char *sb_child_step_name(int step)
{
	if (step > 0 && (size_t)step < ARRAY_LEN(step_names) && step_names[step])
		return step_names[step];
	return "unknown step";
}

void sb_close_all_but(const int *keep, int n)
{
	int sorted[SB_KEEP_MAX], m = 0, lo = 0;

	for (int i = 0; i < n && m < SB_KEEP_MAX; i++) {
		int j = m++;

		if (keep[i] < 0) {
			m--;
			continue;
		}
		for (; j > 0 && sorted[j - 1] > keep[i]; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = keep[i];
	}
	for (int i = 0; i < m; i++) {
		if (sorted[i] > lo)
			syscall(__NR_close_range, (unsigned)lo, (unsigned)sorted[i] - 1, 0U);
		if (sorted[i] >= lo)
			lo = sorted[i] + 1;
	}
	syscall(__NR_close_range, (unsigned)lo, ~0U, 0U);
}

pid_t sb_clone(unsigned long flags)
{
	/* Stack 0: the child runs on a copy of ours, like fork(). */
	return (pid_t)syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
}

_Noreturn void sb_child_fail(const struct sb_child_plan *p, int step, int err, int op)
{
	struct sb_child_report r = {
		.type = SB_REPORT_FAILED, .step = step, .err = err > 0 ? err : -err, .op = op
	};

	if (write(p->report_fd, &r, sizeof(r)) < 0) {
		/* nothing left to tell it with; the exit status says enough */
	}
	_exit(127);
}

static _Noreturn void fail(const struct sb_child_plan *p, int step, int err)
{
	sb_child_fail(p, step, err, -1);
}

/* Every fd above stderr becomes close-on-exec: the tenant starts with 0, 1
 * and 2 only, while the report pipe and the Landlock ruleset stay usable
 * until execve. */
static int cloexec_above_stdio(void)
{
	struct rlimit rl;

	if (syscall(__NR_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (rl.rlim_cur > 65536)
		rl.rlim_cur = 65536;
	for (int fd = 3; fd < (int)rl.rlim_cur; fd++)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return 0;
}

int sb_child_reset_signals(void)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		sigaction(sig, &sa, NULL); /* EINVAL for the libc-reserved ones */
	}
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL))
		return -errno;
	return 0;
}

int sb_child_drop_identity(uid_t uid, gid_t gid)
{
	if (syscall(__NR_setgroups, 0, NULL) || syscall(__NR_setresgid, gid, gid, gid) ||
	    syscall(__NR_setresuid, uid, uid, uid))
		return -errno;
	if (getuid() != uid || geteuid() != uid || getgid() != gid)
		return -EPERM;
	return 0;
}

int sb_child_join_run(const struct sb_child_plan *p)
{
	if (p->cgroup_procs_fd >= 0 && write(p->cgroup_procs_fd, "0", 1) != 1)
		return -errno;
	return 0;
}

int sb_child_confine(const struct sb_child_plan *p, int *step)
{
	int err;

	*step = SB_STEP_SETSID;
	if (setsid() < 0)
		return -errno;
	*step = SB_STEP_SIGNALS;
	err = sb_child_reset_signals();
	if (err)
		return err;
	*step = SB_STEP_IDENTITY;
	err = sb_child_drop_identity(p->uid, p->gid);
	if (err)
		return err;
	/* After the uid change, which clears the parent-death signal. The
	 * parent is the sandbox's init; if it is gone already, so is this
	 * PID namespace. */
	*step = SB_STEP_PDEATHSIG;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		return -errno;
	if (getppid() != 1)
		_exit(127);
	*step = SB_STEP_CHDIR;
	if (chdir(p->scratch))
		return -errno;
	*step = SB_STEP_NO_NEW_PRIVS;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	*step = SB_STEP_LANDLOCK;
	if (p->landlock_fd >= 0) {
		err = landlock_enforce(p->landlock_fd);
		if (err)
			return err;
		close(p->landlock_fd);
	}
	/* What is left of main's start (dup2, prlimit64 on itself, execve)
	 * is allowed by the filter. */
	*step = SB_STEP_SECCOMP;
	if (p->seccomp) {
		err = seccomp_filter_install(p->seccomp);
		if (err)
			return err;
	}
	return 0;
}

_Noreturn void sb_child_start(const struct sb_child_plan *p)
{
	const struct sb_child_report started = { .type = SB_REPORT_EXEC };
	int err;

	for (int i = 0; i < 3; i++)
		if (dup2(p->stdio[i], i) != i)
			fail(p, SB_STEP_STDIO, errno);
	err = cloexec_above_stdio();
	if (err)
		fail(p, SB_STEP_CLOSE_FDS, err);
	for (int i = 0; i < p->n_rlimits; i++)
		if (setrlimit(p->rlimits[i].resource, &p->rlimits[i].lim))
			fail(p, SB_STEP_RLIMIT, errno);
	/* Positive word that the tenant's code is next: a main killed from
	 * outside while it waited or set up (a node-wide OOM kill, a stray
	 * kill) also closes the pipe, and must not be booked to the tenant. */
	if (write(p->report_fd, &started, sizeof(started)) < 0) {
		/* the executor gave up on the run: the execve goes on regardless */
	}
	err = ENOENT;
	for (int i = 0; i < p->n_exec_paths; i++) {
		execve(p->exec_paths[i], p->argv, p->envp);
		if (errno != ENOENT)
			err = errno; /* e.g. EACCES: worth more than "not found" */
	}
	fail(p, SB_STEP_EXEC, err);
}

_Noreturn void sb_child_exec(const struct sb_child_plan *p)
{
	int err = sb_child_join_run(p), step = SB_STEP_CGROUP;

	err = err ?: sb_child_confine(p, &step);
	if (err)
		fail(p, step, err);
	sb_child_start(p);
}
