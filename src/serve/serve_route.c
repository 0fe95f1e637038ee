/* One HTTP request from URL to reply, without sockets, in two phases.
 * From the headers: route, method and credentials; a request refused
 * there (404, 405, 401, 403) is answered before its body is kept, and
 * never touches a tenant's state. With the body: parse, find the tenant's
 * policy, let the endpoint validate, admit, run. Bad input is answered
 * before anything is booked or admitted. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lib/clock.h"
#include "lib/json_shape.h"
#include "lib/json_text.h"
#include "lib/log.h"
#include "serve_http.h"
#include "serve_internal.h"

#define TENANTS_PREFIX "/tenants/"
#define BEARER         "Bearer "

void serve_error(struct serve_reply *rp, unsigned status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_decref(rp->body);
	rp->status = status;
	/* Messages quote what the client sent, which may not be UTF-8. */
	rp->body = json_pack("{s:o}", "error", json_string_lossy(msg, strlen(msg)));
}

void serve_reply_free(struct serve_reply *rp)
{
	json_decref(rp->body);
	memset(rp, 0, sizeof(*rp));
}

unsigned serve_retry_after(const struct sg_policy *p)
{
	uint64_t s = (p->limits.timeout_ms + 999) / 1000;

	return s < 1 ? 1 : s > SERVE_RETRY_AFTER_MAX_S ? SERVE_RETRY_AFTER_MAX_S : (unsigned)s;
}

/* Ids are booked and logged: 1..SG_ID_MAX printable ASCII characters. */
static bool id_valid(const char *s, size_t len)
{
	if (len == 0 || len > SG_ID_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return false;
	return true;
}

int serve_opt_id(json_t *body, const char *key, const char **out, struct serve_reply *rp)
{
	json_t *v = json_object_get(body, key);

	if (!v)
		return 0;
	if (!json_is_string(v) || !id_valid(json_string_value(v), json_string_length(v))) {
		serve_error(rp, 400,
			    "\"%s\" must be a string of 1 to %d printable ASCII characters "
			    "without spaces",
			    key, SG_ID_MAX);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

int serve_opt_timeout(json_t *body, const struct sg_policy *p, uint64_t *ms, struct serve_reply *rp)
{
	json_t *v = json_object_get(body, "timeout_ms");

	*ms = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) <= 0) {
		serve_error(rp, 400, "\"timeout_ms\" must be a positive integer (milliseconds)");
		return -1;
	}
	if ((uint64_t)json_integer_value(v) > p->limits.timeout_ms) {
		serve_error(rp, 400,
			    "\"timeout_ms\" %lld exceeds the policy's timeout_ms %llu (%s)",
			    (long long)json_integer_value(v),
			    (unsigned long long)p->limits.timeout_ms, p->source);
		return -1;
	}
	*ms = (uint64_t)json_integer_value(v);
	return 0;
}

int serve_known_keys(json_t *body, const char *const *known, struct serve_reply *rp)
{
	char unknown[512] = "", valid[512] = "";
	const char *key;
	json_t *v;

	json_object_foreach(body, key, v)
	{
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = !strcmp(key, *k);
		if (!ok)
			detail_append(unknown, sizeof(unknown), "%s\"%s\"", unknown[0] ? ", " : "",
				      key);
	}
	if (!unknown[0])
		return 0;
	for (const char *const *k = known; *k; k++)
		detail_append(valid, sizeof(valid), "%s%s", k == known ? "" : ", ", *k);
	serve_error(rp, 400, "unknown key%s %s (expected: %s)", strchr(unknown, ',') ? "s" : "",
		    unknown, valid);
	return -1;
}

void serve_busy(struct serve_call *c, const struct serve_endpoint *ep, unsigned status,
		unsigned retry_after_s, struct serve_reply *rp, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	serve_error(rp, ep->busy_status ? ep->busy_status : status, "%s", msg);
	rp->retry_after_s = retry_after_s ? retry_after_s : 1;
}

void serve_shown_url(const struct serve_request *rq, char *buf, size_t len)
{
	snprintf(buf, len, "%s%.200s", rq->token_in_path ? "/t/..." : "", rq->url);
}

/* ---- phase 1: the headers --------------------------------------------- */

/* "/tenants/<tenant>/run_code": the tenant, or NULL when the URL is not
 * of that shape. */
static const char *path_tenant_of(const char *url, char *buf, size_t len)
{
	const char *start, *slash;

	if (strncmp(url, TENANTS_PREFIX, strlen(TENANTS_PREFIX)))
		return NULL;
	start = url + strlen(TENANTS_PREFIX);
	slash = strchr(start, '/');
	if (!slash || strcmp(slash, "/run_code") || (size_t)(slash - start) >= len)
		return NULL;
	memcpy(buf, start, slash - start);
	buf[slash - start] = '\0';
	return buf;
}

/* 401 (no or unknown credentials, with a Bearer challenge) or 403 (the
 * credentials of another tenant). Returns -1: the request ends here. */
static int unauthorized(struct serve *s, struct serve_reply *rp, unsigned status, const char *fmt,
			...) __attribute__((format(printf, 4, 5)));
static int unauthorized(struct serve *s, struct serve_reply *rp, unsigned status, const char *fmt,
			...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&s->n_unauthorized, 1);
	serve_error(rp, status, "%s", msg);
	rp->challenge = status == 401;
	return -1;
}

