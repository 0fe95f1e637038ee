/* The HTTP side of the server on libmicrohttpd: one I/O thread (epoll)
 * reads requests and writes replies for every connection; a request
 * whose body is in goes to a worker thread of its own, and its connection
 * is suspended until the worker has the reply. So an idle or slow
 * connection costs a descriptor and a little memory, never a thread: only
 * requests that are whole hold one (at most max_workers), and each blocks
 * it for its admission wait and its sandbox run.
 *
 * The headers decide first (serve_route: route, method, credentials). A
 * request refused there is answered without keeping its body: the body is
 * read and dropped (up to max_body), then the reply sent, so a client
 * that sends its body without waiting (most do) reads the answer instead
 * of a reset. The same goes for a body over max_body (413) and for bodies
 * beyond the server's buffer budget (503). The answer goes out before the
 * body only to a client that waits for it ("Expect: 100-continue") or
 * announces more than we would drop (DRAIN_MAX); past DRAIN_MAX the
 * connection is closed.
 *
 * A body must be complete body_timeout_s after the headers; a slower one
 * closes the connection. While a worker waits in the admission queue it
 * asks (without reading) whether the client is still there, so that a
 * request nobody waits for is dropped before it runs. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/http_listen.h"
#include "lib/log.h"
#include "serve_conn.h"
#include "serve_http.h"
#include "serve_internal.h"
#include "pool/pool.h"


#define DRAIN_MAX (64u << 20) /* body bytes of a refused request we read and drop */

struct serve_http {
	struct serve *srv;
	struct MHD_Daemon *daemon;
	struct serve_conns *conns;
	atomic_uint workers;   /* requests handed to a worker, not yet answered */
	atomic_uint in_flight; /* requests begun, not yet completed */
	atomic_size_t buffered;
	uint32_t max_workers;
	pthread_attr_t worker_attr;
};

/* One request's state across the access handler's calls (req_cls). */
struct request {
	struct serve_http *h;
	struct MHD_Connection *mc;
	struct serve_request rq;
	struct serve_route route;
	struct serve_reply reply; /* phase 1's answer, or the worker's */
	bool answer_early;        /* reply is phase 1's: send once the body is dropped */
	bool reply_ready;         /* the worker is done: send reply */
	uint64_t body_due_ms;
	char *body;
	size_t len, cap, dropped;
	bool drop_body;
	unsigned long long announced; /* the Content-Length, when given */
	int fd;
};

/* A flood of broken or unauthenticated clients must not flood the log:
 * at most LOG_BURST lines of a kind per LOG_WINDOW_S, then one line that
 * counts the rest. */
#define LOG_BURST    10
#define LOG_WINDOW_S 10

struct log_window {
	pthread_mutex_t lock;
	uint64_t start;
	unsigned shown, dropped;
	const char *what; /* "messages from libmicrohttpd" */
};

static struct log_window mhd_messages = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0,
					  "messages from libmicrohttpd" },
			 refusals = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0,
				      "requests refused from their headers" };

/* Whether one more line of this kind may be logged now. */
static bool log_window_take(struct log_window *w)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);
	unsigned dropped = 0;
	bool show;

	pthread_mutex_lock(&w->lock);
	if (now - w->start >= LOG_WINDOW_S * 1000ull) {
		dropped = w->dropped;
		w->start = now;
		w->shown = w->dropped = 0;
	}
	show = w->shown++ < LOG_BURST;
	if (!show)
		w->dropped++;
	pthread_mutex_unlock(&w->lock);
	if (dropped)
		sg_warn("serve: %u more %s in %d s not shown", dropped, w->what, LOG_WINDOW_S);
	return show;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	if (log_window_take(&mhd_messages))
		http_mhd_log(cls, fmt, ap);
}

static const char *header(struct MHD_Connection *mc, const char *name)
{
	return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

static enum MHD_Result send_reply(struct MHD_Connection *mc, struct serve_reply *rp)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	size_t flags = JSON_COMPACT | (rp->real_digits ? JSON_REAL_PRECISION(rp->real_digits) : 0);
	char *text, after[16];

	if (rp->no_reply)
		return MHD_NO; /* the client is gone: close */
	text = rp->body ? json_dumps(rp->body, flags) : NULL;
	if (!text)
		text = strdup("{\"error\":\"out of memory\"}");
	if (!text)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
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
	if (rp->challenge)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"sandguard\"");
	if (rp->request_id[0])
		MHD_add_response_header(resp, SERVE_REQUEST_ID_HEADER, rp->request_id);
	ret = MHD_queue_response(mc, rp->status ? rp->status : 500, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The access log line of a request refused from its headers (the
 * worker's requests are logged by serve_route.c): who asked, for what. */
static void log_refusal(struct request *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char shown[256], peer[INET6_ADDRSTRLEN] = "?";

	if (r->reply.status == 200 || !log_window_take(&refusals))
		return;
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)ci->client_addr)->sin_addr, peer,
			  sizeof(peer));
	else if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr, peer,
			  sizeof(peer));
	serve_shown_url(&r->rq, shown, sizeof(shown));
	sg_info("serve: %s %s from %s: %u", r->rq.method, shown, peer, r->reply.status);
}

