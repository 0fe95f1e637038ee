/* The sandbox's main process from init's clone to the tenant's execve,
 * and a run's START on the sandbox's side (see src/sandbox/sandbox_child.h).
 * Only async-signal-safe calls: raw syscalls for the identity change (the
 * glibc wrappers would try to broadcast to threads the child no longer
 * has), no malloc, no stdio. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "sandbox_child.h"
#include "sandbox_landlock.h"
#include "lib/array_len.h"
#include "sandbox_cgroup.h"

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

/* "<command>: <why>" on the run's stderr, as a shell says it, where the
 * tenant reads it when its own command could not be executed
 * (sandbox_start.c). Only write(): no stdio or strerror() in this child. */
static void say_exec_failed(const char *cmd, int err)
{
	const char *why = err == ENOENT    ? "command not found"
			  : err == EACCES  ? "permission denied"
			  : err == ENOEXEC ? "cannot execute: exec format error"
			  : err == EISDIR  ? "is a directory"
			  : err == ENOTDIR ? "not a directory"
					   : "cannot execute";
	struct iovec v[] = { { (void *)cmd, strnlen(cmd, 256) },
			     { ": ", 2 },
			     { (void *)why, strlen(why) },
			     { "\n", 1 } };

	if (writev(2, v, 4) < 0) {
		/* its stderr is gone: the exit status says it */
	}
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
	say_exec_failed(p->argv[0], err);
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

/* ---- A run's START, on the sandbox's side: received and decoded by init,
 * or by the first run's main, which init forks ahead of it. ---- */

/* The run's fds, kept above stdio: main's dup2() onto 0, 1 and 2 must not
 * clobber one of them. */
int sb_start_receive(int ctl, struct sb_start *m, int fds[SB_START_FDS])
{
	char cbuf[CMSG_SPACE(sizeof(int) * SB_START_FDS)];
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t got;
	int n = 0;

	for (int i = 0; i < SB_START_FDS; i++)
		fds[i] = -1;
	do
		got = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got <= 0)
		return got == 0 ? -ESHUTDOWN : -errno;
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		memcpy(fds, CMSG_DATA(c),
		       sizeof(int) * (size_t)(n < SB_START_FDS ? n : SB_START_FDS));
	}
	for (int i = 0; i < SB_START_FDS; i++) {
		if (fds[i] >= 0 && fds[i] <= 2) {
			int up = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);

			close(fds[i]);
			fds[i] = up;
		}
	}
	if (n != SB_START_FDS || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)got < offsetof(struct sb_start, strings) || m->magic != SB_START_MAGIC ||
	    (size_t)got != offsetof(struct sb_start, strings) + m->len)
		return -EPROTO;
	for (int i = 0; i < SB_START_FDS; i++)
		if (fds[i] < 0)
			return -EBADF;
	return 0;
}

/* argv and the exec paths out of the strings, and the rest of the run's
 * plan. */
int sb_start_decode(const struct sb_start *m, const int fds[SB_START_FDS], char **argv,
		    struct sb_child_plan *run)
{
	uint32_t want = m->argc + m->n_exec_paths, got = 0;
	const char *s = m->strings, *end = m->strings + m->len;

	if (!m->argc || m->argc > SB_START_ARGS || m->n_exec_paths < 1 ||
	    m->n_exec_paths > ARRAY_LEN(run->exec_paths) || m->n_rlimits < 0 ||
	    m->n_rlimits > SB_MAX_RLIMITS || m->len > SB_START_STRINGS)
		return -EPROTO;
	while (s < end && got < want) {
		const char *nul = memchr(s, '\0', (size_t)(end - s));

		if (!nul)
			return -EPROTO;
		if (got < m->argc)
			argv[got] = (char *)s;
		else
			run->exec_paths[got - m->argc] = s;
		got++;
		s = nul + 1;
	}
	if (got != want)
		return -EPROTO;
	argv[m->argc] = NULL;
	run->argv = argv;
	run->n_exec_paths = (int)m->n_exec_paths;
	run->n_rlimits = m->n_rlimits;
	memcpy(run->rlimits, m->rlimits, sizeof(run->rlimits));
	for (int i = 0; i < 3; i++)
		run->stdio[i] = fds[SB_FD_STDIN + i];
	run->report_fd = fds[SB_FD_REPORT];
	return 0;
}

/* A run that cannot start says why on its report pipe, as main would. */
void sb_start_refuse(int report_fd, int step, int err)
{
	struct sb_child_report r = { .type = SB_REPORT_FAILED, .step = step, .err = err };

	if (report_fd >= 0 && write(report_fd, &r, sizeof(r)) < 0) {
		/* the executor gave up on the run */
	}
}

/* The first run's main, forked by init ahead of its START. A warm launch then pays for the START's
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
 *    init's START, so no process waits beside a running test. */

/* The executor clears the slot (sb_slot_check()) while init sets up, so
 * the first main waits for its word before it takes the slot's identity:
 * no process runs as a uid that may be someone's account. Without it
 * (the channel's end: the slot was refused, the sandbox torn down), it
 * never does. */
static bool slot_cleared(int chan)
{
	uint32_t word = 0;
	ssize_t n;

	do
		n = recv(chan, &word, sizeof(word), 0);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(word) && word == SB_SLOT_CLEARED_MAGIC;
}

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
	if (!slot_cleared(p->pre_chan))
		_exit(0);
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
