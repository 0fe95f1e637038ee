/* Batch mode: the tenant's reward program scores a batch. Attempts, the
 * schema gate, retry / skip / pause, booking and the result object (the
 * rules are in src/exec/exec.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "artifact.h"
#include "lib/clock.h"
#include "canary_run.h"
#include "exec_internal.h"
#include "lib/json_text.h"
#include "lib/log.h"
#include "lib/rule_names.h"
#include "verify_compile.h"

int exec_exit_code(enum sg_cause cause)
{
	switch (cause) {
	case SG_CAUSE_OK:
		return 0;
	case SG_CAUSE_PLATFORM_ERROR:
		return 2;
	default:
		return 1;
	}
}

/* One attempt's verdict: the run's cause, then the schema gate on a clean
 * exit. On ok, *scores holds the batch's scores. */
static enum sg_cause judge(int rc, const struct sandbox_result *r, const struct sandbox_spec *spec,
			   size_t n_items, double **scores, int *rule, bool *invalid, char *detail,
			   size_t detail_len)
{
	enum sg_cause cause = exec_classify(rc, r, spec, rule, detail, detail_len);
	int ret;

	*scores = NULL;
	*invalid = cause == SG_CAUSE_TENANT_BAD_OUTPUT;
	if (cause != SG_CAUSE_OK)
		return cause;
	if (r->out_truncated) { /* a sandbox that flags it without SB_OUTPUT_OVERSIZE */
		snprintf(detail, detail_len, "oversized: stdout exceeded the cap of %llu bytes",
			 (unsigned long long)spec->policy->limits.output_bytes);
		*invalid = true;
		return SG_CAUSE_TENANT_BAD_OUTPUT;
	}
	ret = scores_parse(r->out ? r->out : "", r->out ? r->out_len : 0, n_items, scores, detail,
			   detail_len);
	if (ret == -EBADMSG) {
		*invalid = true;
		return SG_CAUSE_TENANT_BAD_OUTPUT;
	}
	if (ret) {
		snprintf(detail, detail_len, "platform error: validating the scores: %s",
			 strerror(-ret));
		return SG_CAUSE_PLATFORM_ERROR;
	}
	return SG_CAUSE_OK;
}

/* The pause policy: a final tenant cause pauses the tenant. */
static void pause_tenant(const struct exec_ctx *ctx, const char *batch_id, struct exec_result *res)
{
	char reason[EXEC_DETAIL_MAX + 160];
	int ret;

	snprintf(reason, sizeof(reason), "batch %s: %s: %s", batch_id, cause_name(res->cause),
		 res->detail);
	ret = tenant_pause(ctx->tenant, reason);
	if (ret) {
		sg_error("exec: cannot pause tenant %s: %s", ctx->tenant, strerror(-ret));
		detail_append(res->detail, sizeof(res->detail), "; pausing the tenant failed: %s",
			      strerror(-ret));
		return;
	}
	res->paused_tenant = true;
	detail_append(res->detail, sizeof(res->detail),
		      "; tenant %s paused until 'sandguard tenant resume %s'", ctx->tenant,
		      ctx->tenant);
}

