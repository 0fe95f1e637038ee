/* The HTTP server on libmicrohttpd: one thread per connection (a request
 * blocks its thread for the whole sandbox run, and waits in the admission
 * queue there), bodies accumulated up to max_body, replies as JSON. What a
 * request means is serve_route.c's business; see src/serve/serve.h.
 *
 * A body over max_body is read and dropped (up to DRAIN_MAX past the
 * limit), then answered 413: a client that sends its body without waiting
 * (most do) would otherwise see its connection reset, not the 413. The
 * 413 goes out before the body only to a client that waits for it
 * ("Expect: 100-continue") or announces more than we would drop; a chunked
 * body past the drain bound gets its connection closed. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/json_text.h"
#include "lib/log.h"
#include "lib/http_listen.h"
#include "serve_internal.h"

#define DRAIN_MAX      (64u << 20) /* chunked bytes past max_body we read and drop */
#define LISTEN_BACKLOG 1024
#define DRAIN_POLL_US  20000

/* One request's state across the access handler's calls. */
struct conn {
	char *body;
	size_t len, cap;
	size_t dropped; /* bytes past max_body, read and dropped */
	bool too_large;
	unsigned long long announced; /* an oversized Content-Length, else 0 */
};

static enum MHD_Result send_reply(struct MHD_Connection *mc, struct serve_reply *rp)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	size_t flags = JSON_COMPACT | (rp->real_digits ? JSON_REAL_PRECISION(rp->real_digits) : 0);
	char *text = rp->body ? json_dumps(rp->body, flags) : NULL, after[16];
	size_t len;

	if (!text)
		text = strdup("{\"error\":\"out of memory\"}");
	if (!text)
		return MHD_NO;
	len = strlen(text);
	resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO; /* MHD closes the connection */
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (rp->retry_after_s) {
		snprintf(after, sizeof(after), "%u", rp->retry_after_s);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, after);
	}
	if (rp->allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rp->allow);
	ret = MHD_queue_response(mc, rp->status ? rp->status : 500, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* `announced`: the Content-Length, or 0 for a chunked body. */
static enum MHD_Result reply_too_large(struct serve *s, struct MHD_Connection *mc,
				       unsigned long long announced)
{
	struct serve_reply rp = { 0 };
	enum MHD_Result ret;

	if (announced)
		serve_error(&rp, 413,
			    "request body of %llu bytes exceeds the limit of %zu bytes "
			    "(sandguard serve --max-body)",
			    announced, s->cfg.max_body);
	else
		serve_error(&rp, 413,
			    "request body exceeds the limit of %zu bytes "
			    "(sandguard serve --max-body)",
			    s->cfg.max_body);
	ret = send_reply(mc, &rp);
	serve_reply_free(&rp);
	return ret;
}

static int append(struct serve *s, struct conn *cn, const char *data, size_t n)
{
	if (cn->too_large || n > s->cfg.max_body - cn->len) {
		cn->too_large = true;
		cn->dropped += n;
		return cn->dropped > DRAIN_MAX ? -1 : 0;
	}
	if (cn->len + n + 1 > cn->cap) {
		size_t cap = cn->cap ? cn->cap : 4096;
		char *body;

		while (cap < cn->len + n + 1)
			cap *= 2;
		body = realloc(cn->body, cap);
		if (!body)
			return -1;
		cn->body = body;
		cn->cap = cap;
	}
	memcpy(cn->body + cn->len, data, n);
	cn->len += n;
	cn->body[cn->len] = '\0';
	return 0;
}

static const char *header(struct MHD_Connection *mc, const char *name)
{
	return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct serve *s = cls;
	struct conn *cn = *req_cls;
	struct serve_reply rp;
	struct serve_request rq;
	enum MHD_Result ret;

	if (!cn) {
		const char *cl = header(mc, MHD_HTTP_HEADER_CONTENT_LENGTH);

		cn = calloc(1, sizeof(*cn));
		if (!cn)
			return MHD_NO;
		*req_cls = cn;
		atomic_fetch_add(&s->in_flight, 1);
		if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
			const char *expect = header(mc, MHD_HTTP_HEADER_EXPECT);

			cn->announced = strtoull(cl, NULL, 10);
			if ((expect && !strcasecmp(expect, "100-continue")) ||
			    cn->announced - s->cfg.max_body > DRAIN_MAX)
				return reply_too_large(s, mc, cn->announced);
		}
		/* The first call has headers only: come back for the body. */
		return MHD_YES;
	}
	if (*upload_size) {
		if (append(s, cn, upload, *upload_size))
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	if (cn->too_large)
		return reply_too_large(s, mc, cn->announced);
	rq = (struct serve_request){
		.method = method,
		.url = url,
		.tenant_header = header(mc, SERVE_TENANT_HEADER),
		.run_id_header = header(mc, SERVE_RUN_ID_HEADER),
		.request_id_header = header(mc, SERVE_REQUEST_ID_HEADER),
		.body = cn->body ? cn->body : "",
		.body_len = cn->len,
	};
	serve_handle(s, &rq, &rp);
	ret = send_reply(mc, &rp);
	serve_reply_free(&rp);
	return ret;
}

/* The response is sent (or the client is gone): the request is over. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
			 enum MHD_RequestTerminationCode why)
{
	struct serve *s = cls;
	struct conn *cn = *req_cls;

	if (cn) {
		free(cn->body);
		free(cn);
		atomic_fetch_sub(&s->in_flight, 1);
	}
	*req_cls = NULL;
}

static void serve_free(struct serve *s)
{
	gate_free(s->gate);
	free(s);
}

int serve_start(const struct serve_config *cfg, struct serve **out)
{
	struct serve *s = calloc(1, sizeof(*s));
	char err[512];
	int fd = -1, ret;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	snprintf(s->policy_dir, sizeof(s->policy_dir), "%s",
		 cfg->policy_dir ? cfg->policy_dir : policy_dir_default());
	s->cfg.policy_dir = s->policy_dir;
	ret = serve_langs_init(&s->langs, cfg->languages ? cfg->languages : SERVE_LANGUAGES_DEFAULT,
			       err, sizeof(err));
	if (ret) {
		sg_error("serve: %s", err);
		free(s);
		return ret;
	}
	if (gethostname(s->host, sizeof(s->host)))
		snprintf(s->host, sizeof(s->host), "unknown");
	if (getrandom(&s->id_prefix, sizeof(s->id_prefix), 0) != sizeof(s->id_prefix))
		s->id_prefix = (uint32_t)getpid();
	s->gate = gate_new(cfg->max_concurrency, cfg->queue, cfg->tenant_queue);
	if (!s->gate) {
		free(s);
		return -ENOMEM;
	}
	ret = http_listen("serve", cfg->listen, LISTEN_BACKLOG, &fd, &s->port);
	if (ret) {
		serve_free(s);
		return ret;
	}
	s->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			MHD_USE_ITC | MHD_USE_ERROR_LOG,
		0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log,
		"serve http", MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)SERVE_IDLE_TIMEOUT_S, MHD_OPTION_END);
	if (!s->daemon) {
		sg_error("serve: libmicrohttpd would not start on %s", cfg->listen);
		close(fd);
		serve_free(s);
		return -EIO;
	}
	*out = s;
	return 0;
}

uint16_t serve_port(const struct serve *s)
{
	return s->port;
}

void serve_stop(struct serve *s)
{
	MHD_socket fd;

	if (!s)
		return;
	/* No new connections; queued requests get 503 at once; running ones
	 * end by their deadlines. Every reply goes out before MHD is stopped,
	 * which would cut the connections still writing one. */
	fd = MHD_quiesce_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	gate_close(s->gate);
	while (atomic_load(&s->in_flight))
		usleep(DRAIN_POLL_US);
	MHD_stop_daemon(s->daemon);
	serve_free(s);
}
