#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "http_listen.h"
#include "log.h"

int http_parse_addr(const char *addr_port, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *port_s;
	size_t host_len;
	unsigned long port;
	char *end;

	memset(ss, 0, sizeof(*ss));
	colon = addr_port ? strrchr(addr_port, ':') : NULL;
	if (!colon || colon == addr_port)
		goto bad;
	port_s = colon + 1;
	host_len = colon - addr_port;
	if (host_len >= sizeof(host) || *port_s < '0' || *port_s > '9')
		goto bad;
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (errno || *end || port > 65535)
		goto bad;
	memcpy(host, addr_port, host_len);
	host[host_len] = '\0';

	if (host[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		if (host_len < 3 || host[host_len - 1] != ']')
			goto bad;
		host[host_len - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			goto bad;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			goto bad;
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*len = sizeof(*a4);
	}
	return 0;
bad:
	sg_error("listen address '%s' is not ADDR:PORT with a numeric address "
		 "(127.0.0.1:9464, 0.0.0.0:9464, [::1]:9464)",
		 addr_port ? addr_port : "(null)");
	return -EINVAL;
}

int http_listen(const char *who, const char *addr_port, int backlog, int *fd_out,
		uint16_t *port_out)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, err;

	err = http_parse_addr(addr_port, &ss, &len);
	if (err)
		return err;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		err = -errno;
		sg_error("%s: socket for %s: %s", who, addr_port, strerror(errno));
		return err;
	}
	/* A restarted server rebinds while old connections sit in TIME_WAIT. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, backlog)) {
		err = -errno;
		sg_error("%s: cannot listen on %s: %s", who, addr_port, strerror(errno));
		close(fd);
		return err;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
		err = -errno;
		sg_error("%s: getsockname: %s", who, strerror(errno));
		close(fd);
		return err;
	}
	*port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						   : ((struct sockaddr_in *)&ss)->sin_port);
	*fd_out = fd;
	return 0;
}

void http_mhd_log(void *who, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	sg_warn("%s: %s", (const char *)who, msg);
}
