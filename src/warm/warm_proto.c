/* The executor socket's wire format (see src/warm/warm_proto.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/fs_util.h"
#include "warm_proto.h"

int warm_socket_path(char *buf, size_t len)
{
	return fs_run_subdir(WARM_SOCKET, 0, buf, len);
}

bool warm_env_shared(const char *entry)
{
	size_t off = strlen(WARM_ENV_OFF);

	return !strncmp(entry, "SANDGUARD_", 10) &&
	       !(!strncmp(entry, WARM_ENV_OFF, off) && entry[off] == '=');
}

int warm_send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int warm_recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