/* Who the request is from: the token's tenant, which every other naming
 * of the tenant must match; without tokens, the path's (if any). */
static int authenticate(struct serve *s, const struct serve_request *rq, const char *path_tenant,
			struct serve_route *rt, struct serve_reply *rp)
{
	const char *named = rq->tenant_header ? rq->tenant_header : path_tenant;

	if (!s->tokens) {
		if (rq->token)
			return unauthorized(s, rp, 401,
					    "this server takes no tokens (it was started without "
					    "--tokens): drop the /t/<token> prefix and the "
					    "Authorization header");
		if (path_tenant)
			snprintf(rt->tenant, sizeof(rt->tenant), "%s", path_tenant);
		return 0;
	}
	if (!rq->token)
		return unauthorized(s, rp, 401,
				    "a tenant token is required: POST /t/<token>%s, or send "
				    "\"Authorization: Bearer <token>\"",
				    rq->url);
	if (!serve_tokens_lookup(s->tokens, rq->token, rq->token_len, rt->tenant))
		return unauthorized(s, rp, 401, "unknown token");
	rt->authenticated = true;
	if (path_tenant && rq->tenant_header && strcmp(path_tenant, rq->tenant_header))
		named = path_tenant; /* report the first that disagrees */
	if (named && strcmp(named, rt->tenant)) {
		rt->tenant[0] = '\0';
		return unauthorized(
			s, rp, 403,
			"the token is not tenant \"%.80s\"'s: a token names its tenant, "
			"and X-Sandguard-Tenant or the path may only repeat it",
			named);
	}
	return 0;
}

int serve_route(struct serve *s, const struct serve_request *rq, struct serve_route *rt,
		struct serve_reply *rp)
{
	char tenant_buf[SG_TENANT_MAX + 1];
	const char *path_tenant = NULL, *url = rq->url;
	bool get = !strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD");

