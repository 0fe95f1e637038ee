/* Call-based tests and the LCB grader: the harness's command and the
 * executor's judgement of what it reports (src/exec/verify_judge.h). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "judge/lcb.h"
#include "judge/py_equal.h"
#include "verify_judge.h"

#define HARNESS_NAME "verify_harness.py"

static char harness[PATH_MAX];
static char harness_err[256];
static pthread_once_t harness_once = PTHREAD_ONCE_INIT;

static void find_harness(void)
{
	const char *dir = getenv("SANDGUARD_DATA_DIR");
	char exe[PATH_MAX], want[PATH_MAX + 64];
	ssize_t n;

	if (dir && *dir) {
		snprintf(want, sizeof(want), "%s/%s", dir, HARNESS_NAME);
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0) {
			snprintf(harness_err, sizeof(harness_err),
				 "cannot read /proc/self/exe to find %s: %s", HARNESS_NAME,
				 strerror(errno));
			return;
		}
		exe[n] = '\0';
		*strrchr(exe, '/') = '\0'; /* readlink gives an absolute path */
		snprintf(want, sizeof(want), "%s/../share/sandguard/%s", exe, HARNESS_NAME);
	}
	if (!realpath(want, harness)) {
		snprintf(harness_err, sizeof(harness_err),
			 "the verifier harness %s is missing (%s): install share/sandguard/ beside "
			 "the binary's directory, or set SANDGUARD_DATA_DIR",
			 want, strerror(errno));
		harness[0] = '\0';
	}
}

const char *verify_harness_path(char *err, size_t err_len)
{
	pthread_once(&harness_once, find_harness);
	if (!harness[0])
		snprintf(err, err_len, "%s", harness_err);
	return harness[0] ? harness : NULL;
}

int verify_grader(const struct sg_policy *p, const struct verify_cases *tests)
{
	return tests->grader_set ? tests->grader : p->grader;
}

bool verify_uses_harness(int grader, const struct verify_case *tc)
{
	return grader == SG_GRADER_LCB || tc->fn_name;
}

static bool under_read_only(const struct sg_policy *p, const char *path)
{
	for (int i = 0; i < p->n_read_only; i++) {
		char real[PATH_MAX];
		const char *ro = realpath(p->read_only[i], real) ? real : p->read_only[i];
		size_t n = strlen(ro);

		if (!strncmp(path, ro, n) && (path[n] == '/' || path[n] == '\0' || n == 1))
			return true;
	}
	return false;
}

int verify_harness_check(const struct sg_policy *p, const struct verify_cases *tests,
			 char *const *argv, char *err, size_t err_len)
{
	int grader = verify_grader(p, tests);
	const char *base, *path;
	bool needed = false;

	for (size_t i = 0; i < tests->n && !needed; i++)
		needed = verify_uses_harness(grader, &tests->v[i]);
	if (!needed)
		return 0;
	base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (strncmp(base, "python", 6) || !argv[1]) {
		snprintf(err, err_len,
			 "%s needs a Python program (python3 PROGRAM.py or python3 -c CODE), got "
			 "'%s'",
			 grader == SG_GRADER_LCB ? "the lcb grader" : "a call-based test (fn_name)",
			 argv[0]);
		return -EINVAL;
	}
	path = verify_harness_path(err, err_len);
	if (!path)
		return -ENOENT;
	if (!under_read_only(p, path)) {
		snprintf(err, err_len,
			 "the verifier harness %s is not under any of the read_only paths of "
			 "policy %s: the sandbox could not read it",
			 path, p->source);
		return -ENOENT;
	}
	return 0;
}

char **verify_test_argv(int grader, const struct verify_case *tc, char *const *argv)
{
	char err[8];
	const char *path = verify_harness_path(err, sizeof(err));
	size_t n = 0;
	char **out;

	/* Without the harness (verify_harness_check() refuses such a request
	 * first), the program runs as it is, and leaves no report: a fail. */
	if (!verify_uses_harness(grader, tc) || !path)
		return NULL;
	while (argv[n])
		n++;
	out = calloc(n + 4, sizeof(*out));
	if (!out)
		return NULL;
	out[0] = argv[0];
	out[1] = (char *)path;
	out[2] = grader == SG_GRADER_LCB ? "lcb" : "strict";
	out[3] = tc->fn_name ? tc->fn_name : "";
	for (size_t i = 1; i < n; i++)
		out[3 + i] = argv[i];
	return out;
}

const char *verify_harness_payload(const char *out, size_t out_len, size_t *len)
{
	size_t mark = strlen(VERIFY_HARNESS_MARK);

	if (!out || out_len < mark || memcmp(out, VERIFY_HARNESS_MARK, mark))
		return NULL;
	*len = out_len - mark;
	return out + mark;
}

bool verify_judge(int grader, const struct verify_case *tc, const char *out, size_t out_len,
		  char *why, size_t why_len)
{
	const char *got = out ? out : "";
	size_t got_len = out ? out_len : 0;
	int eq;

	if (verify_uses_harness(grader, tc)) {
		got = verify_harness_payload(out, out_len, &got_len);
		if (!got) {
			snprintf(
				why, why_len,
				"no report from the harness: the program ended the process itself");
			return false;
		}
	}
	if (!tc->fn_name)
		return lcb_match(got, got_len, tc->output, tc->output_len, why, why_len);
	if (got_len && got[0] == '!') {
		snprintf(why, why_len, "returned a %.*s, which equals no JSON value",
			 (int)strcspn(got + 1, "\n"), got + 1);
		return false;
	}
	eq = py_json_equal(got, got_len, tc->output, tc->output_len);
	if (eq == 1) {
		why[0] = '\0';
		return true;
	}
	snprintf(why, why_len, "%s",
		 eq == 0 ? "returned value differs" : "the harness's report is not JSON");
	return false;
}

static bool identifier(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9') || strlen(s) > VERIFY_FN_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

int verify_case_call_parse(const json_t *t, struct verify_case *c, const char *where,
			   const char *name, char *err, size_t err_len)
{
	json_t *fn = json_object_get(t, "fn_name");
	char why[128];
	size_t line = 1;

	if (!fn || json_is_null(fn))
		return 0;
	if (!json_is_string(fn) || !identifier(json_string_value(fn))) {
		snprintf(err, err_len,
			 "%s: %s.fn_name must be a Python identifier of at most %d characters",
			 name, where, VERIFY_FN_NAME_MAX);
		return -EINVAL;
	}
	for (const char *p = c->input, *end = c->input + c->input_len;; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (py_json_check(p, n, why, sizeof(why))) {
			snprintf(
				err, err_len,
				"%s: %s.input line %zu is not JSON (%s): a call-based test's input "
				"is one JSON argument per line",
				name, where, line, why);
			return -EINVAL;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	if (py_json_check(c->output, c->output_len, why, sizeof(why))) {
		snprintf(err, err_len,
			 "%s: %s.output is not JSON (%s): a call-based test's output is the JSON "
			 "of the return value",
			 name, where, why);
		return -EINVAL;
	}
	c->fn_name = strdup(json_string_value(fn));
	return c->fn_name ? 0 : -ENOMEM;
}
