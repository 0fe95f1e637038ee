/* How verifier mode runs and judges a test that is more than "run the
 * program, compare its stdout": call-based tests (a test's fn_name) and
 * LiveCodeBench's grader (enum sg_grader, SG_GRADER_LCB).
 *
 * Both run the Python program in-process under a harness,
 * share/sandguard/verify_harness.py, which runs inside the sandbox with
 * the program (it is as untrusted as the program: it never sees the
 * expected output). The harness reports what the program produced; the
 * comparison happens here, in the executor:
 *  - stdio under the LCB grader: the captured output, compared by
 *    lcb_match() (src/judge/lcb.h). The exit status after the output does
 *    not count (SystemExit is absorbed, as LCB absorbs it).
 *  - call-based: the return value's JSON, compared with the expected JSON
 *    by Python's == (src/judge/py_equal.h; a tuple returned is a list). A
 *    value that is not JSON (a set, an object) equals nothing.
 * Without the harness's first line the program ended the process before
 * the harness could report (os._exit): the test fails.
 *
 * The harness is found at $SANDGUARD_DATA_DIR/verify_harness.py, else at
 * share/sandguard/verify_harness.py beside the binary's directory
 * (/usr/local/bin/sandguard: /usr/local/share/sandguard/); the sandbox
 * reads it, so it must lie under one of the policy's read_only paths
 * (/usr is one by default). */
#ifndef SG_VERIFY_JUDGE_H
#define SG_VERIFY_JUDGE_H
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "exec.h"

#define VERIFY_HARNESS_MARK "#sandguard-harness:ok\n"
#define VERIFY_FN_NAME_MAX  128

/* Test `t`'s optional "fn_name" (a Python identifier) into c->fn_name,
 * its input checked as one JSON value per line and its output as one,
 * as json.loads() reads them. 0, -EINVAL with `err`, or -ENOMEM. */
int verify_case_call_parse(const json_t *t, struct verify_case *c, const char *where,
			   const char *name, char *err, size_t err_len);

/* The request's grader, else the policy's (enum sg_grader). */
int verify_grader(const struct sg_policy *p, const struct verify_cases *tests);

/* Whether test `tc` runs under the harness. */
bool verify_uses_harness(int grader, const struct verify_case *tc);

/* The harness's absolute path, or NULL with `err` saying why. */
const char *verify_harness_path(char *err, size_t err_len);

/* Before a request runs: when any of its tests needs the harness, the
 * command must be a Python program (argv[0] named python*), the harness
 * must exist and lie under the policy's read_only paths. 0, or -EINVAL
 * (the request's: not Python) or -ENOENT (the node's) with `err`. */
int verify_harness_check(const struct sg_policy *p, const struct verify_cases *tests,
			 char *const *argv, char *err, size_t err_len);

/* The command test `tc` runs: NULL when it is argv itself, else a
 * malloc'd array (free() it; its strings are borrowed):
 *   argv[0] HARNESS GRADER FN_NAME argv[1...]. */
char **verify_test_argv(int grader, const struct verify_case *tc, char *const *argv);

/* Whether the run's stdout passes test `tc`; else `why` says how it
 * failed ("line 2 differs", "returned value differs"). */
bool verify_judge(int grader, const struct verify_case *tc, const char *out, size_t out_len,
		  char *why, size_t why_len);

/* The harness's report without its first line (for /run_code's stdout):
 * a pointer into `out` and its length, or NULL when the line is missing. */
const char *verify_harness_payload(const char *out, size_t out_len, size_t *len);

#endif
