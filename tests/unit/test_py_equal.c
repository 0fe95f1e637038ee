/* Python's == over json.loads() values (src/exec/py_equal.h) and the
 * verifier's judgement of a harness report (src/exec/verify_judge.h).
 * Every expected verdict is what Python 3.11 gives for
 * json.loads(a) == json.loads(b). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "judge/py_equal.h"
#include "exec/verify_judge.h"
#include "serve/serve_http.h"

static int eq(const char *a, const char *b)
{
	return py_json_equal(a, strlen(a), b, strlen(b));
}

static void test_numbers(void **state)
{
	assert_int_equal(eq("1", "1"), 1);
	assert_int_equal(eq("true", "1"), 1); /* True == 1 */
	assert_int_equal(eq("false", "0.0"), 1);
	assert_int_equal(eq("true", "2"), 0);
	assert_int_equal(eq("4", "4.0"), 1);
	assert_int_equal(eq("-0", "0"), 1);
	assert_int_equal(eq("-0.0", "0"), 1);
	assert_int_equal(eq("100000000000000000000", "1e20"), 1);          /* exactly 10**20 */
	assert_int_equal(eq("9007199254740993", "9007199254740993.0"), 0); /* loads as 2**53 */
	assert_int_equal(eq("9007199254740992", "9007199254740993.0"), 1);
	assert_int_equal(eq("0.30000000000000004", "0.3"), 0);
	assert_int_equal(eq("0.1", "0.10000000000000001"), 1); /* the same double */
	assert_int_equal(eq("NaN", "NaN"), 0);
	assert_int_equal(eq("Infinity", "1e999"), 1);
	assert_int_equal(eq("-Infinity", "Infinity"), 0);
	assert_int_equal(eq("123456789012345678901234567890", "123456789012345678901234567890"), 1);
	assert_int_equal(eq("123456789012345678901234567890", "123456789012345678901234567891"), 0);
	assert_int_equal(eq("1.5", "1"), 0);
}

static void test_kinds(void **state)
{
	assert_int_equal(eq("null", "null"), 1);
	assert_int_equal(eq("null", "0"), 0);
	assert_int_equal(eq("null", "[]"), 0);
	assert_int_equal(eq("\"1\"", "1"), 0);
	assert_int_equal(eq("[]", "{}"), 0);
	assert_int_equal(eq("\"\"", "[]"), 0);
}

static void test_strings(void **state)
{
	assert_int_equal(eq("\"caf\\u00e9\"", "\"caf\xc3\xa9\""), 1);
	assert_int_equal(eq("\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\""),
			 1); /* a surrogate pair */
	assert_int_equal(eq("\"a\\/b\"", "\"a/b\""), 1);
	assert_int_equal(eq("\"a\\tb\"", "\"a b\""), 0);
	assert_int_equal(eq("\"\\ud800\"", "\"\\ud800\""), 1); /* a lone surrogate, both sides */
	assert_int_equal(eq("\"ab\"", "\"abc\""), 0);
}

static void test_containers(void **state)
{
	assert_int_equal(eq("[1, [2, 3]]", "[1,[2,3]]"), 1);
	assert_int_equal(eq("[1, 2]", "[2, 1]"), 0);
	assert_int_equal(eq("[1, 2]", "[1, 2, 3]"), 0);
	assert_int_equal(eq("[true, false]", "[1, 0]"), 1);
	assert_int_equal(eq("{\"a\": 1, \"b\": 2}", "{\"b\": 2, \"a\": 1.0}"), 1);
	assert_int_equal(eq("{\"a\": 1}", "{\"a\": 1, \"b\": 2}"), 0);
	assert_int_equal(eq("{\"a\": 1, \"a\": 2}", "{\"a\": 2}"), 1); /* the last key wins */
	assert_int_equal(eq("{\"a\": 1, \"a\": 2}", "{\"a\": 1}"), 0);
	assert_int_equal(eq("{\"ab\": 1, \"a\": 2}", "{\"a\": 2, \"ab\": 1}"), 1);
	assert_int_equal(eq(" [ ] \n", "[]"), 1);
}

