/* The launch baseline: what an executor does without any sandbox. Feeds
 * INPUT to CMD's stdin through a pipe, collects its stdout and stderr
 * through pipes, waits for it, copies its stdout to ours and exits with
 * its status. No cgroup, no uid change, no Landlock, no seccomp, no agent.
 *
 *   plainrun INPUT -- CMD [ARGS...]
 *
 * Built by scripts/bench/run.sh into <build>/bench/plainrun. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *read_file(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "plainrun: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	buf = malloc(st.st_size + 1);
	if (!buf)
		exit(2);
	n = read(fd, buf, st.st_size);
	if (n != st.st_size) {
		fprintf(stderr, "plainrun: short read of %s\n", path);
		exit(2);
	}
	close(fd);
	*len = (size_t)n;
	return buf;
}

/* Appends what is readable on fd to the buffer; returns 0 at EOF. */
static int drain(int fd, char **buf, size_t *len, size_t *cap)
{
	char chunk[65536];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 1 : 0;
	if (n == 0)
		return 0;
	if (*len + n > *cap) {
		*cap = (*len + n) * 2;
		*buf = realloc(*buf, *cap);
		if (!*buf)
			exit(2);
	}
	memcpy(*buf + *len, chunk, n);
	*len += n;
	return 1;
}

int main(int argc, char **argv)
{
	int in[2], out[2], err[2], status;
	size_t in_len, in_off = 0, out_len = 0, out_cap = 0, err_len = 0, err_cap = 0;
	char *input, *outbuf = NULL, *errbuf = NULL;
	pid_t pid;

	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr, "usage: plainrun INPUT -- CMD [ARGS...]\n");
		return 64;
	}
	input = read_file(argv[1], &in_len);
	signal(SIGPIPE, SIG_IGN);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(127);
		execv(argv[3], argv + 3);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	if (in_len == 0) {
		close(in[1]);
		in[1] = -1;
	}
	while (in[1] >= 0 || out[0] >= 0 || err[0] >= 0) {
		struct pollfd p[3] = {
			{ .fd = in[1], .events = POLLOUT },
			{ .fd = out[0], .events = POLLIN },
			{ .fd = err[0], .events = POLLIN },
		};

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return 2;
		if (p[0].revents) {
			ssize_t n = write(in[1], input + in_off, in_len - in_off);

			if (n > 0)
				in_off += n;
			if (n < 0 && errno != EAGAIN) {
				close(in[1]); /* EPIPE: the program stopped reading */
				in[1] = -1;
			} else if (in_off == in_len) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (p[1].revents && !drain(out[0], &outbuf, &out_len, &out_cap)) {
			close(out[0]);
			out[0] = -1;
		}
		if (p[2].revents && !drain(err[0], &errbuf, &err_len, &err_cap)) {
			close(err[0]);
			err[0] = -1;
		}
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 2;
	if (out_len && write(1, outbuf, out_len) != (ssize_t)out_len)
		return 2;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}
