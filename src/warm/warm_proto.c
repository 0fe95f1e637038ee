/* The executor socket's wire format (see src/warm/warm_proto.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
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

int warm_send_iov(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t sent = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0)
			return -errno;
		/* Past what went; a part sent in part keeps its rest. */
		for (; n > 0 && (size_t)sent >= iov->iov_len; iov++, n--)
			sent -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + sent;
			iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

int warm_send_all(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };

	return warm_send_iov(fd, &v, 1);
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
