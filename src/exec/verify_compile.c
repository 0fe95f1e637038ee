/* The compile of a verifier request in a compiled language: see
 * verify_compile.h for what it means to the request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exec_internal.h"
#include "lib/json_text.h"
#include "node/node_cpu.h"
#include "verify_compile.h"

#define MESSAGE_IN_DETAIL 300 /* bytes of the compiler's message in the detail */

/* The compiler's message: its stderr, or its stdout when it wrote none
 * there (javac through ToolProvider may write either). */
static void take_message(struct exec_result *res, struct sandbox_result *r)
{
	char **text = r->err && r->err_len ? &r->err : &r->out;
	size_t len = r->err && r->err_len ? r->err_len : r->out_len;

	if (!*text || !len)
		return;
	free(res->err);
	res->err = *text;
	res->err_len = len;
	*text = NULL;
}

/* The request's verdict once the compile failed: the program's fault is
 * a reward of 0 with the compiler's message, ours a platform error. */
static void decide(struct exec_result *res, enum sg_cause cause, const char *detail)
{
	int n;

	if (cause == SG_CAUSE_PLATFORM_ERROR) {
		res->cause = SG_CAUSE_PLATFORM_ERROR;
		res->reward = -1;
		snprintf(res->detail, sizeof(res->detail), "compile: %s", detail);
		return;
	}
	res->cause = SG_CAUSE_OK;
	res->reward = 0;
	n = snprintf(res->detail, sizeof(res->detail), "compile error: %s", detail);
	if (res->err && n > 0 && (size_t)n < sizeof(res->detail) - 4)
		snprintf(res->detail + n, sizeof(res->detail) - (size_t)n, ": %.*s",
			 (int)(res->err_len < MESSAGE_IN_DETAIL ? res->err_len : MESSAGE_IN_DETAIL),
			 res->err);
}

/* A compile that exited 0: its program, whole, or why there is none. */
static enum sg_cause built(const struct sandbox_result *r, const struct sandbox_spec *spec,
			   char *detail, size_t len)
{
	if (r->n_fetched == 1 && r->fetched[0].data && !r->fetched[0].truncated)
		return SG_CAUSE_OK;
	if (r->n_fetched == 1 && r->fetched[0].truncated) {
		snprintf(detail, len,
			 "the compiled program is larger than the policy's output cap of %llu "
			 "bytes (output_bytes)",
			 (unsigned long long)spec->policy->limits.output_bytes);
		return SG_CAUSE_TENANT_BAD_OUTPUT;
	}
	snprintf(detail, len, "platform error: the compiler exited 0 but left no program");
	return SG_CAUSE_PLATFORM_ERROR;
}

static void note_end(struct verify_compile_result *cr, enum sg_cause cause,
		     const struct sandbox_result *r, int rc, uint32_t attempts)
{
	cr->cause = cause;
	cr->attempts = attempts;
	cr->wall_ms = r->wall_ms;
	cr->timed_out = rc >= 0 && r->end == SB_TIMEOUT;
	cr->has_return_code = rc >= 0 && r->end == SB_EXITED;
	cr->return_code = cr->has_return_code ? r->exit_code : 0;
}

static int source_program(const struct exec_build *bd, struct sandbox_file *program)
{
	void *copy = malloc(bd->files[0].len + 1);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, bd->files[0].data, bd->files[0].len);
	*program = bd->files[0];
	program->data = copy;
	program->mode = bd->artifact_mode;
	return 0;
}

int verify_compile(const struct exec_ctx *ctx, const char *batch_id, struct sandbox_file *program,
		   struct exec_result *res)
{
	const struct exec_build *bd = ctx->build;
	const char *fetch[] = { bd->artifact };
	uint32_t budget = exec_attempt_budget(ctx->policy);
	struct node_cpu_commit line = { .fd = -1 };
	struct verify_compile_result *cr;
	struct sb_run_record owed;
	struct sandbox_spec spec;
	int verdict = 1;