int exec_batch(const struct exec_ctx *ctx, const struct exec_batch *batch, struct exec_result *res)
{
	const struct sg_policy *p = ctx->policy;
	uint64_t start = clock_ms(CLOCK_MONOTONIC), timeout = exec_timeout_ms(ctx);
	uint32_t budget = exec_attempt_budget(p);
	struct sb_run_record owed;
	struct node_cpu_commit line = { .fd = -1 }; /* a confirmation run's */
	struct tenant_slot slot;
	struct sandbox_spec spec;
	struct canary_batch canary;
	struct artifact_run art;

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	res->reward = -1;
	res->path = ctx->path;
	snprintf(res->batch_id, sizeof(res->batch_id), "%s", batch->batch_id);
	snprintf(res->run_id, sizeof(res->run_id), "%s", ctx->run_id ? ctx->run_id : "");
	res->cause = exec_admit(ctx, &slot, &res->refusal, res->detail, sizeof(res->detail));
	if (res->cause != SG_CAUSE_OK) {
		res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start;
		res->cause = exec_book_refusal(ctx, "batch", batch->batch_id, res->cause,
					       res->wall_ms, res->detail, sizeof(res->detail));
		return 0;
	}

	if (exec_artifacts_refused(ctx, batch->batch_id, &art, &slot, start, res))
		return 0;
	exec_spec_init(ctx, p, "batch", batch->batch_id, timeout, &spec);
	exec_artifacts_apply(&art, &spec);
	/* With canaries, the tenant's code reads the mixed document, and
	 * every attempt the same one. */
	canary_batch_start(ctx, batch, &canary);
	spec.stdin_data = canary.on ? canary.mix.json : batch->json;
	spec.stdin_len = canary.on ? canary.mix.json_len : batch->json_len;
	exec_owed_init(&owed, ctx, "batch", batch->batch_id, true);
	spec.record = &owed;
	/* Each attempt takes a fresh sandbox and retires it after its run:
	 * one prepared on the spot is never reset (a pool's are left as they
	 * were: the pool may recycle them). */
	spec.one_run = !ctx->sandboxes || ctx->sandboxes->stop_after_run;
	for (uint32_t attempt = 1;; attempt++, spec.attempt++) {
		struct exec_box box = { 0 };
		struct sandbox_result r;
		struct score_stats st = { 0 };
		char detail[EXEC_DETAIL_MAX], id[SG_ID_BUF];
		double *scores;
		bool invalid, again, due, confirm;
		int rule, rc, cerr, revoked = 0;

		rc = exec_box_run(ctx, &box, &spec, &r);
		exec_box_over(ctx, &box); /* every attempt a fresh sandbox */
		enum sg_cause cause = judge(rc, &r, &spec,
					    canary.on ? canary.mix.n_total : batch->n_items,
					    &scores, &rule, &invalid, detail, sizeof(detail));
		/* The probes come out before anything else sees the scores. */
		if (cause == SG_CAUSE_OK &&
		    (cerr = canary_batch_scores(ctx, &canary, &spec, &scores))) {
			free(scores);
			scores = NULL;
			snprintf(detail, sizeof(detail),
				 "platform error: separating the canaries: %s", strerror(-cerr));
			cause = SG_CAUSE_PLATFORM_ERROR;
		}
		if (cause == SG_CAUSE_OK)
			scores_stats(scores, batch->n_items, &st);
		/* A confirmation comes whatever the failure mode: a tenant that
		 * pauses or skips at its first fault is not judged on a run the
		 * node starved. */
		due = cause == SG_CAUSE_TENANT_TIMEOUT && exec_confirm_wanted(rc, &r, &spec);
		confirm = due && exec_confirm_admit(ctx, &spec, &line, detail, sizeof(detail));
		again = confirm || (attempt < budget && exec_retryable(p->failure, cause));
		if (again)
			revoked = exec_artifacts_revoked(ctx, &art, detail, sizeof(detail));
		again = again && !revoked;
		struct exec_booking b = { .mode = "batch",
					  .batch_id = batch->batch_id,
					  .attempt = attempt,
					  .final = !again,
					  .retried = again,
					  .confirm = exec_confirm_state(confirm, due, &spec),
					  .cause = cause,
					  .rule = rule,
					  .wall_ms = r.wall_ms,
					  .run = &r,
					  .spec = &spec,
					  .stats = cause == SG_CAUSE_OK ? &st : NULL,
					  .invalid = invalid,
					  .detail = detail,
					  .canary = canary.on || canary.rep.detail[0] ? &canary.rep
										      : NULL,
					  .artifact_refused = revoked == -EPERM ? detail : NULL };
		exec_owed_before_booking(&owed, &b, id, sizeof(id));
		again = b.retried;
		int err = exec_book(ctx, &b);
		if (err) { /* unbooked: what ran is withheld, and nothing runs again */
			cause = exec_book_failed(err, cause, detail, sizeof(detail));
			rule = -1;
			again = false;
			free(scores);
			scores = NULL;
		}
		if (cause != SG_CAUSE_OK)
			sg_debug("exec: %s/%s attempt %u: %s: %s", ctx->tenant, batch->batch_id,
				 attempt, cause_name(cause), detail);

		exec_attempts_add(&res->runs, attempt, -1, spec.confirm, r.sandbox_id, cause);
		snprintf(res->warm_fallback, sizeof(res->warm_fallback), "%s", r.warm_fallback);
		/* The result keeps the last attempt's stderr. */
		free(res->err);
		res->err = r.err;
		res->err_len = r.err ? r.err_len : 0;
		r.err = NULL;
		sandbox_result_free(&r);
		exec_box_done(ctx, &box); /* every attempt a fresh sandbox */
		res->attempts = attempt;
		if (again) {
			free(scores);
			exec_confirm_next(ctx, &spec, b.confirm == SG_CONFIRM_NEXT);
			continue;
		}
		res->cause = cause;
		res->rule = rule;
		snprintf(res->detail, sizeof(res->detail), "%s", detail);
		res->scores = scores;
		res->n_scores = cause == SG_CAUSE_OK ? batch->n_items : 0;
		res->stats = st;
		break;
	}
	exec_owed_done(&owed);
	/* What the tenant's code wrote to stderr could repeat the items it
	 * read, probes and all: with canaries, an ok batch's result carries
	 * none (docs/sandbox.md, "Canaries: threat model"). */
	if (canary.on && res->cause == SG_CAUSE_OK) {
		free(res->err);
		res->err = NULL;
		res->err_len = 0;
	}
	canary_batch_end(&canary);
	artifact_run_free(&art);
	node_cpu_release(&line);
	tenant_slot_release(&slot);
	if (p->failure == SG_FAILURE_PAUSE && cause_class(res->cause) == SG_CLASS_TENANT_CODE)
		pause_tenant(ctx, batch->batch_id, res);
	res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start;
	return 0;
}

