/* `sandguard exec` (see src/warm/warm_command.h). Prints exactly one JSON
 * result object (except for usage errors, which are the caller's and get a
 * message and exit 64). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/agent_client.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "exec/verify_judge.h"
#include "warm_command.h"

#define ID_MAX     127 /* run and batch ids fit a booking untruncated */
#define EXIT_USAGE 64  /* the CLI's SG_EXIT_USAGE */

struct exec_opts {
	const char *tenant;
	const char *policy_dir;
	const char *batch_path;
	const char *tests_path;
	const char *run_id;
	const char *batch_id;
	const char *language; /* with code_path: no command */
	const char *code_path;
	uint64_t timeout_ms;
	int grader; /* enum sg_grader + 1; 0: the policy's */
	char **argv;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard exec --tenant T [--policy-dir D] --batch FILE|- [--timeout-ms N]\n"
		"                      [--run-id R] -- CMD [ARGS...]\n"
		"       sandguard exec --tenant T [--policy-dir D] --tests FILE|- [--timeout-ms N]\n"
		"                      [--run-id R] [--batch-id B] [--grader strict|lcb] -- CMD [ARGS...]\n"
		"       sandguard exec --tenant T [--policy-dir D] --tests FILE|- [--timeout-ms N]\n"
		"                      [--run-id R] [--batch-id B] --language L --code FILE\n"
		"\n"
		"Batch mode: CMD gets the batch {\"batch_id\", \"items\": [{\"prompt\", \"completion\"}]} on\n"
		"stdin and must print one JSON array of len(items) finite numbers.\n"
		"Verifier mode: CMD runs once per test [{\"input\", \"output\"}] with the input on stdin;\n"
		"reward 1 iff every output matches (LiveCodeBench comparison). A test with \"fn_name\"\n"
		"is call-based: one JSON argument per input line, the return value's JSON as output.\n"
		"LiveCodeBench's {\"inputs\", \"outputs\", \"fn_name\"} is taken too.\n"
		"reward 1 iff every output matches (LiveCodeBench comparison). With --language, the\n"
		"code in FILE (any /run_code language: python, cpp, java, nodejs, go, rust, bash)\n"
		"is compiled once, in a sandbox of its own, and each test runs the program.\n"
		"\n"
		"  --tenant T        tenant name ([a-z0-9][a-z0-9_-]{0,62})\n"
		"  --policy-dir D    policies (default $SANDGUARD_POLICY_DIR or %s)\n"
		"  --timeout-ms N    deadline per run, at most the policy's timeout_ms\n"
		"  --run-id R        training run, for attribution\n"
		"  --batch-id B      verifier mode: the request's id (default: made up)\n"
		"  --grader G        verifier mode: strict (the program's exit status counts) or lcb\n"
		"                    (LiveCodeBench's grader, in-process); default: the policy's\n"
		"  --language L      verifier mode: the code's language, with --code FILE\n"
		"\n"
		"Prints one JSON result: {tenant, batch_id, status, cause, rule, scores, detail,\n"
		"attempts, wall_ms, stderr, path} (+ tests, reward in verifier mode). \"path\" is\n"
		"\"warm\" when a running executor (sandguard executor, or serve) ran it, \"cold\" when\n"
		"this process did; SANDGUARD_WARM=0 runs it cold.\n"
		"Exit: 0 ok, 1 tenant cause, 2 platform error, 64 usage.\n",
		SG_POLICY_DIR_DEFAULT);
}

