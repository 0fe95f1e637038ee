/* POST /openrlhf/get_reward: OpenRLHF's remote reward server.
 *
 * OpenRLHF (--reward.remote_url URL, openrlhf/utils/agent.py) posts
 *   {"query": [q...], "prompts": [p...], "labels": [l...]}
 * and reads "rewards" (and "scores", "extra_logs" when present) from the
 * JSON reply. It names no program: the tenant's policy does, in
 * reward.command. The request becomes the /v1/score request it means,
 *   {"command": <reward.command>,
 *    "batch": {"batch_id": <request id>, "items": [{"prompt": p,
 *              "completion": q less the prompt, "query": q, "label": l}]}}
 * and /v1/score's own endpoint checks, admits, runs and books it: the
 * same command checks, the same schema gate on the program's output.
 *
 * Reply: {"rewards": scores, "scores": scores, "sandguard": <the
 * /v1/score result>}. A tenant cause (the reward program crashed, timed
 * out, broke its policy) is HTTP 200 with "rewards": null: OpenRLHF then
 * keeps no reward for the samples, as after a failed reward server, but
 * does not post the same samples four more times. A platform error is
 * 500 and busy is 429/503, which OpenRLHF retries (5 tries, 1 s apart). */
#include <stdlib.h>
#include <string.h>
#include "serve_internal.h"

static const char *const openrlhf_keys[] = { "query", "prompts", "labels", NULL };

struct openrlhf_plan {
	json_t *req; /* the /v1/score request: its plan's argv points into it */
	char *text;  /* its text: the plan's batch points into it */
	void *score; /* /v1/score's plan */
};

/* `key` is an array of n strings (n 0: the first array sets it). */
static int string_array(json_t *body, const char *key, size_t *n, bool strings,
			struct serve_reply *rp)
{
	json_t *v = json_object_get(body, key);
	size_t i;

	if (!json_is_array(v) || !json_array_size(v)) {
		serve_error(rp, 400,
			    "\"%s\" is required: a non-empty array (OpenRLHF sends {\"query\": "
			    "[...], \"prompts\": [...], \"labels\": [...]})",
			    key);
		return -1;
	}
	if (*n && json_array_size(v) != *n) {
		serve_error(rp, 400, "\"%s\" has %zu entries but \"query\" has %zu: one per sample",
			    key, json_array_size(v), *n);
		return -1;
	}
	*n = json_array_size(v);
	for (i = 0; strings && i < *n; i++) {
		if (!json_is_string(json_array_get(v, i))) {
			serve_error(rp, 400, "\"%s\"[%zu] must be a string", key, i);
			return -1;
		}
	}
	return 0;
}

/* OpenRLHF's query is the prompt and the response decoded together; the
 * response alone is what follows the prompt, when it does. */
static json_t *completion_of(json_t *query, json_t *prompt)
{
	size_t ql = json_string_length(query), pl = json_string_length(prompt);
	const char *q = json_string_value(query);

	if (pl <= ql && !memcmp(q, json_string_value(prompt), pl))
		return json_stringn(q + pl, ql - pl);
	return json_incref(query);
}

/* The /v1/score request: the policy's command, a batch of the samples. */
static json_t *score_request(struct serve_call *c, json_t *body, size_t n)
{
	json_t *items = json_array(), *cmd = json_array();
	json_t *q = json_object_get(body, "query"), *p = json_object_get(body, "prompts"),
	       *l = json_object_get(body, "labels");

	for (int i = 0; i < c->policy->n_reward_command; i++)
		json_array_append_new(cmd, json_string(c->policy->reward_command[i]));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			items,
			json_pack("{s:O, s:o, s:O, s:O}", "prompt", json_array_get(p, i),
				  "completion",
				  completion_of(json_array_get(q, i), json_array_get(p, i)),
				  "query", json_array_get(q, i), "label", json_array_get(l, i)));
	return json_pack("{s:o, s:{s:s, s:o}}", "command", cmd, "batch", "batch_id", c->request_id,
			 "items", items);
}

static void openrlhf_free(void *p)
{
	struct openrlhf_plan *plan = p;

	if (!plan)
		return;
	if (plan->score)
		serve_score_endpoint.free_plan(plan->score);
	free(plan->text);
	json_decref(plan->req);
	free(plan);
}

static int openrlhf_prepare(struct serve_call *c, json_t *body, void **out, struct serve_reply *rp)
{
	struct openrlhf_plan *plan = calloc(1, sizeof(*plan));
	struct serve_request rq = *c->rq;
	struct serve_call sc = *c;
	json_t *req;
	size_t n = 0;
	int ret = -1;

	if (!plan) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	if (serve_known_keys(body, openrlhf_keys, rp) ||
	    string_array(body, "query", &n, true, rp) ||
	    string_array(body, "prompts", &n, true, rp) ||
	    string_array(body, "labels", &n, false, rp))
		goto out;
	if (!c->policy->n_reward_command) {
		serve_error(rp, 400,
			    "tenant %s has no reward program: set \"reward\": {\"command\": "
			    "[...]} in its policy (%s)",
			    c->tenant, c->policy->source);
		goto out;
	}
	req = plan->req = score_request(c, body, n);
	plan->text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	if (!plan->text) {
		serve_error(rp, 500, "out of memory");
		goto out;
	}
	/* /v1/score finds the batch's exact text in its request's body. */
	rq.body = plan->text;
	rq.body_len = strlen(plan->text);
	sc.rq = &rq;
	if (serve_score_endpoint.prepare(&sc, req, &plan->score, rp)) {
		const char *why = json_string_value(json_object_get(rp->body, "error"));

		if (why && rp->status == 400)
			serve_error(rp, 400, "tenant %s's reward.command (%s): %s", c->tenant,
				    c->policy->source, why);
		goto out;
	}
	ret = 0;
out:
	if (ret)
		openrlhf_free(plan);
	else
		*out = plan;
	return ret;
}

/* The /v1/score reply in OpenRLHF's shape; refusals ({"error"}) as they are. */
static void to_openrlhf(struct serve_reply *rp)
{
	json_t *res = rp->body, *cause = json_object_get(res, "cause"), *scores, *out;
	bool ok;

	if (!json_is_string(cause))
		return;
	ok = rp->status == 200 && !strcmp(json_string_value(cause), "ok");
	scores = ok ? json_incref(json_object_get(res, "scores")) : json_null();
	out = json_pack("{s:O, s:O, s:O}", "rewards", scores, "scores", scores, "sandguard", res);
	if (out && rp->status != 200)
		json_object_set(out, "error", json_object_get(res, "detail"));
	json_decref(scores);
	if (!out) {
		serve_error(rp, 500, "out of memory");
		return;
	}
	json_decref(rp->body);
	rp->body = out;
}

static void openrlhf_execute(struct serve_call *c, void *p, struct serve_reply *rp)
{
	struct openrlhf_plan *plan = p;

	serve_score_endpoint.execute(c, plan->score, rp);
	to_openrlhf(rp);
}

static void openrlhf_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	serve_score_endpoint.policy_error(c, detail, rp);
	to_openrlhf(rp);
}

const struct serve_endpoint serve_openrlhf_endpoint = {
	.mode = "batch",
	.body_tenant = false,
	.prepare = openrlhf_prepare,
	.execute = openrlhf_execute,
	.policy_error = openrlhf_policy_error,
	.free_plan = openrlhf_free,
};
