/* The schema gate: every bad shape gets tenant_bad_output with its exact
 * detail, good shapes pass with the exact values, and the batch stats. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "judge/scores.h"

static void expect_bad(const char *out, size_t n, const char *want)
{
	char detail[SCORES_DETAIL_MAX];
	double *s = (double *)1;

	assert_int_equal(scores_parse(out, strlen(out), n, &s, detail, sizeof(detail)), -EBADMSG);
	assert_null(s);
	assert_string_equal(detail, want);
}

static double *expect_ok(const char *out, size_t n)
{
	char detail[SCORES_DETAIL_MAX] = "x";
	double *s = NULL;

	assert_int_equal(scores_parse(out, strlen(out), n, &s, detail, sizeof(detail)), 0);
	assert_string_equal(detail, "");
	return s;
}

static void test_good(void **state)
{
	double *s = expect_ok("[0.5, 1, -2.25e1, 0, -0.0, 1E-3]", 6);

	assert_true(s[0] == 0.5 && s[1] == 1 && s[2] == -22.5 && s[3] == 0 && s[4] == 0 &&
		    s[5] == 0.001);
	free(s);
	s = expect_ok(" \n\t[1,2,3]\r\n ", 3); /* surrounding JSON whitespace */
	assert_true(s[2] == 3);
	free(s);
	s = expect_ok("[ 1 , 2 ]", 2);
	free(s);
	s = expect_ok("[1e-400]", 1); /* underflow rounds to 0: finite */
	assert_true(s[0] == 0);
	free(s);
	s = expect_ok("[1.7976931348623157e308]", 1); /* DBL_MAX is finite */
	assert_true(isfinite(s[0]));
	free(s);
	s = expect_ok("[]", 0);
	assert_null(s);
}

static void test_non_finite(void **state)
{
	expect_bad("[0.1, NaN, 0.3]", 3, "score at index 1 is NaN, not a finite number");
	expect_bad("[nan]", 1, "score at index 0 is NaN, not a finite number");
	expect_bad("[-nan]", 1, "score at index 0 is NaN, not a finite number");
	expect_bad("[Infinity]", 1, "score at index 0 is Infinity, not a finite number");
	expect_bad("[1, -Infinity]", 2, "score at index 1 is -Infinity, not a finite number");
	expect_bad("[inf]", 1, "score at index 0 is inf, not a finite number");
	expect_bad("[1e309]", 1,
		   "score at index 0 (1e309) overflows a double: not a finite number");
	expect_bad("[-1e309]", 1,
		   "score at index 0 (-1e309) overflows a double: not a finite number");
	expect_bad(
		"[1, 2, 99999999999999999999999999999999999999e999]", 3,
		"score at index 2 (99999999999999999999999999999999...) overflows a double: not a finite number");
}

static void test_wrong_types(void **state)
{
	expect_bad("[\"0.5\"]", 1, "score at index 0 is a string, not a number");
	expect_bad("[[0.5]]", 1, "score at index 0 is an array: nested values are not allowed");
	expect_bad("[1, {\"s\": 1}]", 2,
		   "score at index 1 is an object: nested values are not allowed");
	expect_bad("[null]", 1, "score at index 0 is null, not a number");
	expect_bad("[true]", 1, "score at index 0 is a boolean (true), not a number");
	expect_bad("[0, false]", 2, "score at index 1 is a boolean (false), not a number");
	expect_bad("[None]", 1, "score at index 0: invalid token 'None' at byte 1");
}

static void test_wrong_length(void **state)
{
	expect_bad("[0.5]", 3, "expected 3 scores, got 1");
	expect_bad("[1, 2, 3, 4]", 3, "expected 3 scores, got 4");
	expect_bad("[]", 2, "expected 2 scores, got 0");
}

static void test_garbage(void **state)
{
	expect_bad("[0.1, 0.2, 0.3] extra", 3,
		   "trailing garbage after the array at byte 16: 'extra'");
	expect_bad("[1][2]", 1, "trailing garbage after the array at byte 3: '[2]'");
	expect_bad("[1]\n[1]\n", 1, "trailing garbage after the array at byte 4: '[1]?'");
}