static void test_syntax(void **state)
{
	char err[128];

	assert_int_equal(eq("[1,", "[1]"), -EINVAL);
	assert_int_equal(eq("01", "1"), -EINVAL);
	assert_int_equal(eq("1 2", "1"), -EINVAL);
	assert_int_equal(eq("'a'", "\"a\""), -EINVAL);
	assert_int_equal(eq("\"a\nb\"", "\"a\""), -EINVAL); /* a raw control character */
	assert_int_equal(eq("", "1"), -EINVAL);
	assert_int_equal(py_json_check("[1, }", 5, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "at byte 4: expected a value");
	assert_int_equal(py_json_check("{\"a\" 1}", 7, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "at byte 5: expected ':' after an object key");
}

static bool judge(const char *out, const char *want, char *why)
{
	struct verify_case tc = { .output = (char *)want,
				  .output_len = strlen(want),
				  .fn_name = "f" };

	return verify_judge(SG_GRADER_LCB, &tc, out, strlen(out), why, 128);
}

static void test_judge(void **state)
{
	char why[128];

	assert_true(judge(VERIFY_HARNESS_MARK "[1, 2]\n", "[1,2]", why));
	assert_false(judge(VERIFY_HARNESS_MARK "[1, 3]\n", "[1,2]", why));
	assert_string_equal(why, "returned value differs");
	assert_false(judge(VERIFY_HARNESS_MARK "!set\n", "[1,2]", why));
	assert_string_equal(why, "returned a set, which equals no JSON value");
	assert_false(judge("[1, 2]\n", "[1,2]", why)); /* no mark: the harness never reported */
	assert_string_equal(why,
			    "no report from the harness: the program ended the process itself");
}

/* n levels of arrays, as json.dumps() writes them: "[[[...]]]". */
static char *nested(int n)
{
	char *s = malloc(2 * (size_t)n + 1);

	assert_non_null(s);
	memset(s, '[', n);
	memset(s + n, ']', n);
	s[2 * n] = '\0';
	return s;
}

struct deep_args {
	int at_max, past_max, judged;
	char err[128];
};

static void *deep_on_worker(void *arg_)
{
	struct deep_args *a = arg_;
	char *max = nested(PY_JSON_DEPTH_MAX), *past = nested(PY_JSON_DEPTH_MAX + 1);
	char *report = malloc(strlen(VERIFY_HARNESS_MARK) + strlen(max) + 2);
	char why[128];

	a->at_max = eq(max, max);
	a->past_max = py_json_check(past, strlen(past), a->err, sizeof(a->err));
	sprintf(report, "%s%s\n", VERIFY_HARNESS_MARK, max);
	a->judged = judge(report, max, why);
	free(report);
	free(max);
	free(past);
	return NULL;
}

/* The deepest value is parsed, compared and freed on a stack the size of a
 * serve worker's, where the judge runs: with a bound of 10,000 a 5,000-deep
 * expected output overflowed it. One level deeper is refused. (ASan's
 * frames are several times larger: its build gets more stack.) */
static void test_depth_fits_a_worker(void **state)
{
	struct deep_args a = { 0 };
	size_t stack = SG_SERVE_WORKER_STACK;
	pthread_attr_t attr;
	pthread_t t;

#if defined(__SANITIZE_ADDRESS__)
	stack *= 8;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	stack *= 8;
#endif
#endif
	(void)state;
	assert_int_equal(pthread_attr_init(&attr), 0);
	assert_int_equal(pthread_attr_setstacksize(&attr, stack), 0);
	assert_int_equal(pthread_create(&t, &attr, deep_on_worker, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_attr_destroy(&attr);
	assert_int_equal(a.at_max, 1);
	assert_true(a.judged);
	assert_int_equal(a.past_max, -EINVAL);
	assert_non_null(strstr(a.err, "nested too deeply"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_containers),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_judge),
		cmocka_unit_test(test_depth_fits_a_worker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
