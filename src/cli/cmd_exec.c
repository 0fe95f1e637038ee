/* sandguard exec: the reward executor's command line. Prints exactly one
 * JSON result object on stdout (except for usage errors, which are the
 * caller's and get a message on stderr and exit 64). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/agent_client.h"
#include "commands.h"
#include "exec/exec.h"
#include "lib/fs_util.h"
#include "lib/log.h"

#define ID_MAX 127 /* run and batch ids fit a booking untruncated */

struct exec_opts {
	const char *tenant;
	const char *policy_dir;
	const char *batch_path;
	const char *tests_path;
	const char *run_id;
	const char *batch_id;
	uint64_t timeout_ms;
	char **argv;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard exec --tenant T [--policy-dir D] --batch FILE|- [--timeout-ms N]\n"
		"                      [--run-id R] -- CMD [ARGS...]\n"
		"       sandguard exec --tenant T [--policy-dir D] --tests FILE|- [--timeout-ms N]\n"
		"                      [--run-id R] [--batch-id B] -- CMD [ARGS...]\n"
		"\n"
		"Batch mode: CMD gets the batch {\"batch_id\", \"items\": [{\"prompt\", \"completion\"}]} on\n"
		"stdin and must print one JSON array of len(items) finite numbers.\n"
		"Verifier mode: CMD runs once per test [{\"input\", \"output\"}] with the input on stdin;\n"
		"reward 1 iff every output matches (LiveCodeBench comparison).\n"
		"\n"
		"  --tenant T        tenant name ([a-z0-9][a-z0-9_-]{0,62})\n"
		"  --policy-dir D    policies (default $SANDGUARD_POLICY_DIR or %s)\n"
		"  --timeout-ms N    deadline per run, at most the policy's timeout_ms\n"
		"  --run-id R        training run, for attribution\n"
		"  --batch-id B      verifier mode: the request's id (default: made up)\n"
		"\n"
		"Prints one JSON result: {tenant, batch_id, status, cause, rule, scores, detail,\n"
		"attempts, wall_ms, stderr} (+ tests, reward in verifier mode).\n"
		"Exit: 0 ok, 1 tenant cause, 2 platform error, 64 usage.\n",
		SG_POLICY_DIR_DEFAULT);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sandguard exec: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see 'sandguard exec --help')\n");
	return SG_EXIT_USAGE;
}

static int parse_id(const char *flag, const char *v, const char **out)
{
	if (!*v || strlen(v) > ID_MAX)
		return usage_error("%s must be 1 to %d bytes long", flag, ID_MAX);
	*out = v;
	return 0;
}

/* 0 to go on, -1 after --help, or an exit code. */
static int parse_args(int argc, char **argv, struct exec_opts *o)
{
	static const struct option longopts[] = { { "tenant", required_argument, NULL, 't' },
						  { "policy-dir", required_argument, NULL, 'p' },
						  { "batch", required_argument, NULL, 'b' },
						  { "tests", required_argument, NULL, 'T' },
						  { "timeout-ms", required_argument, NULL, 'm' },
						  { "run-id", required_argument, NULL, 'r' },
						  { "batch-id", required_argument, NULL, 'B' },
						  { "help", no_argument, NULL, 'h' },
						  { 0 } };
	int c, ret;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			o->tenant = optarg;
			break;
		case 'p':
			o->policy_dir = optarg;
			break;
		case 'b':
			o->batch_path = optarg;
			break;
		case 'T':
			o->tests_path = optarg;
			break;
		case 'r':
			if ((ret = parse_id("--run-id", optarg, &o->run_id)))
				return ret;
			break;
		case 'B':
			if ((ret = parse_id("--batch-id", optarg, &o->batch_id)))
				return ret;
			break;
		case 'm': {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || !v)
				return usage_error(
					"--timeout-ms must be a positive integer (milliseconds), got '%s'",
					optarg);
			o->timeout_ms = v;
			break;
		}
		case 'h':
			usage(stdout);
			return -1;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!o->tenant)
		return usage_error("--tenant is required");
	if (!tenant_name_valid(o->tenant))
		return usage_error("invalid tenant name '%s': expected [a-z0-9][a-z0-9_-]{0,62}",
				   o->tenant);
	if (!o->batch_path == !o->tests_path)
		return usage_error("give exactly one of --batch FILE and --tests FILE");
	if (o->batch_id && o->batch_path)
		return usage_error("--batch-id is for --tests: a batch carries its own batch_id");
	if (optind == argc || strcmp(argv[optind - 1], "--"))
		return usage_error(optind == argc
					   ? "missing the command: ... -- CMD [ARGS...]"
					   : "the command must follow '--': ... -- CMD [ARGS...]");
	o->argv = argv + optind;
	return 0;
}