static void test_garbage_nul(void **state)
{
	char detail[SCORES_DETAIL_MAX];
	double *s;

	/* strlen-based helpers cannot carry a NUL: pass the length. */
	assert_int_equal(scores_parse("[1]\0", 4, 1, &s, detail, sizeof(detail)), -EBADMSG);
	assert_string_equal(detail, "trailing garbage after the array at byte 3: '?'");
	assert_int_equal(scores_parse("[1,\0 2]", 7, 2, &s, detail, sizeof(detail)), -EBADMSG);
	assert_string_equal(detail, "expected a score at index 1, got byte 0x00 at byte 3");
}

static void test_empty_and_top_level(void **state)
{
	expect_bad("", 1, "empty output");
	expect_bad(" \n\n", 1, "empty output");
	expect_bad("{\"scores\": [1]}", 1,
		   "expected a JSON array of 1 numbers, got an object at byte 0");
	expect_bad("0.5", 1, "expected a JSON array of 1 numbers, got a number at byte 0");
	expect_bad("\"[1]\"", 1, "expected a JSON array of 1 numbers, got a string at byte 0");
	expect_bad("Traceback (most recent call last):", 1,
		   "expected a JSON array of 1 numbers, got 'Traceback' at byte 0");
	expect_bad("\x01[1]", 1, "expected a JSON array of 1 numbers, got byte 0x01 at byte 0");
}

static void test_malformed(void **state)
{
	expect_bad("[1, 2", 2, "unterminated array: output ended after 2 scores");
	expect_bad("[1,", 2, "unterminated array: output ended after 1 scores");
	expect_bad("[", 1, "unterminated array: output ended after 0 scores");
	expect_bad("[1 2]", 2, "expected ',' or ']' after score at index 0, got '2' at byte 3");
	expect_bad("[1,]", 1, "trailing comma after score at index 0 (byte 3)");
	expect_bad("[,1]", 1, "expected a score at index 0, got ',' at byte 1");
	expect_bad("[01]", 1, "score at index 0: invalid number '01' at byte 1");
	expect_bad("[1.]", 1, "score at index 0: invalid number '1.' at byte 1");
	expect_bad("[.5]", 1, "expected a score at index 0, got '.' at byte 1");
	expect_bad("[+1]", 1, "expected a score at index 0, got '+' at byte 1");
	expect_bad("[1e]", 1, "score at index 0: invalid number '1e' at byte 1");
	expect_bad("[0x10]", 1, "score at index 0: invalid number '0x10' at byte 1");
	expect_bad("[-]", 1, "score at index 0: invalid number '-' at byte 1");
	expect_bad("[1.5.3]", 1, "score at index 0: invalid number '1.5.3' at byte 1");
	expect_bad("['a']", 1, "expected a score at index 0, got byte 0x27 at byte 1");
}

static void test_first_problem_wins(void **state)
{
	/* The element problem is reported before the length. */
	expect_bad("[NaN]", 3, "score at index 0 is NaN, not a finite number");
}

static void test_long_number(void **state)
{
	size_t n = 1 << 20;
	char *buf = malloc(n + 8), detail[SCORES_DETAIL_MAX];
	double *s;

	buf[0] = '[';
	buf[1] = '0';
	buf[2] = '.';
	memset(buf + 3, '5', n);
	buf[n + 3] = ']';
	assert_int_equal(scores_parse(buf, n + 4, 1, &s, detail, sizeof(detail)), 0);
	assert_true(fabs(s[0] - 5.0 / 9.0) < 1e-12);
	free(s);
	free(buf);
}

static void test_stats(void **state)
{
	struct score_stats st;
	double a[] = { 1, 2, 3, 4 }, c[] = { 0.5, 0.5, 0.5 }, one[] = { 7 },
	       big[] = { -1e308, 1e308 };

	scores_stats(a, 4, &st);
	assert_int_equal(st.n, 4);
	assert_true(st.mean == 2.5);
	assert_true(fabs(st.variance - 1.25) < 1e-12);
	assert_false(st.constant);
	scores_stats(c, 3, &st);
	assert_true(st.constant);
	assert_true(st.mean == 0.5 && st.variance == 0);
	scores_stats(one, 1, &st);
	assert_false(st.constant); /* one score carries no spread to judge */
	assert_true(st.mean == 7);
	scores_stats(big, 2, &st);
	assert_true(st.mean == 0);
	assert_true(isinf(st.variance)); /* 1e616 does not fit: reported as overflow */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_non_finite),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_wrong_length),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_garbage_nul),
		cmocka_unit_test(test_empty_and_top_level),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_first_problem_wins),
		cmocka_unit_test(test_long_number),
		cmocka_unit_test(test_stats),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