/* Answer now, with phase 1's reply or the worker's. */
static enum MHD_Result answer(struct request *r)
{
	enum MHD_Result ret;

	if (!r->reply_ready)
		log_refusal(r);
	ret = send_reply(r->mc, &r->reply);

	serve_reply_free(&r->reply);
	return ret;
}

/* ---- the request line and headers ------------------------------------ */

/* "/t/<token>/rest": the token goes to rq->token, the url to "/rest". */
static void split_token(struct serve_request *rq, const char *url)
{
	const char *start, *slash;

	rq->url = url;
	if (strncmp(url, "/t/", 3))
		return;
	start = url + 3;
	slash = strchr(start, '/');
	if (!slash)
		slash = start + strlen(start);
	rq->token = start;
	rq->token_len = (size_t)(slash - start);
	rq->token_in_path = true;
	rq->url = *slash ? slash : "/";
}

/* "Authorization: Bearer <token>", unless the path carried one already
 * (two tokens in one request: the path's is used, and they must agree). */
static int bearer(struct request *r)
{
	const char *auth = header(r->mc, MHD_HTTP_HEADER_AUTHORIZATION);
	size_t n;

	if (!auth)
		return 0;
	if (strncasecmp(auth, "Bearer ", 7)) {
		serve_error(&r->reply, 401, "the Authorization header must be \"Bearer <token>\"");
		r->reply.challenge = true;
		return -1;
	}
	auth += 7;
	n = strlen(auth);
	if (r->rq.token && (n != r->rq.token_len || memcmp(auth, r->rq.token, n))) {
		serve_error(&r->reply, 400,
			    "two different tokens: one in the path and one in Authorization");
		return -1;
	}
	r->rq.token = auth;
	r->rq.token_len = n;
	return 0;
}

