/* The LiveCodeBench comparison: what is normalized (whitespace, line
 * endings, trailing blank lines), what is not (inner blank lines, line
 * order), and the Decimal token fallback. Expected verdicts are Python's
 * (grade_stdio + decimal.Decimal). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "judge/lcb.h"

static bool match(const char *got, const char *want)
{
	return lcb_match(got, strlen(got), want, strlen(want), NULL, 0);
}

static void expect_mismatch(const char *got, const char *want, const char *why)
{
	char buf[128];

	assert_false(lcb_match(got, strlen(got), want, strlen(want), buf, sizeof(buf)));
	assert_string_equal(buf, why);
}

static bool dec(const char *a, const char *b)
{
	return lcb_decimal_equal(a, strlen(a), b, strlen(b));
}

static void test_exact_and_whitespace(void **state)
{
	assert_true(match("3\n", "3"));
	assert_true(match("1 2\n3 4\n", "1 2\n3 4"));
	assert_true(match("1 2\r\n3 4\r\n", "1 2\n3 4\n")); /* CRLF */
	assert_true(match("a  \nb\t\n\n\n", "a\nb"));       /* trailing spaces, blank lines */
	assert_true(match("  a\n  b", "a\nb"));             /* leading spaces too (str.strip) */
	assert_true(match("\n\nyes", "yes"));               /* leading blank lines */
	assert_true(match("", ""));
	assert_true(match("\n \n", ""));
	assert_true(match("x\xc2\xa0", "x"));       /* U+00A0 is whitespace to Python */
	assert_true(match("x\xe3\x80\x80\n", "x")); /* U+3000 */
	assert_true(match("a\x0b", "a"));           /* \v */
}

static void test_not_normalized(void **state)
{
	expect_mismatch("a\n\nb", "a\nb", "expected 2 lines, got 3"); /* inner blank line */
	expect_mismatch("b\na", "a\nb", "line 1 differs");
	expect_mismatch("YES", "yes", "line 1 differs");
	expect_mismatch("1 2 3", "1 2", "line 1 differs");
	expect_mismatch("", "0", "line 1 differs");
	expect_mismatch("a\rb", "a\nb", "expected 2 lines, got 1"); /* a lone CR splits nothing */
	expect_mismatch("x\ny\nz", "x\ny\nw", "line 3 differs");
	assert_false(match("a b", "a  b")); /* inner spacing: not numbers, and the bytes differ */
}

static void test_numbers(void **state)
{
	assert_true(match("1.50\n", "1.5"));
	assert_true(match("1e2 3", "100 3.0"));
	assert_true(match("-0", "0"));
	assert_true(match("0.1  0.2", "0.1 0.2")); /* numbers: inner spacing no longer matters */
	assert_true(match("Inf", "Infinity"));
	assert_true(match("-inf", "-Infinity"));
}

static void test_decimal(void **state)
{
	assert_true(dec("1", "1.0"));
	assert_true(dec("1.50", "1.5"));
	assert_true(dec("100", "1e2"));
	assert_true(dec("100", "1E+2"));
	assert_true(dec("0.001", "1e-3"));
	assert_true(dec(".5", "0.5"));
	assert_true(dec("1.", "1"));
	assert_true(dec("+3", "3"));
	assert_true(dec("-0", "0"));
	assert_true(dec("0e5", "0.000"));
	assert_true(dec("1_000", "1000")); /* Decimal ignores underscores */
	assert_true(dec("007", "7"));
	assert_true(dec("1e0000000000000000000000005", "100000"));
	assert_true(dec("inf", "Infinity"));
	assert_true(dec("-INF", "-infinity"));
	assert_false(dec("inf", "-inf"));
	assert_false(dec("NaN", "NaN")); /* NaN != NaN */
	assert_false(dec("sNaN", "sNaN"));
	assert_false(dec("nan1", "nan1"));
	assert_false(dec("1", "2"));
	assert_false(dec("1", "-1"));
	assert_false(dec("0.1", "0.10000000000000001")); /* exact, not float equality */
	assert_false(dec("50000000000000000", "50000000000000001"));
	assert_false(dec("1e", "1"));
	assert_false(dec("e5", "e5"));
	assert_false(dec("0x10", "16"));
	assert_false(dec("abc", "abc"));
	assert_false(dec("1e1000000000000000000", "1e1000000000000000000")); /* beyond the limit */
	assert_false(dec("", "0"));
	assert_false(dec(".", "0"));
	assert_false(dec("1.2.3", "1.2.3"));
}

static void test_nan_lines(void **state)
{
	/* Byte-equal lines match before any number parsing, NaN included
	 * (Python compares the stripped strings first). */
	assert_true(match("NaN", "NaN"));
	expect_mismatch("NaN", "nan", "line 1 differs");
	expect_mismatch("1 NaN", "1.0 NaN", "line 1 differs");
}

static void test_lengths_with_nul(void **state)
{
	/* Binary-safe: a NUL is an ordinary byte. */
	assert_true(lcb_match("a\0b\n", 4, "a\0b", 3, NULL, 0));
	assert_false(lcb_match("a\0b", 3, "a\0c", 3, NULL, 0));
	/* Decimal("5\x00junk") raises in Python: no number, not equal to 5.
	 * The parse stopped at the NUL and read "5". */
	assert_false(lcb_decimal_equal("5\0junk", 6, "5", 1));
	assert_false(lcb_decimal_equal("5", 1, "5.0\0", 4));
	assert_false(lcb_match("5\0junk\n", 8, "5", 1, NULL, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_and_whitespace),
		cmocka_unit_test(test_not_normalized),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_decimal),
		cmocka_unit_test(test_nan_lines),
		cmocka_unit_test(test_lengths_with_nul),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
