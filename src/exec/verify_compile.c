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

/* The compile's own part of its attempts (exec_attempt()). */
struct compile_attempts {
	const struct exec_build *bd;
	struct exec_result *res;
	struct sandbox_file *program;
	uint32_t budget;
	/* the attempt's */
	enum sg_cause ran; /* the run's own cause, before the program is looked at */
	char booked[EXEC_DETAIL_MAX + 16];
	int verdict; /* verify_compile()'s */
};

static void compile_judge(void *self, struct exec_try *t)
{
	struct compile_attempts *ca = self;

	t->cause = exec_classify(t->rc, &t->r, t->spec, &t->rule, t->detail, sizeof(t->detail));
	ca->ran = t->cause;
	if (t->cause == SG_CAUSE_OK)
		t->cause = built(&t->r, t->spec, t->detail, sizeof(t->detail));
}

/* Only the run's own platform error is retried: a compiler that exited 0
 * said it was done, whatever it left. */
static bool compile_again(void *self, struct exec_try *t)
{
	struct compile_attempts *ca = self;

	return t->confirm || (ca->ran == SG_CAUSE_PLATFORM_ERROR && t->attempt < ca->budget);
}

static void compile_book(void *self, const struct exec_try *t, struct exec_booking *b)
{
	struct compile_attempts *ca = self;

	snprintf(ca->booked, sizeof(ca->booked), "compile%s%s", t->detail[0] ? ": " : "",
		 t->detail);
	b->detail = ca->booked;
}

static void compile_take(void *self, struct exec_try *t)
{
	struct compile_attempts *ca = self;
	const struct exec_build *bd = ca->bd;
	struct sandbox_result *r = &t->r;

	ca->res->attempts++;
	if (t->again)
		return;
	note_end(ca->res->compile, t->cause, r, t->rc, t->attempt);
	if (t->cause == SG_CAUSE_OK) {
		*ca->program = (struct sandbox_file){ .path = bd->artifact,
						      .data = r->fetched[0].data,
						      .len = r->fetched[0].len,
						      .mode = bd->artifact_mode };
		ca->res->compile->program_bytes = r->fetched[0].len;
		r->fetched[0].data = NULL;
		ca->verdict = 0;
	} else {
		take_message(ca->res, r);
		decide(ca->res, t->cause, t->detail);
	}
}

static const struct exec_mode_ops compile_ops = {
	.judge = compile_judge, .again = compile_again, .book = compile_book, .take = compile_take
};

int verify_compile(const struct exec_ctx *ctx, const char *batch_id, struct sandbox_file *program,
		   struct exec_result *res, struct journal_group *group)
{
	const struct exec_build *bd = ctx->build;
	const char *fetch[] = { bd->artifact };
	struct node_cpu_commit line = { .fd = -1 };
	struct compile_attempts ca = { .bd = bd,
				       .res = res,
				       .program = program,
				       .budget = exec_attempt_budget(ctx->policy),
				       .verdict = 1 };
	struct sb_run_record owed;
	struct sandbox_spec spec;

	if (!bd->compile) /* interpreted: its source is the program */
		return source_program(bd, program);
	res->compile = calloc(1, sizeof(*res->compile));
	if (!res->compile)
		return -ENOMEM;
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
	exec_attempt(&(struct exec_attempt_plan){ .ctx = ctx,
						  .spec = &spec,
						  .batch_id = batch_id,
						  .line = &line,
						  .runs = &res->runs,
						  .group = group,
						  .ops = &compile_ops,
						  .self = &ca });
	exec_owed_done(&owed);
	node_cpu_release(&line);
	return ca.verdict;
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