static bool client_gone(void *arg)
{
	struct request *r = arg;
	char b;
	ssize_t n;

	if (r->fd < 0)
		return false;
	n = recv(r->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static struct request *request_new(struct serve_http *h, struct MHD_Connection *mc, const char *url,
				   const char *method)
{
	struct request *r = calloc(1, sizeof(*r));
	const union MHD_ConnectionInfo *ci;
	const char *rid = header(mc, SERVE_REQUEST_ID_HEADER),
		   *rid2 = header(mc, SERVE_REQUEST_ID_HEADER2);

	if (!r)
		return NULL;
	r->h = h;
	r->mc = mc;
	ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	r->fd = ci ? ci->connect_fd : -1;
	split_token(&r->rq, url);
	r->rq.method = method;
	r->rq.tenant_header = header(mc, SERVE_TENANT_HEADER);
	r->rq.run_id_header = header(mc, SERVE_RUN_ID_HEADER);
	r->rq.request_id_header = rid ? rid : rid2;
	r->rq.arrived_ms = clock_ms(CLOCK_MONOTONIC);
	r->rq.client_gone = client_gone;
	r->rq.gone_arg = r;
	r->body_due_ms = r->rq.arrived_ms + (uint64_t)h->srv->cfg.body_timeout_s * 1000;
	if (rid && rid2 && strcmp(rid, rid2))
		serve_error(&r->reply, 400,
			    SERVE_REQUEST_ID_HEADER " and " SERVE_REQUEST_ID_HEADER2
						    " differ: give one id");
	atomic_fetch_add(&h->in_flight, 1);
	return r;
}

/* Phase 1. true: answer (r->reply) without keeping the body. */
static bool decide_on_headers(struct request *r)
{
	struct serve *s = r->h->srv;

	if (r->reply.status) /* request_new found the ids in conflict */
		return true;
	if (bearer(r))
		return true;
	if (serve_route(s, &r->rq, &r->route, &r->reply))
		return true;
	if (r->announced > s->cfg.max_body) {
		serve_error(&r->reply, 413,
			    "request body of %llu bytes exceeds the limit of %zu bytes "
			    "(sandguard serve --max-body)",
			    r->announced, s->cfg.max_body);
		return true;
	}
	return false;
}

/* The reply can go before the body: the client waits for it, or would
 * send more than we are willing to read and drop. */
static bool answer_before_body(struct request *r)
{
	const char *expect = header(r->mc, MHD_HTTP_HEADER_EXPECT);

	return (expect && !strcasecmp(expect, "100-continue")) || r->announced > DRAIN_MAX;
}

int serve_http_hold(struct serve_http *h, size_t bytes)
{
	if (!h)
		return 0; /* (no HTTP side: a unit's own calls) */
	if (bytes > h->srv->cfg.max_buffered)
		return -E2BIG;
	if (atomic_fetch_add(&h->buffered, bytes) + bytes > h->srv->cfg.max_buffered) {
		atomic_fetch_sub(&h->buffered, bytes);
		return -ENOSPC;
	}
	return 0;
}

void serve_http_release(struct serve_http *h, size_t bytes)
{
	if (h)
		atomic_fetch_sub(&h->buffered, bytes);
}

/* ---- the body ---------------------------------------------------------- */

static int keep(struct request *r, const char *data, size_t n)
{
	struct serve_http *h = r->h;
	size_t max = h->srv->cfg.max_body;

	if (r->drop_body || n > max - r->len) {
		if (!r->drop_body && !r->answer_early) {
			serve_error(&r->reply, 413,
				    "request body exceeds the limit of %zu bytes "
				    "(sandguard serve --max-body)",
				    max);
			r->answer_early = true;
		}
		r->drop_body = true;
		r->dropped += n;
		return r->dropped > DRAIN_MAX ? -1 : 0; /* past that, just close */
	}
	if (r->len + n + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 4096, grow;
		char *body;

		while (cap < r->len + n + 1)
			cap *= 2;
		grow = cap - r->cap;
		if (serve_http_hold(h, grow)) {
			serve_error(&r->reply, 503,
				    "the server holds too many request bodies at once "
				    "(sandguard serve --max-buffered); retry later");
			r->reply.retry_after_s = 1;
			r->answer_early = r->drop_body = true;
			return 0;
		}
		body = realloc(r->body, cap);
		if (!body) {
			serve_http_release(h, grow);
			return -1;
		}
		r->body = body;
		r->cap = cap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = '\0';
	return 0;
}

/* The client's wait started when it connected, not when its headers were
 * parsed: under load the difference is seconds of its budget that the
 * server would not see. The first request of a connection counts from
 * the accept; a kept-alive one's later requests from their headers. */
static void arrived_at_accept(struct serve_http *h, struct request *r, struct conn_entry *e)
{
	uint64_t opened = conns_first_request_ms(h->conns, e);

	if (opened && opened < r->rq.arrived_ms)
		r->rq.arrived_ms = opened;
}

/* ---- the worker -------------------------------------------------------- */

static void *worker(void *arg)
{
	struct request *r = arg;
	struct serve_http *h = r->h;

	r->rq.body = r->body ? r->body : "";
	r->rq.body_len = r->len;
	serve_handle_routed(h->srv, &r->route, &r->rq, &r->reply);
	r->reply_ready = true;
	/* The I/O thread calls on_request again, which sends the reply. */
	MHD_resume_connection(r->mc);
	pool_answered(h->srv->pool); /* its work may go on */
	atomic_fetch_sub(&h->workers, 1);
	return NULL;
}

static enum MHD_Result dispatch(struct request *r)
{
	struct serve_http *h = r->h;
	const struct serve_endpoint *ep = r->route.ep;
	pthread_t t;

	if (atomic_fetch_add(&h->workers, 1) >= h->max_workers) {
		atomic_fetch_sub(&h->workers, 1);
		/* "Not now", as the endpoint says it: 504 on /run_code. */
		serve_error(&r->reply, ep && ep->busy_status ? ep->busy_status : 503,
			    "the server is handling %u requests already (--max-concurrency plus "
			    "--queue); retry later",
			    h->max_workers);
		r->reply.retry_after_s = gate_retry_after_s(h->srv->gate);
		return answer(r);
	}
	MHD_suspend_connection(r->mc);
	if (pthread_create(&t, &h->worker_attr, worker, r)) {
		atomic_fetch_sub(&h->workers, 1);
		MHD_resume_connection(r->mc);
		serve_error(&r->reply, 503, "cannot start a thread for the request; retry later");
		r->reply.retry_after_s = 1;
		r->reply_ready = true;
	}
	return MHD_YES;
}

/* ---- libmicrohttpd's callbacks ---------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	struct serve_http *h = cls;
	struct request *r = *req_cls;

	if (!r) { /* the headers are in */
		const char *cl = header(mc, MHD_HTTP_HEADER_CONTENT_LENGTH);
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

		conns_headers_in(h->conns, ci ? ci->socket_context : NULL);
		r = request_new(h, mc, url, method);
		if (!r)
			return MHD_NO;
		arrived_at_accept(h, r, ci ? ci->socket_context : NULL);
		*req_cls = r;
		r->announced = cl ? strtoull(cl, NULL, 10) : 0;
		/* An answer queued now closes the connection (libmicrohttpd
		 * cannot tell what the client sends next): only for a client
		 * that waits for it, or a body too large to drop. Otherwise it
		 * goes out at the next call, once the request (its body, if
		 * any, read and dropped) is whole, and keep-alive holds. */
		if (decide_on_headers(r)) {
			r->answer_early = r->drop_body = true;
			if (answer_before_body(r))
				return answer(r);
		}
		return MHD_YES; /* come back with the body */
	}
	if (r->reply_ready)
		return answer(r);
	if (*upload_size) {
		if (clock_ms(CLOCK_MONOTONIC) > r->body_due_ms) {
			if (log_window_take(&refusals))
				sg_info("serve: a request body was not complete %u s after its "
					"headers: connection closed",
					h->srv->cfg.body_timeout_s);
			return MHD_NO;
		}
		if (keep(r, upload, *upload_size))
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->answer_early)
		return answer(r);
	return dispatch(r);
}

/* The response is sent (or the client is gone): the request is over. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
			 enum MHD_RequestTerminationCode why)
{
	struct serve_http *h = cls;
	struct request *r = *req_cls;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	conns_request_done(h->conns, ci ? ci->socket_context : NULL);
	if (!r)
		return;
	serve_http_release(h, r->cap);
	free(r->body);
	serve_reply_free(&r->reply);
	free(r);
	*req_cls = NULL;
	atomic_fetch_sub(&h->in_flight, 1);
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct serve_http *h = cls;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

		*socket_context = conns_opened(h->conns, ci ? ci->connect_fd : -1);
	} else {
		conns_closed(h->conns, *socket_context);
		*socket_context = NULL;
	}
}

static int hand_over(void *arg, int fd, const struct sockaddr *sa, socklen_t len)
{
	struct serve_http *h = arg;

	/* On failure libmicrohttpd has closed the socket. */
	return MHD_add_connection(h->daemon, fd, sa, len) == MHD_YES ? 0 : -1;
}

