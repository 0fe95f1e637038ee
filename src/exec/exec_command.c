/* `sandguard exec`'s body (see src/exec/exec_command.h). Prints exactly
 * one JSON result object, except for the caller's errors, which get a
 * message and exit 64. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/agent_client.h"
#include "exec_command.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "verify_judge.h"

static bool id_valid(const char *id)
{
	return !id || (*id && strlen(id) <= EXEC_ID_MAX);
}

bool exec_request_check(const struct exec_request *r)
{
	bool tests = r->tests_path != NULL;

	return r->tenant && tenant_name_valid(r->tenant) && !r->batch_path != !r->tests_path &&
	       id_valid(r->run_id) && id_valid(r->batch_id) && (tests || !r->batch_id) &&
	       (tests || !r->grader_set) && r->grader <= SG_GRADER_LCB &&
	       !r->language == !r->code_path && (tests || !r->language) &&
	       (r->language ? !r->argv : r->argv && r->argv[0]);
}

bool exec_request_reads_stdin(const struct exec_request *r)
{
	const char *in = r->batch_path ? r->batch_path : r->tests_path;

	return (in && !strcmp(in, "-")) || (r->code_path && !strcmp(r->code_path, "-"));
}

int exec_usage_error(FILE *f, const char *fmt, ...)
{
	va_list ap;

	fprintf(f, "sandguard exec: ");
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fprintf(f, "\n(see 'sandguard exec --help')\n");
	return EXEC_EXIT_USAGE;
}

static int read_input(const struct exec_io *io, const char *what, const char *path, char **text,
		      size_t *len)
{
	int ret = strcmp(path, "-") ? fs_read_all(path, EXEC_INPUT_MAX, text, len)
				    : fs_read_fd(io->in_fd, EXEC_INPUT_MAX, text, len);

	if (ret == -EFBIG)
		return exec_usage_error(io->err, "%s file '%s' is larger than %u MiB", what, path,
					EXEC_INPUT_MAX >> 20);
	if (ret)
		return exec_usage_error(io->err, "cannot read %s file '%s': %s", what, path,
					strerror(-ret));
	return 0;
}

static int print_result(const struct exec_io *io, const char *tenant, const struct exec_result *res)
{
	json_t *j = exec_result_json(tenant, res);

	if (!j || json_dumpf(j, io->out, JSON_COMPACT) || fputc('\n', io->out) == EOF ||
	    fflush(io->out)) {
		json_decref(j);
		sg_error("exec: cannot print the result");
		return exec_exit_code(SG_CAUSE_PLATFORM_ERROR);
	}
	json_decref(j);
	return exec_exit_code(res->cause);
}

/* The policy could not be loaded: a platform error, booked and printed
 * like any other result. */
static int policy_failure(const struct exec_io *io, const struct exec_ctx *ctx,
			  const char *batch_id, bool verify, const struct sg_policy_error *perr)
{
	struct exec_result res = { .cause = SG_CAUSE_PLATFORM_ERROR,
				   .rule = -1,
				   .reward = -1,
				   .verify = verify,
				   .path = io->path };
	char msg[512];

	policy_error_format(perr, msg, sizeof(msg));
	snprintf(res.batch_id, sizeof(res.batch_id), "%s", batch_id ? batch_id : "");
	snprintf(res.run_id, sizeof(res.run_id), "%s", ctx->run_id ? ctx->run_id : "");
	snprintf(res.detail, sizeof(res.detail), "platform error: cannot load the policy: %s", msg);
	exec_book(ctx, &(struct exec_booking){ .mode = verify ? "verify" : "batch",
					       .batch_id = res.batch_id,
					       .final = true,
					       .cause = res.cause,
					       .rule = -1,
					       .detail = res.detail });
	return print_result(io, ctx->tenant, &res);
}

static const struct exec_languages *languages;

void exec_command_set_languages(const struct exec_languages *l)
{
	languages = l;
}

/* --language L --code FILE: ctx->argv and ctx->build for L, *hold to
 * release. 0, or an exit code (a usage error: the caller's request). */
static int language_plan(const struct exec_io *io, const struct exec_request *r,
			 struct exec_ctx *ctx, char **code, void **hold)
{
	char err[512];
	size_t len;
	int ret;

	if (!languages)
		return exec_usage_error(io->err, "--language: no languages in this build");
	if ((ret = read_input(io, "code", r->code_path, code, &len)))
		return ret;
	ret = languages->plan(r->language, *code, len, ctx->policy, r->tenant, ctx, hold, err,
			      sizeof(err));
	return ret ? exec_usage_error(io->err, "--language %s: %s", r->language, err) : 0;
}

