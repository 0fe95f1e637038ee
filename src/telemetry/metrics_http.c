/* /metrics, /healthz and /readyz over libmicrohttpd. See src/telemetry/metrics_http.h.
 *
 * We bind the listening socket ourselves and hand it to MHD: that gives an
 * exact errno and message for a bad or busy address, IPv4 and IPv6 through
 * one path, and the bound port when port 0 was asked for. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/log.h"
#include "lib/http_listen.h"
#include "metrics_http.h"

#define CONTENT_TYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_TEXT    "text/plain; charset=utf-8"

struct metrics_http {
	struct MHD_Daemon *daemon;
	struct metrics_registry *reg;
	metrics_ready_fn ready;
	void *ready_ctx;
	uint16_t port;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status,
			     const char *content_type, char *body, size_t len,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!resp) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO; /* MHD closes the connection */
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned int status,
				  const char *text)
{
	return reply(conn, status, CONTENT_TYPE_TEXT, (char *)text, strlen(text),
		     MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result serve_metrics(struct metrics_http *h, struct MHD_Connection *conn)
{
	size_t len;
	char *body = metrics_render_string(h->reg, &len);

	if (!body) {
		sg_warn("metrics: rendering failed: %s", strerror(errno));
		return reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "rendering failed\n");
	}
	return reply(conn, MHD_HTTP_OK, CONTENT_TYPE_METRICS, body, len, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result serve_ready(struct metrics_http *h, struct MHD_Connection *conn)
{
	char reason[256] = "", *body;
	int n;

	if (!h->ready)
		return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
	if (h->ready(h->ready_ctx, reason, sizeof(reason)))
		return reply_text(conn, MHD_HTTP_OK, "ok\n");
	reason[sizeof(reason) - 1] = '\0';
	n = asprintf(&body, "not ready: %s\n", reason[0] ? reason : "no reason given");
	if (n < 0)
		return MHD_NO;
	return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, CONTENT_TYPE_TEXT, body, n,
		     MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **req_cls)
{
	struct metrics_http *h = cls;

	/* Answer on the first call: no request here has a body worth reading. */
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (!strcmp(url, "/metrics"))
		return serve_metrics(h, conn);
	if (!strcmp(url, "/healthz"))
		return reply_text(conn, MHD_HTTP_OK, "ok\n");
	if (!strcmp(url, "/readyz"))
		return serve_ready(h, conn);
	return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

int metrics_http_start(const char *addr_port, struct metrics_registry *reg, metrics_ready_fn ready,
		       void *ready_ctx, struct metrics_http **out)
{
	struct metrics_http *h;
	int fd = -1, err;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	err = http_listen("metrics", addr_port, 64, &fd, &h->port);
	if (err) {
		free(h);
		return err;
	}
	h->reg = reg;
	h->ready = ready;
	h->ready_ctx = ready_ctx;
	h->daemon = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				     NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log,
				     "metrics http", MHD_OPTION_LISTEN_SOCKET, fd,
				     MHD_OPTION_CONNECTION_LIMIT,
				     (unsigned int)METRICS_HTTP_MAX_CONNECTIONS,
				     MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned int)METRICS_HTTP_TIMEOUT_S, MHD_OPTION_END);
	if (!h->daemon) {
		sg_error("metrics: libmicrohttpd would not start on %s", addr_port);
		close(fd);
		free(h);
		return -EIO;
	}
	sg_info("metrics: serving /metrics on %s (port %u)", addr_port, h->port);
	*out = h;
	return 0;
}

uint16_t metrics_http_port(const struct metrics_http *h)
{
	return h->port;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->daemon); /* joins its thread and closes the socket */
	free(h);
}