static int read_input(const char *what, const char *path, char **text, size_t *len)
{
	int ret = fs_read_all(path, EXEC_INPUT_MAX, text, len);

	if (ret == -EFBIG)
		return usage_error("%s file '%s' is larger than %u MiB", what, path,
				   EXEC_INPUT_MAX >> 20);
	if (ret)
		return usage_error("cannot read %s file '%s': %s", what, path, strerror(-ret));
	return 0;
}

static int print_result(const char *tenant, const struct exec_result *res)
{
	json_t *j = exec_result_json(tenant, res);

	if (!j || json_dumpf(j, stdout, JSON_COMPACT) || fputc('\n', stdout) == EOF ||
	    fflush(stdout)) {
		json_decref(j);
		sg_error("exec: cannot print the result");
		return SG_EXIT_PLATFORM;
	}
	json_decref(j);
	return exec_exit_code(res->cause);
}

/* The policy could not be loaded: a platform error, booked and printed
 * like any other result. */
static int policy_failure(const struct exec_ctx *ctx, const char *batch_id, bool verify,
			  const struct sg_policy_error *perr)
{
	struct exec_result res = {
		.cause = SG_CAUSE_PLATFORM_ERROR, .rule = -1, .reward = -1, .verify = verify
	};
	char msg[512];
	int code;

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
	code = print_result(ctx->tenant, &res);
	return code;
}

int cmd_exec(int argc, char **argv)
{
	struct exec_opts o = { 0 };
	struct exec_batch batch = { 0 };
	struct verify_cases tests = { 0 };
	struct exec_result res;
	struct sg_policy_error perr;
	struct sg_policy *policy = NULL;
	struct exec_ctx ctx = { 0 };
	const char *dir, *path;
	char *text = NULL, err[512];
	size_t len;
	int code;

	code = parse_args(argc, argv, &o);
	if (code)
		return code < 0 ? SG_EXIT_OK : code;
	path = o.batch_path ? o.batch_path : o.tests_path;
	if ((code = read_input(o.batch_path ? "batch" : "tests", path, &text, &len)))
		return code;
	const char *name = strcmp(path, "-") ? path : "<stdin>";
	int ret = o.batch_path ? exec_batch_parse(text, len, name, &batch, err, sizeof(err))
			       : verify_cases_parse(text, len, name, &tests, err, sizeof(err));
	if (ret) {
		free(text);
		if (ret == -ENOMEM) {
			sg_error("exec: out of memory reading the input");
			return SG_EXIT_PLATFORM;
		}
		return usage_error("%s", err);
	}

	ctx.tenant = o.tenant;
	ctx.run_id = o.run_id;
	ctx.argv = o.argv;
	ctx.agent = agent_connect(NULL);
	dir = o.policy_dir ? o.policy_dir : policy_dir_default();
	policy = malloc(sizeof(*policy));
	if (!policy) {
		code = SG_EXIT_PLATFORM;
		goto out;
	}
	if (policy_for_tenant(dir, o.tenant, policy, &perr)) {
		code = policy_failure(&ctx, o.batch_path ? batch.batch_id : o.batch_id,
				      !o.batch_path, &perr);
		goto out;
	}
	if (o.timeout_ms > policy->limits.timeout_ms) {
		code = usage_error("--timeout-ms %llu exceeds the policy's timeout_ms %llu (%s)",
				   (unsigned long long)o.timeout_ms,
				   (unsigned long long)policy->limits.timeout_ms, policy->source);
		goto out;
	}
	ctx.policy = policy;
	ctx.timeout_ms = o.timeout_ms;
	ret = o.batch_path ? exec_batch(&ctx, &batch, &res)
			   : exec_verify(&ctx, o.batch_id, &tests, &res);
	if (ret) {
		sg_error("exec: %s", strerror(-ret));
		code = SG_EXIT_PLATFORM;
		goto out;
	}
	code = print_result(o.tenant, &res);
	exec_result_free(&res);
out:
	agent_close(ctx.agent);
	free(policy);
	exec_batch_free(&batch);
	verify_cases_free(&tests);
	free(text);
	return code;
}
