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

int exec_run(const struct exec_ctx *ctx, const struct exec_run_request *req,
	     struct exec_run_result *res)
{
	const struct sg_policy *base = ctx->policy;
	uint32_t budget = exec_attempt_budget(base);
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
	for (uint32_t attempt = 1;; attempt++, spec.attempt++) {
		struct exec_box box = { 0 };
		struct sandbox_result r;
		char outcome_id[SG_ID_BUF];
		int rule, rc = exec_box_run(ctx, &box, &spec, &r);
		enum sg_cause cause =
			exec_classify(rc, &r, &spec, &rule, res->detail, sizeof(res->detail));
		/* A confirmation that could not start before its caller's
		 * bound: the first run's timeout stands, never a 504 for the
		 * trainer to retry (the first run was the program's). */
		bool unstarted = spec.confirm && rc == -ETIME;
		if (unstarted) {
			snprintf(res->detail, sizeof(res->detail),
				 "deadline of %llu ms passed; its confirmation run could not start "
				 "before its caller gives up: the timeout stands",
				 (unsigned long long)res->timeout_ms);
			cause = SG_CAUSE_TENANT_TIMEOUT;
			rule = -1;
			rc = 0;
			r.end = SB_TIMEOUT;
		}
		bool due = cause == SG_CAUSE_TENANT_TIMEOUT && exec_confirm_wanted(rc, &r, &spec);
		bool confirm = due && exec_confirm_admit(ctx, &spec, &line, res->detail,
							 sizeof(res->detail));
		/* Too late once is too late for every later attempt. */
		bool again = confirm ||
			     (cause == SG_CAUSE_PLATFORM_ERROR && attempt < budget && rc != -ETIME);
		struct exec_booking b = { .mode = "run",
					  .batch_id = id,
					  .attempt = attempt,
					  .final = !again,
					  .retried = again,
					  .confirm = exec_confirm_state(confirm, due || unstarted,
									&spec),
					  .cause = cause,
					  .rule = rule,
					  .wall_ms = r.wall_ms,
					  .run = &r,
					  .spec = &spec,
					  .invalid = cause == SG_CAUSE_TENANT_BAD_OUTPUT,
					  .detail = res->detail };
		exec_owed_before_booking(&owed, &b, outcome_id, sizeof(outcome_id));
		again = b.retried;
		int err = exec_book(ctx, &b);

		if (err) { /* unbooked: what ran is withheld */
			cause = exec_book_failed(err, cause, res->detail, sizeof(res->detail));
			rule = -1;
			again = false;
			rc = -EIO;
		}
		res->attempts = attempt;
		exec_attempts_add(&res->runs, attempt, -1, spec.confirm, r.sandbox_id, cause);
		if (again) {
			sandbox_result_free(&r);
			exec_box_done(ctx, &box);
			exec_confirm_next(ctx, &spec, b.confirm == SG_CONFIRM_NEXT);
			continue;
		}
		res->cause = cause;
		res->rule = rule;
		if (rc == -ETIME)
			res->refusal = EXEC_REFUSED_LATE;
		res->wall_ms = r.wall_ms;
		if (rc >= 0) {
			res->timed_out = r.end == SB_TIMEOUT;
			res->has_return_code = r.end == SB_EXITED;
			res->return_code = r.end == SB_EXITED ? r.exit_code : 0;
			res->signal = r.end == SB_SIGNALED ? r.signal : 0;
			take_output(res, &r);
		}
		sandbox_result_free(&r);
		exec_box_done(ctx, &box);
		break;
	}
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