	if (!bd->compile) /* interpreted: its source is the program */
		return source_program(bd, program);
	cr = calloc(1, sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	res->compile = cr;
	exec_spec_init(ctx, ctx->policy, "verify", batch_id,
		       bd->timeout_ms ? bd->timeout_ms : exec_timeout_ms(ctx), &spec);
	spec.argv = bd->compile;
	spec.files = bd->files;
	spec.n_files = bd->n_files;
	spec.fetch = fetch;
	spec.n_fetch = 1;
	spec.cold = true;
	exec_owed_init(&owed, ctx, "verify", batch_id, false);
	spec.record = &owed;
	for (uint32_t attempt = 1;; attempt++, spec.attempt++) {
		struct exec_box box = { 0 };
		struct sandbox_result r;
		char detail[EXEC_DETAIL_MAX], booked[EXEC_DETAIL_MAX + 16], id[SG_ID_BUF];
		int rule, rc = exec_box_run(ctx, &box, &spec, &r);
		enum sg_cause cause = exec_classify(rc, &r, &spec, &rule, detail, sizeof(detail));
		bool due = cause == SG_CAUSE_TENANT_TIMEOUT && exec_confirm_wanted(rc, &r, &spec);
		bool confirm = due && exec_confirm_admit(ctx, &spec, &line, detail, sizeof(detail));
		bool again = confirm || (cause == SG_CAUSE_PLATFORM_ERROR && attempt < budget);

		if (cause == SG_CAUSE_OK)
			cause = built(&r, &spec, detail, sizeof(detail));
		snprintf(booked, sizeof(booked), "compile%s%s", detail[0] ? ": " : "", detail);
		struct exec_booking b = { .mode = "verify",
					  .batch_id = batch_id,
					  .attempt = attempt,
					  .retried = again,
					  .confirm = exec_confirm_state(confirm, due, &spec),
					  .cause = cause,
					  .rule = rule,
					  .wall_ms = r.wall_ms,
					  .run = &r,
					  .spec = &spec,
					  .detail = booked };
		exec_owed_before_booking(&owed, &b, id, sizeof(id));
		int err = exec_book(ctx, &b);
		if (err) { /* unbooked: the compile has no verdict */
			cause = exec_book_failed(err, cause, detail, sizeof(detail));
			again = false;
		}
		res->attempts++;
		exec_attempts_add(&res->runs, attempt, -1, spec.confirm, r.sandbox_id, cause);
		if (again) {
			sandbox_result_free(&r);
			exec_box_done(ctx, &box);
			exec_confirm_next(ctx, &spec, b.confirm == SG_CONFIRM_NEXT);
			continue;
		}
		note_end(cr, cause, &r, rc, attempt);
		if (cause == SG_CAUSE_OK) {
			*program = (struct sandbox_file){ .path = bd->artifact,
							  .data = r.fetched[0].data,
							  .len = r.fetched[0].len,
							  .mode = bd->artifact_mode };
			cr->program_bytes = r.fetched[0].len;
			r.fetched[0].data = NULL;
			verdict = 0;
		} else {
			take_message(res, &r);
			decide(res, cause, detail);
		}
		sandbox_result_free(&r);
		exec_box_done(ctx, &box);
		break;
	}
	exec_owed_done(&owed);
	node_cpu_release(&line);
	return verdict;
}

json_t *verify_compile_json(const struct verify_compile_result *c)
{
	const char *status = c->cause == SG_CAUSE_OK               ? "ok"
			     : c->cause == SG_CAUSE_PLATFORM_ERROR ? "platform_error"
			     : c->timed_out                        ? "timeout"
								   : "error";

	return json_pack("{s:s, s:o, s:I, s:i, s:I}", "status", status, "return_code",
			 c->has_return_code ? json_integer(c->return_code) : json_null(), "wall_ms",
			 (json_int_t)c->wall_ms, "attempts", (int)c->attempts, "program_bytes",
			 (json_int_t)c->program_bytes);
}