void exec_result_free(struct exec_result *res)
{
	free(res->scores);
	free(res->err);
	free(res->tests);
	free(res->compile);
	exec_attempts_free(&res->runs);
	memset(res, 0, sizeof(*res));
}

static json_t *tests_json(const struct exec_result *res)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < res->n_tests; i++) {
		const struct verify_result *t = &res->tests[i];
		json_t *o = json_pack("{s:s, s:I, s:o, s:s}", "status",
				      verify_status_name(t->status), "wall_ms",
				      (json_int_t)t->wall_ms, "detail",
				      t->detail[0] ? json_string_lossy(t->detail, strlen(t->detail))
						   : json_null(),
				      "interpreter", t->warm ? "warm" : "cold");

		/* Its verdict came from a timeout's confirmation run, which
		 * runs cold whatever the policy (exec_confirm.c). */
		if (o && t->confirmed)
			json_object_set_new(o, "confirmed", json_true());
		json_array_append_new(a, o);
	}
	return a;
}

json_t *exec_result_json(const char *tenant, const struct exec_result *res)
{
	bool ok = res->cause == SG_CAUSE_OK;
	json_t *j = json_object(), *scores = json_null();

	if (!j)
		return NULL;
	if (res->scores) {
		json_decref(scores);
		scores = json_array();
		for (size_t i = 0; i < res->n_scores; i++)
			json_array_append_new(scores, json_real(res->scores[i]));
	}
	json_object_set_new(j, "tenant", json_string_lossy(tenant, strlen(tenant)));
	json_object_set_new(j, "run_id",
			    res->run_id[0] ? json_string_lossy(res->run_id, strlen(res->run_id))
					   : json_null());
	json_object_set_new(j, "batch_id",
			    res->batch_id[0]
				    ? json_string_lossy(res->batch_id, strlen(res->batch_id))
				    : json_null());
	json_object_set_new(j, "status", json_string(ok ? "ok" : "failed"));
	json_object_set_new(j, "cause", json_string(cause_name(res->cause)));
	json_object_set_new(j, "rule",
			    res->rule >= 0 && res->rule < SG_RULE__COUNT
				    ? json_string(rule_name(res->rule))
				    : json_null());
	json_object_set_new(j, "scores", scores);
	json_object_set_new(j, "detail",
			    res->detail[0] ? json_string_lossy(res->detail, strlen(res->detail))
					   : json_null());
	if (res->warm_fallback[0])
		json_object_set_new(j, "warm_fallback",
				    json_string_lossy(res->warm_fallback,
						      strlen(res->warm_fallback)));
	json_object_set_new(j, "attempts", json_integer(res->attempts));
	json_object_set_new(j, "sandboxes", exec_attempts_json(&res->runs));
	json_object_set_new(j, "wall_ms", json_integer((json_int_t)res->wall_ms));
	if (res->scores)
		json_object_set_new(j, "stats",
				    json_pack("{s:o, s:o, s:b}", "mean",
					      json_real_or_null(res->stats.mean), "variance",
					      json_real_or_null(res->stats.variance), "constant",
					      res->stats.constant));
	if (res->verify) {
		if (res->compile)
			json_object_set_new(j, "compile", verify_compile_json(res->compile));
		json_object_set_new(j, "tests", tests_json(res));
		json_object_set_new(j, "reward",
				    res->reward >= 0 ? json_integer(res->reward) : json_null());
	}
	json_object_set_new(j, "stderr",
			    res->err ? json_excerpt(res->err, res->err_len, EXEC_STDERR_EXCERPT)
				     : json_null());
	if (res->path)
		json_object_set_new(j, "path", json_string(res->path));
	return j;
}