static int usage_error(const struct warm_io *io, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_error(const struct warm_io *io, const char *fmt, ...)
{
	va_list ap;

	fprintf(io->err, "sandguard exec: ");
	va_start(ap, fmt);
	vfprintf(io->err, fmt, ap);
	va_end(ap);
	fprintf(io->err, "\n(see 'sandguard exec --help')\n");
	return EXIT_USAGE;
}

static int parse_id(const struct warm_io *io, const char *flag, const char *v, const char **out)
{
	if (!*v || strlen(v) > ID_MAX)
		return usage_error(io, "%s must be 1 to %d bytes long", flag, ID_MAX);
	*out = v;
	return 0;
}

static int parse_option(const struct warm_io *io, int c, struct exec_opts *o, char **argv)
{
	char *end;
	unsigned long long v;

	switch (c) {
	case 't':
		o->tenant = optarg;
		return 0;
	case 'p':
		o->policy_dir = optarg;
		return 0;
	case 'b':
		o->batch_path = optarg;
		return 0;
	case 'T':
		o->tests_path = optarg;
		return 0;
	case 'r':
		return parse_id(io, "--run-id", optarg, &o->run_id);
	case 'B':
		return parse_id(io, "--batch-id", optarg, &o->batch_id);
	case 'g':
		if (strcmp(optarg, "strict") && strcmp(optarg, "lcb"))
			return usage_error(io, "--grader must be strict or lcb, got '%s'", optarg);
		o->grader = 1 + (strcmp(optarg, "lcb") ? SG_GRADER_STRICT : SG_GRADER_LCB);
		return 0;
	case 'L':
		o->language = optarg;
		return 0;
	case 'C':
		o->code_path = optarg;
		return 0;
	case 'm':
		errno = 0;
		v = strtoull(optarg, &end, 10);
		if (errno || end == optarg || *end || optarg[0] == '-' || !v)
			return usage_error(
				io,
				"--timeout-ms must be a positive integer (milliseconds), got '%s'",
				optarg);
		o->timeout_ms = v;
		return 0;
	case 'h':
		usage(io->out);
		return -1;
	case ':':
		return usage_error(io, "option '%s' needs a value", argv[optind - 1]);
	default:
		return usage_error(io, "unknown option '%s'", argv[optind - 1]);
	}
}

/* getopt's state is the process's: one parse at a time (a long-lived
 * executor parses its clients' arguments on several threads). */
static pthread_mutex_t getopt_lock = PTHREAD_MUTEX_INITIALIZER;

/* 0 to go on, -1 after --help, or an exit code. */
static int parse_args(const struct warm_io *io, int argc, char **argv, struct exec_opts *o)
{
	static const struct option longopts[] = { { "tenant", required_argument, NULL, 't' },
						  { "policy-dir", required_argument, NULL, 'p' },
						  { "batch", required_argument, NULL, 'b' },
						  { "tests", required_argument, NULL, 'T' },
						  { "timeout-ms", required_argument, NULL, 'm' },
						  { "run-id", required_argument, NULL, 'r' },
						  { "batch-id", required_argument, NULL, 'B' },
						  { "grader", required_argument, NULL, 'g' },
						  { "language", required_argument, NULL, 'L' },
						  { "code", required_argument, NULL, 'C' },
						  { "help", no_argument, NULL, 'h' },
						  { 0 } };
	int c, ret = 0, end;

	pthread_mutex_lock(&getopt_lock);
	opterr = 0;
	optind = 1;
	while (!ret && (c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1)
		ret = parse_option(io, c, o, argv);
	end = optind;
	pthread_mutex_unlock(&getopt_lock);
	if (ret)
		return ret;
	if (!o->tenant)
		return usage_error(io, "--tenant is required");
	if (!tenant_name_valid(o->tenant))
		return usage_error(io,
				   "invalid tenant name '%s': expected [a-z0-9][a-z0-9_-]{0,62}",
				   o->tenant);
	if (!o->batch_path == !o->tests_path)
		return usage_error(io, "give exactly one of --batch FILE and --tests FILE");
	if (o->batch_id && o->batch_path)
		return usage_error(io,
				   "--batch-id is for --tests: a batch carries its own batch_id");
	if (o->grader && o->batch_path)
		return usage_error(io, "--grader is for --tests");
	if (!o->language != !o->code_path)
		return usage_error(io, "--language and --code go together");
	if (o->language && !o->tests_path)
		return usage_error(io, "--language is for --tests");
	if (o->language && end != argc)
		return usage_error(io, "--language runs its --code: no command after it");
	if (o->language)
		return 0;
	if (end == argc || strcmp(argv[end - 1], "--"))
		return usage_error(
			io, end == argc ? "missing the command: ... -- CMD [ARGS...]"
					: "the command must follow '--': ... -- CMD [ARGS...]");
	o->argv = argv + end;
	return 0;
}

static int read_input(const struct warm_io *io, const char *what, const char *path, char **text,
		      size_t *len)
{
	int ret = strcmp(path, "-") ? fs_read_all(path, EXEC_INPUT_MAX, text, len)
				    : fs_read_fd(io->in_fd, EXEC_INPUT_MAX, text, len);

	if (ret == -EFBIG)
		return usage_error(io, "%s file '%s' is larger than %u MiB", what, path,
				   EXEC_INPUT_MAX >> 20);
	if (ret)
		return usage_error(io, "cannot read %s file '%s': %s", what, path, strerror(-ret));
	return 0;
}

static int print_result(const struct warm_io *io, const char *tenant, const struct exec_result *res)
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
static int policy_failure(const struct warm_io *io, const struct exec_ctx *ctx,
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

static const struct warm_languages *languages;

void warm_exec_set_languages(const struct warm_languages *l)
{
	languages = l;
}

/* --language L --code FILE: ctx->argv and ctx->build for L, *hold to
 * release. 0, or an exit code (a usage error: the caller's request). */
static int language_plan(const struct warm_io *io, const struct exec_opts *o, struct exec_ctx *ctx,
			 char **code, void **hold)
{
	char err[512];
	size_t len;
	int ret;

	if (!languages)
		return usage_error(io, "--language: no languages in this build");
	if ((ret = read_input(io, "code", o->code_path, code, &len)))
		return ret;
	ret = languages->plan(o->language, *code, len, ctx->policy, o->tenant, ctx, hold, err,
			      sizeof(err));
	return ret ? usage_error(io, "--language %s: %s", o->language, err) : 0;
}

/* The run itself, with the input parsed and the policy loaded. */
static int run(const struct warm_io *io, const struct exec_opts *o, struct exec_ctx *ctx,
	       const struct exec_batch *batch, const struct verify_cases *tests)
{
	struct exec_result res;
	struct exec_later later;
	int code, ret;

	exec_later_init(&later);
	ctx->sandboxes = io->sandboxes ? io->sandboxes : &later.src;
	ret = o->batch_path ? exec_batch(ctx, batch, &res)
			    : exec_verify(ctx, o->batch_id, tests, &res);
	if (ret) {
		sg_error("exec: %s", strerror(-ret));
		code = exec_exit_code(SG_CAUSE_PLATFORM_ERROR);
	} else {
		/* The result is out before the sandboxes go. */
		code = print_result(io, o->tenant, &res);
		exec_result_free(&res);
	}
	exec_later_finish(&later);
	return code;
}

int warm_exec_command(int argc, char **argv, const struct warm_io *io)
{
	struct exec_opts o = { 0 };
	struct exec_batch batch = { 0 };
	struct verify_cases tests = { 0 };
	struct sg_policy_error perr;
	/* On the stack, not the heap: an executor's client thread keeps its
	 * stack out of the pool's forks (src/warm/warm_stack.h), and each
	 * heap page written after such a fork is a copy-on-write fault on the
	 * caller's path (the policy is 35 KB: 9 pages). */
	struct sg_policy policy_buf, *policy = &policy_buf;
	struct exec_ctx ctx = { .path = io->path,
				.reap_elsewhere = io->reap_elsewhere,
				.caller_fd = io->caller_fd };
	const char *path, *name;
	char *text = NULL, *code_text = NULL, err[512];
	void *hold = NULL;
	size_t len;
	int code, ret;

	code = parse_args(io, argc, argv, &o);
	if (code)
		return code < 0 ? 0 : code;
	path = o.batch_path ? o.batch_path : o.tests_path;
	if ((code = read_input(io, o.batch_path ? "batch" : "tests", path, &text, &len)))
		return code;
	name = strcmp(path, "-") ? path : "<stdin>";
	ret = o.batch_path ? exec_batch_parse(text, len, name, &batch, err, sizeof(err))
			   : verify_cases_parse(text, len, name, &tests, err, sizeof(err));
	if (ret) {
		free(text);
		if (ret == -ENOMEM) {
			sg_error("exec: out of memory reading the input");
			return exec_exit_code(SG_CAUSE_PLATFORM_ERROR);
		}
		return usage_error(io, "%s", err);
	}

	tests.grader_set = o.grader > 0;
	tests.grader = (uint8_t)(o.grader > 0 ? o.grader - 1 : 0);
	ctx.tenant = o.tenant;
	ctx.run_id = o.run_id;
	ctx.argv = o.argv;
	ctx.agent = io->agent ? io->agent : agent_connect(NULL);
	if (policy_for_tenant(o.policy_dir ? o.policy_dir : policy_dir_default(), o.tenant, policy,
			      &perr)) {
		code = policy_failure(io, &ctx, o.batch_path ? batch.batch_id : o.batch_id,
				      !o.batch_path, &perr);
	} else if (o.timeout_ms > policy->limits.timeout_ms) {
		code = usage_error(io,
				   "--timeout-ms %llu exceeds the policy's timeout_ms %llu (%s)",
				   (unsigned long long)o.timeout_ms,
				   (unsigned long long)policy->limits.timeout_ms, policy->source);
	} else if (!o.batch_path &&
		   verify_harness_check(policy, &tests, o.argv, err, sizeof(err))) {
		code = usage_error(io, "%s", err);
	} else {
		ctx.policy = policy;
		ctx.timeout_ms = o.timeout_ms;
		code = o.language ? language_plan(io, &o, &ctx, &code_text, &hold) : 0;
		if (!code)
			code = run(io, &o, &ctx, &batch, &tests);
	}
	if (hold)
		languages->release(hold);
	free(code_text);
	if (ctx.agent != io->agent)
		agent_close(ctx.agent);
	exec_batch_free(&batch);
	verify_cases_free(&tests);
	free(text);
	return code;
}