	memset(rp, 0, sizeof(*rp));
	memset(rt, 0, sizeof(*rt));
	if (!strcmp(url, "/healthz") || !strcmp(url, "/readyz")) {
		if (!get) {
			rp->allow = "GET, HEAD";
			serve_error(rp, 405, "%s %s: use GET", rq->method, url);
			return -1;
		}
		if (url[1] == 'r') {
			rt->kind = ROUTE_READYZ;
			return 0;
		}
		serve_healthz(s, rp);
		return -1;
	}
	rt->kind = ROUTE_POST;
	if (!strcmp(url, "/run_code"))
		rt->ep = &serve_runcode_endpoint;
	else if (!strcmp(url, "/v1/score"))
		rt->ep = &serve_score_endpoint;
	else if (!strcmp(url, "/v1/verify"))
		rt->ep = &serve_verify_endpoint;
	else if (!strncmp(url, "/v1/sessions", 12) && (!url[12] || url[12] == '/'))
		rt->ep = &serve_session_endpoint;
	else if (!strcmp(url, "/openrlhf/get_reward"))
		rt->ep = &serve_openrlhf_endpoint;
	else if (serve_tci_path(url))
		rt->ep = &serve_tci_endpoint;
	else if ((path_tenant = path_tenant_of(url, tenant_buf, sizeof(tenant_buf))))
		rt->ep = &serve_runcode_endpoint;
	if (!rt->ep) {
		char shown[256];

		serve_shown_url(rq, shown, sizeof(shown));
		serve_error(rp, 404,
			    "no such endpoint: %s (POST /run_code, /v1/score, /v1/verify, "
			    "/v1/sessions[/<id>/exec|put|get|fork|close], "
			    "/openrlhf/get_reward, /tci/execute, each also under /t/<token>; "
			    "GET /healthz, /readyz)",
			    shown);
		return -1;
	}
	if (strcmp(rq->method, "POST")) {
		rp->allow = "POST";
		serve_error(rp, 405, "%s %s: use POST", rq->method, url);
		return -1;
	}
	if (path_tenant && !tenant_name_valid(path_tenant)) {
		serve_error(rp, 400,
			    "invalid tenant name \"%.80s\" in the path: expected "
			    "[a-z0-9][a-z0-9_-]{0,62}",
			    path_tenant);
		return -1;
	}
	return authenticate(s, rq, path_tenant, rt, rp);
}

/* ---- phase 2: the body ------------------------------------------------ */

/* The one tenant that every source names: the token's (phase 1), else the
 * header's, the path's or the body's, else "default". */
static int resolve_tenant(struct serve_call *c, const struct serve_route *rt, json_t *body,
			  struct serve_reply *rp)
{
	const char *names[3] = { rt->tenant[0] ? rt->tenant : NULL, c->rq->tenant_header, NULL };
	const char *what[3] = { rt->authenticated ? "the token" : "the path",
				"the " SERVE_TENANT_HEADER " header", "the body's \"tenant\"" };
	json_t *v = rt->ep->body_tenant ? json_object_get(body, "tenant") : NULL;
	const char *chosen = NULL;
	int from = -1;

	if (v && !json_is_string(v)) {
		serve_error(rp, 400, "\"tenant\" must be a string");
		return -1;
	}
	names[2] = v ? json_string_value(v) : NULL;
	for (int i = 0; i < 3; i++) {
		if (!names[i])
			continue;
		if (!tenant_name_valid(names[i])) {
			serve_error(
				rp, 400,
				"invalid tenant name \"%.80s\" in %s: expected [a-z0-9][a-z0-9_-]{0,62}",
				names[i], what[i]);
			return -1;
		}
		if (chosen && strcmp(chosen, names[i])) {
			serve_error(rp, rt->authenticated ? 403 : 400,
				    "%s names tenant \"%s\" but %s names \"%s\"", what[from],
				    chosen, what[i], names[i]);
			if (rt->authenticated)
				atomic_fetch_add(&c->srv->n_unauthorized, 1);
			return -1;
		}
		chosen = names[i];
		from = i;
	}
	snprintf(c->tenant, sizeof(c->tenant), "%s", chosen ? chosen : "default");
	return 0;
}

static int check_id(const char *value, const char *header, struct serve_reply *rp)
{
	if (id_valid(value, strlen(value)))
		return 0;
	serve_error(rp, 400, "%s must be 1 to %d printable ASCII characters without spaces", header,
		    SG_ID_MAX);
	return -1;
}

