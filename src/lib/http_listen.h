/* Listening sockets for the project's HTTP servers (the agent's /metrics
 * and `sandguard serve`): numeric ADDR:PORT parsing, our own bind (an
 * exact errno for a bad or busy address, and the port when 0 was asked
 * for), and libmicrohttpd's log routed to ours. */
#ifndef SG_HTTP_LISTEN_H
#define SG_HTTP_LISTEN_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>

/* "127.0.0.1:9464", "0.0.0.0:9464" or "[::1]:9464" (numeric only). 0, or
 * -EINVAL with a message logged. */
int http_parse_addr(const char *addr_port, struct sockaddr_storage *ss, socklen_t *len);

/* Bind and listen (non-blocking, CLOEXEC, SO_REUSEADDR); `who` prefixes
 * messages. 0 with *fd_out and the bound *port_out, or -errno. */
int http_listen(const char *who, const char *addr_port, int backlog, int *fd_out,
		uint16_t *port_out);

/* MHD_OPTION_EXTERNAL_LOGGER with the server's name as its closure. */
void http_mhd_log(void *who, const char *fmt, va_list ap);

#endif
