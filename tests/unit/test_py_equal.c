/* Python's == over json.loads() values (src/exec/py_equal.h) and the
 * verifier's judgement of a harness report (src/exec/verify_judge.h).
 * Every expected verdict is what Python 3.11 gives for
 * json.loads(a) == json.loads(b). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "judge/py_equal.h"
#include "exec/verify_judge.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers), cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_strings), cmocka_unit_test(test_containers),
		cmocka_unit_test(test_syntax),  cmocka_unit_test(test_judge),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
