/* Run once: one program run with raw stdout/stderr back, for the HTTP
 * server's /run_code. The caller turns a language into argv and files;
 * this layer applies the same admission, limits and booking as a batch.
 * Per-request limits can only tighten the tenant's policy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exec_internal.h"
#include "lib/clock.h"
#include "lib/log.h"

static void take_output(struct exec_run_result *res, struct sandbox_result *r)
{
	res->out = r->out;
	res->out_len = r->out ? r->out_len : 0;
	res->out_truncated = r->out_truncated;
	res->err = r->err;
	res->err_len = r->err ? r->err_len : 0;
	res->err_truncated = r->err_truncated;
	res->fetched = r->fetched;
	res->n_fetched = r->fetched ? r->n_fetched : 0;
	r->out = r->err = NULL;
	r->fetched = NULL;
	r->n_fetched = 0;
}

/* A run-once request's own part of its attempts (exec_attempt()). */
struct run_attempts {
	struct exec_run_result *res;
	uint32_t budget;
};

static void run_judge(void *self, struct exec_try *t)
{
	struct run_attempts *ra = self;

	t->cause = exec_classify(t->rc, &t->r, t->spec, &t->rule, t->detail, sizeof(t->detail));
	/* A confirmation that could not start before its caller's bound:
	 * the first run's timeout stands, never a 504 for the trainer to
	 * retry (the first run was the program's). */
	if (t->spec->confirm && t->rc == -ETIME) {
		snprintf(t->detail, sizeof(t->detail),
			 "deadline of %llu ms passed; its confirmation run could not start "
			 "before its caller gives up: the timeout stands",
			 (unsigned long long)ra->res->timeout_ms);
		t->cause = SG_CAUSE_TENANT_TIMEOUT;
		t->rule = -1;
		t->rc = 0;
		t->r.end = SB_TIMEOUT;
		t->unadmitted = true;
	}
}

static bool run_again(void *self, struct exec_try *t)
{
	struct run_attempts *ra = self;

	/* Only a platform error is retried; too late once is too late for
	 * every later attempt. */
	return t->confirm ||
	       (t->cause == SG_CAUSE_PLATFORM_ERROR && t->attempt < ra->budget && t->rc != -ETIME);
}

static void run_take(void *self, struct exec_try *t)
{
	struct exec_run_result *res = ((struct run_attempts *)self)->res;
	struct sandbox_result *r = &t->r;

	res->attempts = t->attempt;
	if (t->again)
		return;
	res->cause = t->cause;
	res->rule = t->rule;
	snprintf(res->detail, sizeof(res->detail), "%s", t->detail);
	res->wall_ms = r->wall_ms;
	if (t->unbooked) /* what ran is withheld */
		return;
	if (t->rc == -ETIME)
		res->refusal = EXEC_REFUSED_LATE;
	if (t->rc >= 0) {
		res->timed_out = r->end == SB_TIMEOUT;
		res->has_return_code = r->end == SB_EXITED;
		res->return_code = r->end == SB_EXITED ? r->exit_code : 0;
		res->signal = r->end == SB_SIGNALED ? r->signal : 0;
		take_output(res, r);
	}
}

static const struct exec_mode_ops run_ops = { .judge = run_judge,
					      .again = run_again,
					      .take = run_take };

int exec_run(const struct exec_ctx *ctx, const struct exec_run_request *req,
	     struct exec_run_result *res)
{
	const struct sg_policy *base = ctx->policy;
	const char *id = req->request_id ? req->request_id : "";
	struct sb_run_record owed;
	struct node_cpu_commit line = { .fd = -1 }; /* a confirmation run's */
	struct sg_policy *policy;
	struct tenant_slot slot;
	struct sandbox_spec spec;

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	res->path = ctx->path;
	res->timeout_ms = exec_timeout_ms(ctx);
	res->memory_mb = req->memory_mb && req->memory_mb < base->limits.memory_mb
				 ? req->memory_mb
				 : base->limits.memory_mb;
	res->cause = exec_admit(ctx, &slot, &res->refusal, res->detail, sizeof(res->detail));
	if (res->cause == SG_CAUSE_OK && ctx->start_by_ms &&
	    clock_ms(CLOCK_MONOTONIC) >= ctx->start_by_ms) {
		tenant_slot_release(&slot);
		res->cause = SG_CAUSE_PLATFORM_ERROR;
		res->refusal = EXEC_REFUSED_LATE;
		snprintf(
			res->detail, sizeof(res->detail),
			"platform error: admitted too late to start by the time its caller gave it");
	}
	if (res->cause != SG_CAUSE_OK) {
		res->cause = exec_book_refusal(ctx, "run", id, res->cause, 0, res->detail,
					       sizeof(res->detail));
		return 0;
	}
	/* A private copy carries the request's memory limit to the sandbox. */
	policy = malloc(sizeof(*policy));
	if (!policy) {
		tenant_slot_release(&slot);
		return -ENOMEM;
	}
	memcpy(policy, base, sizeof(*policy));
	policy->limits.memory_mb = res->memory_mb;

	exec_spec_init(ctx, policy, "run", req->request_id, res->timeout_ms, &spec);
	spec.stdin_data = req->stdin_data;
	spec.stdin_len = req->stdin_len;
	spec.files = req->files;
	spec.n_files = req->n_files;
	spec.fetch = req->fetch;
	spec.n_fetch = req->n_fetch;
	spec.allow_exec_in_scratch = req->allow_exec_in_scratch;
	exec_owed_init(&owed, ctx, "run", id, true);
	spec.record = &owed;
	exec_attempt(&(struct exec_attempt_plan){
		.ctx = ctx,
		.spec = &spec,
		.batch_id = id,
		.line = &line,
		.runs = &res->runs,
		.bad_output_invalid = true,
		.ops = &run_ops,
		.self = &(struct run_attempts){ .res = res, .budget = exec_attempt_budget(base) },
	});
	exec_owed_done(&owed);
	node_cpu_release(&line);
	free(policy);
	tenant_slot_release(&slot);
	return 0;
}

void exec_run_result_free(struct exec_run_result *res)
{
	struct sandbox_result r = {
		.out = res->out,
		.err = res->err,
		.fetched = res->fetched,
		.n_fetched = res->n_fetched,
	};

	/* The buffers came from the sandbox: its free knows their layout. */
	sandbox_result_free(&r);
	exec_attempts_free(&res->runs);
	memset(res, 0, sizeof(*res));
}
