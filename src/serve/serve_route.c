/* One HTTP request from URL to reply, without sockets: route, parse the
 * body, find the tenant and its policy, let the endpoint validate, admit,
 * run. Bad input is answered before anything is booked or admitted. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "control/agent_client.h"
#include "lib/json_text.h"
#include "lib/log.h"
#include "serve_internal.h"

#define TENANTS_PREFIX "/tenants/"

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

/* ---- tenant and ids --------------------------------------------------- */

/* The one tenant that every source names, or "default". */
static int resolve_tenant(struct serve_call *c, const char *path_tenant, json_t *body,
			  bool body_tenant, struct serve_reply *rp)
{
	const char *names[3] = { c->rq->tenant_header, path_tenant, NULL };
	const char *what[3] = { "the " SERVE_TENANT_HEADER " header", "the path",
				"the body's \"tenant\"" };
	json_t *v = body_tenant ? json_object_get(body, "tenant") : NULL;
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
			serve_error(rp, 400, "%s names tenant \"%s\" but %s names \"%s\"",
				    what[from], chosen, what[i], names[i]);
			return -1;
		}
		chosen = names[i];
		from = i;
	}
	snprintf(c->tenant, sizeof(c->tenant), "%s", chosen ? chosen : "default");
	return 0;
}

static int resolve_ids(struct serve_call *c, struct serve_reply *rp)
{
	const struct serve_request *rq = c->rq;

	if (rq->request_id_header) {
		if (!id_valid(rq->request_id_header, strlen(rq->request_id_header))) {
			serve_error(rp, 400,
				    SERVE_REQUEST_ID_HEADER
				    " must be 1 to %d printable ASCII characters "
				    "without spaces",
				    SG_ID_MAX);
			return -1;
		}
		snprintf(c->request_id, sizeof(c->request_id), "%s", rq->request_id_header);
	} else {
		snprintf(c->request_id, sizeof(c->request_id), "sg-%08x-%lu", c->srv->id_prefix,
			 (unsigned long)atomic_fetch_add(&c->srv->seq, 1) + 1);
	}
	if (rq->run_id_header && !id_valid(rq->run_id_header, strlen(rq->run_id_header))) {
		serve_error(rp, 400,
			    SERVE_RUN_ID_HEADER " must be 1 to %d printable ASCII characters "
						"without spaces",
			    SG_ID_MAX);
		return -1;
	}
	c->run_id = rq->run_id_header;
	return 0;
}

/* ---- POST ------------------------------------------------------------- */

static void refuse(struct serve_call *c, enum gate_verdict v, struct serve_reply *rp)
{
	const struct sg_limits *lim = &c->policy->limits;
	const struct serve_config *cfg = &c->srv->cfg;
	unsigned after = serve_retry_after(c->policy);
	char wait[96];

	if (lim->on_excess == SG_EXCESS_WAIT)
		snprintf(wait, sizeof(wait), "queue_timeout_ms %llu",
			 (unsigned long long)lim->queue_timeout_ms);
	else
		snprintf(wait, sizeof(wait), "on_excess refuse");
	switch (v) {
	case GATE_TENANT_FULL:
		serve_error(
			rp, 429,
			"tenant %s is at its concurrency cap of %u running requests "
			"(limits.concurrency) and no place freed in time (%s); retry after %u s",
			c->tenant, lim->concurrency, wait, after);
		break;
	case GATE_TENANT_QUEUE:
		serve_error(rp, 429,
			    "tenant %s already has %u requests waiting (--tenant-queue); "
			    "retry after %u s",
			    c->tenant, cfg->tenant_queue, after);
		break;
	case GATE_SERVER_FULL:
		serve_error(rp, 503,
			    "the server is at capacity: %u requests running (--max-concurrency) "
			    "and no place freed in time (%s); retry after %u s",
			    cfg->max_concurrency, wait, after);
		break;
	case GATE_SERVER_QUEUE:
		serve_error(rp, 503,
			    "the server is at capacity: %u requests running (--max-concurrency) "
			    "and %u waiting (--queue); retry after %u s",
			    cfg->max_concurrency, cfg->queue, after);
		break;
	default:
		serve_error(rp, 503, "the server is shutting down; retry after %u s", after);
		break;
	}
	rp->retry_after_s = after;
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
	ctx.agent = agent_connect(NULL);
	exec_book(&ctx, &(struct exec_booking){ .mode = ep->mode,
						.batch_id = c->request_id,
						.final = true,
						.cause = SG_CAUSE_PLATFORM_ERROR,
						.rule = -1,
						.detail = detail });
	agent_close(ctx.agent);
	sg_error("serve: tenant %s: %s", c->tenant, detail);
	ep->policy_error(c, detail, rp);
}

