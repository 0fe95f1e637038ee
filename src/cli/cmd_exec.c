/* sandguard exec: the command line, parsed here and only here, into a
 * struct exec_request (src/exec/exec_command.h). The request then runs in
 * a long-lived executor when one answers (the warm path: the client hands
 * it the parsed request, src/executor/executor_client.h), else here, cold, by
 * exec_command_run() itself: a cold run never enters src/executor/ past the
 * client's connect(). Either way the same body prints one JSON result. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"
#include "exec/exec_command.h"
#include "executor/executor_client.h"

extern char **environ;

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

static int parse_id(const char *flag, const char *v, const char **out)
{
	if (!*v || strlen(v) > EXEC_ID_MAX)
		return exec_usage_error(stderr, "%s must be 1 to %d bytes long", flag, EXEC_ID_MAX);
	*out = v;
	return 0;
}

/* One option: 0, -1 after --help, or an exit code. */
static int parse_option(int c, struct exec_request *r, char **argv)
{
	char *end;
	unsigned long long v;

	switch (c) {
	case 't':
		r->tenant = optarg;
		return 0;
	case 'p':
		r->policy_dir = optarg;
		return 0;
	case 'b':
		r->batch_path = optarg;
		return 0;
	case 'T':
		r->tests_path = optarg;
		return 0;
	case 'r':
		return parse_id("--run-id", optarg, &r->run_id);
	case 'B':
		return parse_id("--batch-id", optarg, &r->batch_id);
	case 'g':
		if (strcmp(optarg, "strict") && strcmp(optarg, "lcb"))
			return exec_usage_error(stderr, "--grader must be strict or lcb, got '%s'",
						optarg);
		r->grader_set = true;
		r->grader = strcmp(optarg, "lcb") ? SG_GRADER_STRICT : SG_GRADER_LCB;
		return 0;
	case 'L':
		r->language = optarg;
		return 0;
	case 'C':
		r->code_path = optarg;
		return 0;
	case 'm':
		errno = 0;
		v = strtoull(optarg, &end, 10);
		if (errno || end == optarg || *end || optarg[0] == '-' || !v)
			return exec_usage_error(
				stderr,
				"--timeout-ms must be a positive integer (milliseconds), got '%s'",
				optarg);
		r->timeout_ms = v;
		return 0;
	case 'h':
		usage(stdout);
		return -1;
	case ':':
		return exec_usage_error(stderr, "option '%s' needs a value", argv[optind - 1]);
	default:
		return exec_usage_error(stderr, "unknown option '%s'", argv[optind - 1]);
	}
}

/* What the options say together; `end` is the first argument past them.
 * 0 or an exit code. */
static int check_request(int argc, char **argv, int end, struct exec_request *r)
{
	if (!r->tenant)
		return exec_usage_error(stderr, "--tenant is required");
	if (!tenant_name_valid(r->tenant))
		return exec_usage_error(
			stderr, "invalid tenant name '%s': expected [a-z0-9][a-z0-9_-]{0,62}",
			r->tenant);
	if (!r->batch_path == !r->tests_path)
		return exec_usage_error(stderr,
					"give exactly one of --batch FILE and --tests FILE");
	if (r->batch_id && r->batch_path)
		return exec_usage_error(
			stderr, "--batch-id is for --tests: a batch carries its own batch_id");
	if (r->grader_set && r->batch_path)
		return exec_usage_error(stderr, "--grader is for --tests");
	if (!r->language != !r->code_path)
		return exec_usage_error(stderr, "--language and --code go together");
	if (r->language && !r->tests_path)
		return exec_usage_error(stderr, "--language is for --tests");
	if (r->language && end != argc)
		return exec_usage_error(stderr, "--language runs its --code: no command after it");
	if (r->language)
		return 0;
	if (end == argc || strcmp(argv[end - 1], "--"))
		return exec_usage_error(
			stderr, end == argc ? "missing the command: ... -- CMD [ARGS...]"
					    : "the command must follow '--': ... -- CMD [ARGS...]");
	r->argv = argv + end;
	return 0;
}

/* argv[0] is "exec". 0 to go on, -1 after --help, or an exit code. */
static int parse_args(int argc, char **argv, struct exec_request *r)
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
	int c, ret = 0;

	opterr = 0;
	optind = 1;
	while (!ret && (c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1)
		ret = parse_option(c, r, argv);
	return ret ?: check_request(argc, argv, optind, r);
}

int cmd_exec(int argc, char **argv)
{
	struct exec_request r = { 0 };
	struct exec_io io = { .out = stdout, .err = stderr, .in_fd = STDIN_FILENO, .path = "cold" };
	int code = parse_args(argc, argv, &r);

	if (code)
		return code < 0 ? SG_EXIT_OK : code;
	code = executor_client_run(&r, environ);
	return code >= 0 ? code : exec_command_run(&r, &io);
}