static int resolve_ids(struct serve_call *c, struct serve_reply *rp)
{
	const struct serve_request *rq = c->rq;
	const char *rid = rq->request_id_header;

	if (rid && check_id(rid, SERVE_REQUEST_ID_HEADER, rp))
		return -1;
	if (rid)
		snprintf(c->request_id, sizeof(c->request_id), "%s", rid);
	else
		snprintf(c->request_id, sizeof(c->request_id), "sg-%08x-%lu", c->srv->id_prefix,
			 (unsigned long)atomic_fetch_add(&c->srv->seq, 1) + 1);
	if (rq->run_id_header && check_id(rq->run_id_header, SERVE_RUN_ID_HEADER, rp))
		return -1;
	c->run_id = rq->run_id_header;
	return 0;
}

/* A gate refusal. /run_code answers every one 504 (its busy_status). */
static void refuse(struct serve_call *c, const struct serve_endpoint *ep, enum gate_verdict v,
		   bool late, struct serve_reply *rp)
{
	const struct sg_limits *lim = &c->policy->limits;
	const struct serve_config *cfg = &c->srv->cfg;
	unsigned after = serve_retry_after(c->policy),
		 server_after = gate_retry_after_s(c->srv->gate);
	char wait[96];

	if (lim->on_excess == SG_EXCESS_WAIT)
		snprintf(wait, sizeof(wait), "queue_timeout_ms %llu",
			 (unsigned long long)lim->queue_timeout_ms);
	else
		snprintf(wait, sizeof(wait), "on_excess refuse");
	if (late && v != GATE_CLOSED) {
		atomic_fetch_add(&c->srv->n_late, 1);
		serve_busy(c, ep, 503, server_after, rp,
			   "request %s cannot start in time to finish within what its client waits "
			   "(compile_timeout + run_timeout + %d s): %u requests running "
			   "(--max-concurrency), tenant %s's cap %u (limits.concurrency); retry "
			   "after %u s",
			   c->request_id, SERVE_CLIENT_SLACK_MS / 1000, cfg->max_concurrency,
			   c->tenant, lim->concurrency, server_after);
		return;
	}
	switch (v) {
	case GATE_TENANT_FULL:
		serve_busy(c, ep, 429, after, rp,
			   "tenant %s is at its concurrency cap of %u running requests "
			   "(limits.concurrency) and no place freed in time (%s); retry after %u s",
			   c->tenant, lim->concurrency, wait, after);
		break;
	case GATE_TENANT_QUEUE:
		serve_busy(c, ep, 429, after, rp,
			   "tenant %s already has %u requests waiting (--tenant-queue); "
			   "retry after %u s",
			   c->tenant, cfg->tenant_queue, after);
		break;
	case GATE_SERVER_FULL:
		serve_busy(c, ep, 503, server_after, rp,
			   "the server is at capacity: %u requests running (--max-concurrency) "
			   "and no place freed in time (%s); retry after %u s",
			   cfg->max_concurrency, wait, server_after);
		break;
	case GATE_SERVER_QUEUE:
		serve_busy(c, ep, 503, server_after, rp,
			   "the server is at capacity: %u requests running (--max-concurrency) "
			   "and %u waiting (--queue); retry after %u s",
			   cfg->max_concurrency, cfg->queue, server_after);
		break;
	default:
		serve_busy(c, ep, 503, after, rp, "the server is shutting down; retry after %u s",
			   after);
		break;
	}
}

/* The policy could not be loaded: a platform error of this node, booked
 * like one (never the tenant's fault), then answered by the endpoint. */
static void policy_failure(struct serve_call *c, const struct serve_endpoint *ep,
			   const struct sg_policy_error *perr, struct serve_reply *rp)
{
	struct exec_ctx ctx = { .tenant = c->tenant, .run_id = c->run_id };
	char msg[512], detail[EXEC_DETAIL_MAX];

	policy_error_format(perr, msg, sizeof(msg));
	snprintf(detail, sizeof(detail), "platform error: cannot load the policy: %s", msg);
	ctx.agent = agent_shared_get(&c->srv->agent);
	exec_book(&ctx, &(struct exec_booking){ .mode = ep->mode,
						.batch_id = c->request_id,
						.final = true,
						.cause = SG_CAUSE_PLATFORM_ERROR,
						.rule = -1,
						.detail = detail });
	sg_error("serve: tenant %s: %s", c->tenant, detail);
	ep->policy_error(c, detail, rp);
}