static void handle_post(struct serve *s, const struct serve_endpoint *ep, const char *path_tenant,
			const struct serve_request *rq, struct serve_reply *rp)
{
	struct serve_call c = { .srv = s, .rq = rq };
	struct sg_policy_error perr;
	struct sg_policy *policy = NULL;
	json_error_t jerr;
	json_t *body;
	void *plan = NULL;
	enum gate_verdict v;

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
	if (resolve_tenant(&c, path_tenant, body, ep->body_tenant, rp) || resolve_ids(&c, rp))
		goto out;
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
	v = gate_enter(s->gate, c.tenant, policy->limits.concurrency,
		       policy->limits.on_excess == SG_EXCESS_WAIT ? policy->limits.queue_timeout_ms
								  : 0);
	if (v != GATE_OK) {
		refuse(&c, v, rp);
	} else {
		c.agent = agent_connect(NULL);
		ep->execute(&c, plan, rp);
		agent_close(c.agent);
		gate_leave(s->gate, c.tenant);
	}
	ep->free_plan(plan);
out:
	sg_info("serve: %s %s tenant %s request %s: %u", rq->method, rq->url,
		c.tenant[0] ? c.tenant : "-", c.request_id[0] ? c.request_id : "-", rp->status);
	free(policy);
	json_decref(body);
}

static void healthz(struct serve *s, struct serve_reply *rp)
{
	uint32_t running, waiting;

	gate_counts(s->gate, &running, &waiting);
	rp->status = 200;
	rp->body = json_pack("{s:s, s:i, s:i}", "status", "ok", "running", (int)running, "waiting",
			     (int)waiting);
}

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

void serve_handle(struct serve *s, const struct serve_request *rq, struct serve_reply *rp)
{
	const struct serve_endpoint *ep = NULL;
	char tenant_buf[SG_TENANT_MAX + 1];
	const char *path_tenant = NULL;

	memset(rp, 0, sizeof(*rp));
	if (!strcmp(rq->url, "/healthz")) {
		if (!strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD")) {
			healthz(s, rp);
		} else {
			rp->allow = "GET, HEAD";
			serve_error(rp, 405, "%s /healthz: use GET", rq->method);
		}
		return;
	}
	if (!strcmp(rq->url, "/run_code"))
		ep = &serve_runcode_endpoint;
	else if (!strcmp(rq->url, "/v1/score"))
		ep = &serve_score_endpoint;
	else if (!strcmp(rq->url, "/v1/verify"))
		ep = &serve_verify_endpoint;
	else if ((path_tenant = path_tenant_of(rq->url, tenant_buf, sizeof(tenant_buf))))
		ep = &serve_runcode_endpoint;
	if (!ep) {
		serve_error(rp, 404,
			    "no such endpoint: %.200s (POST /run_code, /tenants/<tenant>/run_code, "
			    "/v1/score, /v1/verify; GET /healthz)",
			    rq->url);
		return;
	}
	if (strcmp(rq->method, "POST")) {
		rp->allow = "POST";
		serve_error(rp, 405, "%s %.200s: use POST", rq->method, rq->url);
		return;
	}
	handle_post(s, ep, path_tenant, rq, rp);
}
