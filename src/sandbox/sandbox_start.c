/* A run's START, on the sandbox's side: received and decoded by init, or
 * by the first run's main, which init forks ahead of it (below; see
 * src/sandbox/sandbox_child.h).
 * Async-signal-safe calls only. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/array_len.h"
#include "sandbox_cgroup.h"
#include "sandbox_child.h"

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
