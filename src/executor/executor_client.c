/* `sandguard exec`'s warm path, the client side (see
 * src/executor/executor_client.h). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "executor_client.h"
#include "executor_proto.h"

#define CHUNK 65536

static int connect_executor(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (executor_socket_path(addr.sun_path, sizeof(addr.sun_path)))
		return -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The head with our working directory and stdin, then the strings. */
static int send_request(int fd, const struct executor_request *h, const char *strings)
{
	int fds[2] = { open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), STDIN_FILENO };
	char cbuf[CMSG_SPACE(sizeof(fds))] = { 0 };
	struct iovec iov = { .iov_base = (void *)h, .iov_len = sizeof(*h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf };
	size_t n = h->has_stdin ? 2 : 1;
	struct cmsghdr *c;
	ssize_t sent;

	if (fds[0] < 0)
		return -errno;
	mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	do
		sent = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	close(fds[0]);
	if (sent != (ssize_t)sizeof(*h))
		return sent < 0 ? -errno : -EIO;
	return executor_send_all(fd, strings, h->len);
}

/* Copy n bytes of the answer to `to` (or drop them, to < 0). */
static int relay(int fd, uint64_t n, int to)
{
	char buf[CHUNK];

	while (n) {
		size_t want = n < sizeof(buf) ? (size_t)n : sizeof(buf);
		int err = executor_recv_all(fd, buf, want);

		if (err)
			return err;
		for (size_t off = 0; to >= 0 && off < want;) {
			ssize_t w = write(to, buf + off, want - off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				to = -1; /* our caller stopped reading; drain the rest */
			else
				off += (size_t)w;
		}
		n -= want;
	}
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* The rest of stdin (a pipe's, a terminal's) into fd, then fd made our
 * stdin, at its start. */
static int copy_stdin(int fd)
{
	char buf[CHUNK];
	uint64_t total = 0;
	int err = 0;

	while (!err && total < EXECUTOR_MAX_STDIN) {
		uint64_t left = EXECUTOR_MAX_STDIN - total;
		ssize_t n =
			read(STDIN_FILENO, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : 0;
			break;
		}
		err = write_all(fd, buf, (size_t)n);
		total += (uint64_t)n;
	}
	if (!err && (lseek(fd, 0, SEEK_SET) || dup3(fd, STDIN_FILENO, 0) < 0))
		err = -errno;
	return err;
}

/* A command that reads stdin hands the executor a file whose start we
 * know: the executor reads it (moving the offset we share), and a run it
 * never started runs here from that start again. A pipe's bytes would be
 * gone: they are copied first, as the executor would have read them.
 * Returns the offset to go back to; -1 with *fatal 0: stdin untouched, run
 * cold now; with *fatal set (an exit code): stdin is half read. */
static off_t keep_stdin(int *fatal)
{
	off_t at = lseek(STDIN_FILENO, 0, SEEK_CUR);
	int fd, err;

	*fatal = 0;
	if (at >= 0)
		return at;
	fd = memfd_create("sandguard-exec-stdin", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	err = copy_stdin(fd);
	close(fd);
	if (!err)
		return 0;
	fprintf(stderr, "sandguard: error: exec: cannot copy stdin for the executor: %s\n",
		strerror(-err));
	*fatal = 2;
	return -1;
}

/* The connection ended before the executor said it started the run: it
 * may have parsed it, held it in an admission line or prepared a sandbox
 * for it, but no run of it began and nothing of it is booked or owed. So
 * it runs here, once, as when no executor answers. */
static int never_started(off_t stdin_at)
{
	if (stdin_at >= 0 && lseek(STDIN_FILENO, stdin_at, SEEK_SET) < 0) {
		fprintf(stderr,
			"sandguard: error: exec: the executor ended before it started the run, and "
			"stdin cannot be read again to run it here: %s\n",
			strerror(errno));
		return 2;
	}
	fprintf(stderr, "sandguard: exec: the executor ended before it started the run (nothing of "
			"it is booked or owed): it runs here, cold\n");
	return -1;
}

/* The executor ended after it said it started the run, before it
 * answered: the request's in-flight record is made or its outcome booked
 * already, so it is booked once (by the executor, or by the next one's
 * reaper: "executor died"); never run it twice. */
static int executor_died(const char *tenant)
{
	/* A tenant name needs no JSON escapes (exec_request_check()). */
	printf("{\"tenant\":\"%s\",\"batch_id\":null,\"status\":\"failed\",\"cause\":\"platform_error\","
	       "\"rule\":null,\"scores\":null,\"detail\":\"platform error: the executor ended after it "
	       "started the run, before it answered; the run is booked once, by the executor or, as "
	       "'executor died', by the next executor's reaper\","
	       "\"attempts\":0,\"wall_ms\":0,\"stderr\":null,\"path\":\"warm\"}\n",
	       tenant);
	fflush(stdout);
	fprintf(stderr, "sandguard: error: exec: the executor ended after it started the run, "
			"before it answered\n");
	return 2;
}

int executor_client_run(const struct exec_request *req, char **envp)
{
	const char *off = getenv(EXECUTOR_ENV_OFF);
	struct executor_request h;
	struct executor_reply r;
	off_t stdin_at = -1;
	bool has_stdin, started;
	char *strings;
	int fd, err;

	if (off && !strcmp(off, "0"))
		return -1;
	fd = connect_executor();
	if (fd < 0)
		return -1;
	has_stdin = fcntl(STDIN_FILENO, F_GETFD) >= 0;
	if (has_stdin && exec_request_reads_stdin(req)) {
		stdin_at = keep_stdin(&err);
		if (stdin_at < 0) {
			close(fd);
			return err ? err : -1;
		}
	}
	strings = executor_request_pack(req, envp, &h);
	if (!strings) {
		close(fd);
		return -1;
	}
	h.has_stdin = has_stdin;
	err = send_request(fd, &h, strings);
	free(strings);
	if (err) {
		close(fd); /* it never had the whole request: nothing ran */
		return -1;
	}
	err = executor_recv_all(fd, &r, sizeof(r));
	if (!err && r.magic == EXECUTOR_MAGIC && r.code == EXECUTOR_NOT_SERVED) {
		if (getenv("SANDGUARD_DEBUG"))
			relay(fd, r.err_len, STDERR_FILENO); /* why not */
		close(fd);
		return -1; /* refused before the command: nothing of it read */
	}
	/* Until it says it started the run, nothing of it is owed. */
	started = !err && r.magic == EXECUTOR_MAGIC && r.code == EXECUTOR_STARTED;
	if (started)
		err = executor_recv_all(fd, &r, sizeof(r));
	if (err || r.magic != EXECUTOR_MAGIC || r.code < 0) {
		close(fd);
		return started ? executor_died(req->tenant) : never_started(stdin_at);
	}
	err = relay(fd, r.out_len, STDOUT_FILENO);
	err = err ?: relay(fd, r.err_len, STDERR_FILENO);
	close(fd);
	if (err) { /* its answer was cut: what came of it is out already */
		fprintf(stderr, "sandguard: error: exec: the executor's answer was cut short\n");
		return 2;
	}
	return r.code;
}
