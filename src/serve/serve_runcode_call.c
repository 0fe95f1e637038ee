/* /run_code's "fn_name", a sandguard extension (SandboxFusion has no such
 * field; verl wraps the code in a caller of its own instead): the Python
 * code is a call-based program, "stdin" holds one JSON argument per line,
 * and run_result.stdout is the JSON of the function's return value (a
 * tuple as a list), as LiveCodeBench stores a call-based test's output.
 * The verifier's harness runs it (src/exec/verify_judge.h), under the
 * request's "grader" ("strict" or "lcb"), else the policy's. */
#include <errno.h>
#include <string.h>
#include "exec/verify_judge.h"
#include "serve_internal.h"

int runcode_call_parse(const struct sg_policy *p, json_t *body, struct runcode_plan *plan,
		       struct serve_reply *rp)
{
	json_t *fn = json_object_get(body, "fn_name"), *g = json_object_get(body, "grader");
	const char *grader = json_is_string(g) ? json_string_value(g) : NULL;
	struct verify_case vc = { 0 };
	struct verify_cases one = { .v = &vc, .n = 1 };
	char *const argv[] = { "python3", "main.py", NULL };
	char err[512];
	int ret;

	plan->grader = p->grader;
	if ((!fn || json_is_null(fn)) && (!g || json_is_null(g)))
		return 0;
	if (!fn || json_is_null(fn) || plan->lang != LANG_PYTHON) {
		serve_error(rp, 400,
			    "\"fn_name\" and \"grader\" go with python code (\"fn_name\" "
			    "names the function to call)");
		return -1;
	}
	if (g && !json_is_null(g) &&
	    (!grader || (strcmp(grader, "strict") && strcmp(grader, "lcb")))) {
		serve_error(rp, 400, "\"grader\" must be \"strict\" or \"lcb\"");
		return -1;
	}
	if (grader)
		plan->grader = strcmp(grader, "lcb") ? SG_GRADER_STRICT : SG_GRADER_LCB;
	/* The test parser's checks: an identifier, and JSON argument lines. */
	vc.input = (char *)(plan->stdin_data ? plan->stdin_data : "");
	vc.input_len = plan->stdin_data ? plan->stdin_len : 0;
	vc.output = "null";
	vc.output_len = 4;
	ret = verify_case_call_parse(body, &vc, "request", "body", err, sizeof(err));
	if (!ret) {
		plan->fn_name = vc.fn_name;
		ret = verify_harness_check(p, &one, argv, err, sizeof(err));
	}
	if (ret == -ENOMEM)
		snprintf(err, sizeof(err), "out of memory");
	if (ret)
		serve_error(rp, ret == -EINVAL ? 400 : 500, "%s", err);
	return ret ? -1 : 0;
}

void runcode_call_argv(const struct runcode_plan *plan, struct lang_plan *lp)
{
	char err[8];
	const char *path = verify_harness_path(err, sizeof(err));

	if (!plan->fn_name || !path) /* runcode_call_parse() found it, once for all */
		return;
	lp->run[4] = lp->run[1]; /* python3 main.py -> python3 HARNESS GRADER FN main.py */
	lp->run[5] = NULL;
	lp->run[1] = (char *)path;
	lp->run[2] = plan->grader == SG_GRADER_LCB ? "lcb" : "strict";
	lp->run[3] = plan->fn_name;
}

void runcode_call_stdout(const struct runcode_plan *plan, struct exec_run_result *r)
{
	size_t len;
	const char *payload;

	if (!plan->fn_name || !(payload = verify_harness_payload(r->out, r->out_len, &len)))
		return;
	memmove(r->out, payload, len + 1); /* with its NUL */
	r->out_len = len;
}
