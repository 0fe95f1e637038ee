/* A run's START, on the sandbox's side: received and decoded by init, or
 * by a run process init forked ahead of it (see src/sandbox/sandbox_child.h).
 * Async-signal-safe calls only. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/array_len.h"
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
