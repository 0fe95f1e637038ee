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
 * exit (a batch that fails it is tenant_bad_output, booked invalid). On
 * ok, *scores holds the batch's scores. */
static enum sg_cause judge(int rc, const struct sandbox_result *r, const struct sandbox_spec *spec,
			   size_t n_items, double **scores, int *rule, char *detail,
			   size_t detail_len)
{
	enum sg_cause cause = exec_classify(rc, r, spec, rule, detail, detail_len);
	int ret;

	*scores = NULL;
	if (cause != SG_CAUSE_OK)
		return cause;
	if (r->out_truncated) { /* a sandbox that flags it without SB_OUTPUT_OVERSIZE */
		snprintf(detail, detail_len, "oversized: stdout exceeded the cap of %llu bytes",
			 (unsigned long long)spec->policy->limits.output_bytes);
		return SG_CAUSE_TENANT_BAD_OUTPUT;
	}
	ret = scores_parse(r->out ? r->out : "", r->out ? r->out_len : 0, n_items, scores, detail,
			   detail_len);
	if (ret == -EBADMSG)
		return SG_CAUSE_TENANT_BAD_OUTPUT;
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

/* A batch's own part of its attempts (exec_attempt()): the schema gate,
 * the canaries, the failure mode's retries, a revoked artifact, and the
 * result it keeps. */
struct batch_attempts {
	const struct exec_ctx *ctx;
	const struct exec_batch *batch;
	struct exec_result *res;
	struct canary_batch *canary;
	struct artifact_run *art;
	uint32_t budget;
	/* the attempt's */
	double *scores; /* ok only */
	struct score_stats st;
	int revoked; /* exec_artifacts_revoked()'s, when asked */
};

static void batch_judge(void *self, struct exec_try *t)
{
	struct batch_attempts *ba = self;
	struct canary_batch *canary = ba->canary;
	int cerr;

	exec_box_over(ba->ctx, t->box); /* every attempt a fresh sandbox */
	ba->st = (struct score_stats){ 0 };
	t->cause = judge(t->rc, &t->r, t->spec,
			 canary->on ? canary->mix.n_total : ba->batch->n_items, &ba->scores,
			 &t->rule, t->detail, sizeof(t->detail));
	/* The probes come out before anything else sees the scores. */
	if (t->cause == SG_CAUSE_OK &&
	    (cerr = canary_batch_scores(ba->ctx, canary, t->spec, &ba->scores))) {
		free(ba->scores);
		ba->scores = NULL;
		snprintf(t->detail, sizeof(t->detail),
			 "platform error: separating the canaries: %s", strerror(-cerr));
		t->cause = SG_CAUSE_PLATFORM_ERROR;
	}
	if (t->cause == SG_CAUSE_OK)
		scores_stats(ba->scores, ba->batch->n_items, &ba->st);
}

static bool batch_again(void *self, struct exec_try *t)
{
	struct batch_attempts *ba = self;
	bool again = t->confirm || (t->attempt < ba->budget &&
				    exec_retryable(ba->ctx->policy->failure, t->cause));

	/* A pinned artifact revoked since it was checked runs no more, not
	 * even a confirmation: this attempt is the final. */
	ba->revoked = again ? exec_artifacts_revoked(ba->ctx, ba->art, t->detail, sizeof(t->detail))
			    : 0;
	return again && !ba->revoked;
}

static void batch_book(void *self, const struct exec_try *t, struct exec_booking *b)
{
	struct batch_attempts *ba = self;
	struct canary_batch *canary = ba->canary;

	b->stats = t->cause == SG_CAUSE_OK ? &ba->st : NULL;
	b->canary = canary->on || canary->rep.detail[0] ? &canary->rep : NULL;
	b->artifact_refused = ba->revoked == -EPERM ? t->detail : NULL;
}

static void batch_take(void *self, struct exec_try *t)
{
	struct batch_attempts *ba = self;
	struct exec_result *res = ba->res;

	if (t->unbooked) { /* no scores of an unbooked attempt leave */
		free(ba->scores);
		ba->scores = NULL;
	}
	if (t->cause != SG_CAUSE_OK)
		sg_debug("exec: %s/%s attempt %u: %s: %s", ba->ctx->tenant, ba->batch->batch_id,
			 t->attempt, cause_name(t->cause), t->detail);
	snprintf(res->warm_fallback, sizeof(res->warm_fallback), "%s", t->r.warm_fallback);
	/* The result keeps the last attempt's stderr. */
	free(res->err);
	res->err = t->r.err;
	res->err_len = t->r.err ? t->r.err_len : 0;
	t->r.err = NULL;
	res->attempts = t->attempt;
	if (t->again) {
		free(ba->scores);
		ba->scores = NULL;
		return;
	}
	res->cause = t->cause;
	res->rule = t->rule;
	snprintf(res->detail, sizeof(res->detail), "%s", t->detail);
	res->scores = ba->scores;
	res->n_scores = t->cause == SG_CAUSE_OK ? ba->batch->n_items : 0;
	res->stats = ba->st;
}

static const struct exec_mode_ops batch_ops = {
	.judge = batch_judge, .again = batch_again, .book = batch_book, .take = batch_take
};

int exec_batch(const struct exec_ctx *ctx, const struct exec_batch *batch, struct exec_result *res)
{
	const struct sg_policy *p = ctx->policy;
	uint64_t start = clock_ms(CLOCK_MONOTONIC), timeout = exec_timeout_ms(ctx);
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
	exec_attempt(&(struct exec_attempt_plan){
		.ctx = ctx,
		.spec = &spec,
		.batch_id = batch->batch_id,
		.line = &line,
		.runs = &res->runs,
		.bad_output_invalid = true,
		.ops = &batch_ops,
		.self = &(struct batch_attempts){ .ctx = ctx,
						  .batch = batch,
						  .res = res,
						  .canary = &canary,
						  .art = &art,
						  .budget = exec_attempt_budget(p) },
	});
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