/* The run itself, with the input parsed and the policy loaded. */
static int run(const struct exec_io *io, const struct exec_request *r, struct exec_ctx *ctx,
	       const struct exec_batch *batch, const struct verify_cases *tests)
{
	struct exec_result res;
	struct exec_later later;
	int code, ret;

	exec_later_init(&later);
	ctx->sandboxes = io->sandboxes ? io->sandboxes : &later.src;
	ret = r->batch_path ? exec_batch(ctx, batch, &res)
			    : exec_verify(ctx, r->batch_id, tests, &res);
	if (ret) {
		sg_error("exec: %s", strerror(-ret));
		code = exec_exit_code(SG_CAUSE_PLATFORM_ERROR);
	} else {
		/* The result is out before the sandboxes go. */
		code = print_result(io, r->tenant, &res);
		exec_result_free(&res);
	}
	exec_later_finish(&later);
	return code;
}

/* The batch or the tests, read and parsed. 0, or an exit code. */
static int read_request_input(const struct exec_io *io, const struct exec_request *r, char **text,
			      struct exec_batch *batch, struct verify_cases *tests)
{
	const char *path = r->batch_path ? r->batch_path : r->tests_path, *name;
	char err[512];
	size_t len;
	int ret;

	if ((ret = read_input(io, r->batch_path ? "batch" : "tests", path, text, &len)))
		return ret;
	name = strcmp(path, "-") ? path : "<stdin>";
	ret = r->batch_path ? exec_batch_parse(*text, len, name, batch, err, sizeof(err))
			    : verify_cases_parse(*text, len, name, tests, err, sizeof(err));
	if (ret == -ENOMEM) {
		sg_error("exec: out of memory reading the input");
		return exec_exit_code(SG_CAUSE_PLATFORM_ERROR);
	}
	if (ret)
		return exec_usage_error(io->err, "%s", err);
	tests->grader_set = r->grader_set;
	tests->grader = r->grader;
	return 0;
}

/* The policy's checks on the request, then the run. An exit code. */
static int run_under_policy(const struct exec_io *io, const struct exec_request *r,
			    struct exec_ctx *ctx, const struct exec_batch *batch,
			    const struct verify_cases *tests)
{
	struct sg_policy_error perr;
	/* On the stack, not the heap: an executor's client thread keeps its
	 * stack out of the pool's forks (src/pool/pool_stack.h), and each
	 * heap page written after such a fork is a copy-on-write fault on the
	 * caller's path (the policy is 35 KB: 9 pages). */
	struct sg_policy policy_buf, *policy = &policy_buf;
	char *code_text = NULL, err[512];
	void *hold = NULL;
	int code;

	if (policy_for_tenant(r->policy_dir ? r->policy_dir : policy_dir_default(), r->tenant,
			      policy, &perr))
		return policy_failure(io, ctx, r->batch_path ? batch->batch_id : r->batch_id,
				      !r->batch_path, &perr);
	if (r->timeout_ms > policy->limits.timeout_ms)
		return exec_usage_error(
			io->err, "--timeout-ms %llu exceeds the policy's timeout_ms %llu (%s)",
			(unsigned long long)r->timeout_ms,
			(unsigned long long)policy->limits.timeout_ms, policy->source);
	if (!r->batch_path && verify_harness_check(policy, tests, r->argv, err, sizeof(err)))
		return exec_usage_error(io->err, "%s", err);
	ctx->policy = policy;
	ctx->timeout_ms = r->timeout_ms;
	code = r->language ? language_plan(io, r, ctx, &code_text, &hold) : 0;
	if (!code)
		code = run(io, r, ctx, batch, tests);
	if (hold)
		languages->release(hold);
	free(code_text);
	return code;
}

int exec_command_run(const struct exec_request *r, const struct exec_io *io)
{
	struct exec_batch batch = { 0 };
	struct verify_cases tests = { 0 };
	struct exec_ctx ctx = { .tenant = r->tenant,
				.run_id = r->run_id,
				.argv = r->argv,
				.path = io->path,
				.reap_elsewhere = io->reap_elsewhere,
				.caller_fd = io->caller_fd };
	char *text = NULL;
	int code;

	code = read_request_input(io, r, &text, &batch, &tests);
	if (!code) {
		ctx.agent = io->agent ? io->agent : agent_connect(NULL);
		code = run_under_policy(io, r, &ctx, &batch, &tests);
		if (ctx.agent != io->agent)
			agent_close(ctx.agent);
	}
	exec_batch_free(&batch);
	verify_cases_free(&tests);
	free(text);
	return code;
}