/* Admit (waiting as the policy and the request's budget allow), run. */
static void admit_and_run(struct serve_call *c, const struct serve_endpoint *ep, void *plan,
			  struct serve_reply *rp)
{
	const struct sg_limits *lim = &c->policy->limits;
	struct serve *s = c->srv;
	struct gate_wait how = {
		.wait_ms = lim->on_excess == SG_EXCESS_WAIT ? lim->queue_timeout_ms : 0,
		.expected_ms = c->budget.worst_ms ? c->budget.worst_ms : lim->timeout_ms,
		.gone = c->rq->client_gone,
		.gone_arg = c->rq->gone_arg,
	};
	uint64_t now = clock_ms(CLOCK_MONOTONIC);
	struct gate_ticket ticket;
	enum gate_verdict v;
	bool late = false;

	if (c->budget.latest_start_ms) {
		uint64_t left = c->budget.latest_start_ms > now ? c->budget.latest_start_ms - now
								: 0;

		late = left <= how.wait_ms;
		if (late)
			how.wait_ms = left;
	}
	if (late && !how.wait_ms) {
		refuse(c, ep, GATE_SERVER_FULL, true, rp);
		return;
	}
	v = gate_enter(s->gate, c->tenant, lim->concurrency, &how, &ticket);
	if (v == GATE_GONE) {
		atomic_fetch_add(&s->n_gone, 1);
		rp->no_reply = true;
		serve_error(rp, 499, "the client closed the connection while its request waited");
		return;
	}
	if (v != GATE_OK) {
		/* A wait cut short by the budget is "late", not the policy's. */
		refuse(c, ep, v, late && (v == GATE_TENANT_FULL || v == GATE_SERVER_FULL), rp);
		return;
	}
	c->agent = agent_shared_get(&s->agent);
	c->admitted_ms = clock_ms(CLOCK_MONOTONIC);
	ep->execute(c, plan, rp);
	c->executed_ms = clock_ms(CLOCK_MONOTONIC);
	gate_leave(s->gate, &ticket);
}

/* One access line per request: who, what, the answer, and where its time
 * went (the gate's queue, the execution), from when its client connected. */
static void log_request(const struct serve_call *c, const char *shown, const struct serve_reply *rp)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC), at = c->rq->arrived_ms;
	char when[96] = "";

	if (c->admitted_ms && c->executed_ms)
		snprintf(when, sizeof(when), " (queued %" PRIu64 " ms, executed in %" PRIu64 " ms)",
			 c->admitted_ms - at, c->executed_ms - c->admitted_ms);
	sg_info("serve: %s %s tenant %s request %s: %s%u in %" PRIu64 " ms%s", c->rq->method, shown,
		c->tenant[0] ? c->tenant : "-", c->request_id[0] ? c->request_id : "-",
		rp->no_reply ? "dropped, client gone, " : "", rp->status, now - at, when);
}

/* A body's shape before jansson builds its tree (lib/json_shape.h). Its
 * nesting: jansson's encoder and free recurse with no bound, ~300 bytes a
 * level, and a request's values are encoded again on its worker's 256 KiB
 * stack (/openrlhf's labels, a canary mix): 835 levels overflowed it. Its
 * values: a tree takes up to ~200 bytes a value (an empty object), so an
 * 8 MiB body of "{}," became 618 MiB. That estimate is held from the
 * --max-buffered budget the bodies share until the request ends (*held),
 * so the trees of every request parsing at once stay within it. */