/* ---- lifecycle --------------------------------------------------------- */

int serve_http_start(struct serve *s, int listen_fd, struct serve_http **out)
{
	const struct serve_config *cfg = &s->cfg;
	struct serve_http *h = calloc(1, sizeof(*h));
	int ret;

	if (!h) {
		close(listen_fd);
		return -ENOMEM;
	}
	h->srv = s;
	h->max_workers = cfg->max_concurrency + cfg->queue + SERVE_EXTRA_WORKERS;
	pthread_attr_init(&h->worker_attr);
	pthread_attr_setdetachstate(&h->worker_attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&h->worker_attr, SG_SERVE_WORKER_STACK);
	h->conns = conns_new(listen_fd, cfg->max_connections, cfg->header_timeout_s, hand_over, h);
	if (!h->conns) {
		close(listen_fd);
		free(h);
		return -ENOMEM;
	}
	/* Our cap is enforced before libmicrohttpd sees a connection; its
	 * own, a little higher, is never the one that refuses. */
	h->daemon = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET |
					     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
				     0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER,
				     mhd_log, "serve http", MHD_OPTION_NOTIFY_COMPLETED,
				     on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
				     h, MHD_OPTION_CONNECTION_LIMIT,
				     (unsigned int)cfg->max_connections + 64,
				     MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned int)cfg->idle_timeout_s, MHD_OPTION_END);
	if (!h->daemon) {
		sg_error("serve: libmicrohttpd would not start");
		conns_free(h->conns);
		free(h);
		return -EIO;
	}
	ret = conns_start(h->conns);
	if (ret) {
		sg_error("serve: cannot start the accepting thread: %s", strerror(-ret));
		MHD_stop_daemon(h->daemon);
		conns_free(h->conns);
		free(h);
		return ret;
	}
	*out = h;
	return 0;
}

void serve_http_counts(struct serve_http *h, struct serve_http_counts *out)
{
	out->connections = conns_live(h->conns);
	out->header_timeouts = conns_timed_out(h->conns);
	out->refused_connections = conns_refused(h->conns);
	out->workers = atomic_load(&h->workers);
	out->in_flight = atomic_load(&h->in_flight);
}

void serve_http_stop(struct serve_http *h, unsigned grace_s)
{
	uint64_t until;

	if (!h)
		return;
	/* Every worker ends: the gate is closed, the running ones end by
	 * their deadlines. Then the replies get up to grace_s to go out. */
	while (atomic_load(&h->workers))
		usleep(20000);
	until = clock_ms(CLOCK_MONOTONIC) + (uint64_t)grace_s * 1000;
	while (atomic_load(&h->in_flight) && clock_ms(CLOCK_MONOTONIC) < until)
		usleep(20000);
	conns_stop(h->conns);
	MHD_stop_daemon(h->daemon);
	conns_free(h->conns);
	pthread_attr_destroy(&h->worker_attr);
	free(h);
}