static int check_shape(struct serve *s, const struct serve_request *rq, size_t *held,
		       struct serve_reply *rp)
{
	struct json_shape shape;
	size_t bytes;
	int err;

	json_shape(rq->body ? rq->body : "", rq->body_len, &shape);
	if (shape.depth > SERVE_JSON_DEPTH_MAX) {
		serve_error(rp, 400, "the body nests %zu levels deep; at most %d are taken",
			    shape.depth, SERVE_JSON_DEPTH_MAX);
		return -EINVAL;
	}
	bytes = shape.values * SERVE_JSON_VALUE_BYTES;
	err = serve_http_hold(s->http, bytes);
	if (err == -E2BIG) {
		serve_error(rp, 413,
			    "the body holds %zu JSON values, whose tree (%zu bytes at %d a value) "
			    "is more than the server holds at once (sandguard serve "
			    "--max-buffered)",
			    shape.values, bytes, SERVE_JSON_VALUE_BYTES);
		return err;
	}
	if (err) {
		serve_error(rp, 503,
			    "the server holds too many request bodies at once "
			    "(sandguard serve --max-buffered); retry later");
		rp->retry_after_s = 1;
		return err;
	}
	*held = bytes;
	return 0;
}

static void handle_post(struct serve *s, const struct serve_route *rt,
			const struct serve_request *rq, struct serve_reply *rp)
{
	const struct serve_endpoint *ep = rt->ep;
	struct serve_call c = { .srv = s, .rq = rq };
	struct sg_policy_error perr;
	struct sg_policy *policy = NULL;
	json_error_t jerr;
	json_t *body = NULL;
	void *plan = NULL;
	size_t held = 0;
	char shown[256];

	if (check_shape(s, rq, &held, rp))
		goto out;
	body = json_loadb(rq->body ? rq->body : "", rq->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!body) {
		serve_error(rp, 400, "invalid JSON body: line %d, column %d: %s", jerr.line,
			    jerr.column, jerr.text);
		goto out;
	}
	if (!json_is_object(body)) {
		serve_error(rp, 400, "the body must be a JSON object");
		goto out;
	}
	if (resolve_tenant(&c, rt, body, rp) || resolve_ids(&c, rp))
		goto out;
	snprintf(rp->request_id, sizeof(rp->request_id), "%s", c.request_id);
	policy = malloc(sizeof(*policy));
	if (!policy) {
		serve_error(rp, 500, "out of memory");
		goto out;
	}
	if (policy_for_tenant(s->policy_dir, c.tenant, policy, &perr)) {
		policy_failure(&c, ep, &perr, rp);
		goto out;
	}
	c.policy = policy;
	if (ep->prepare(&c, body, &plan, rp))
		goto out;
	if (ep->budget)
		ep->budget(&c, plan);
	admit_and_run(&c, ep, plan, rp);
	ep->free_plan(plan);
out:
	serve_shown_url(rq, shown, sizeof(shown));
	log_request(&c, shown, rp);
	free(policy);
	json_decref(body);
	serve_http_release(s->http, held);
}

void serve_handle_routed(struct serve *s, const struct serve_route *rt,
			 const struct serve_request *rq, struct serve_reply *rp)
{
	memset(rp, 0, sizeof(*rp));
	if (rt->kind == ROUTE_READYZ)
		serve_readyz(s, rp);
	else
		handle_post(s, rt, rq, rp);
}

void serve_handle(struct serve *s, const struct serve_request *rq, struct serve_reply *rp)
{
	struct serve_route rt;
	struct serve_request now = *rq;

	if (!now.arrived_ms)
		now.arrived_ms = clock_ms(CLOCK_MONOTONIC);
	if (serve_route(s, &now, &rt, rp)) {
		char shown[256];

		serve_shown_url(&now, shown, sizeof(shown));
		if (rp->status != 200)
			sg_info("serve: %s %s: %u", now.method, shown, rp->status);
		return;
	}
	serve_handle_routed(s, &rt, &now, rp);
}
