/* The nesting and value count of a JSON text before it is parsed
 * (src/lib/json_shape.h): what serve checks a request body against. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/json_shape.h"

static struct json_shape shape_of(const char *text)
{
	struct json_shape s;

	json_shape(text, strlen(text), &s);
	return s;
}

static void test_counts(void **state)
{
	struct json_shape s;

	(void)state;
	s = shape_of("1.5e3");
	assert_int_equal(s.depth, 0);
	assert_int_equal(s.values, 1);
	/* [ [ 1 2 ] { "a" "b" } null true -Infinity */
	s = shape_of("[[1, 2], {\"a\": \"b\"}, null, true, -Infinity]");
	assert_int_equal(s.depth, 2);
	assert_int_equal(s.values, 10);
	s = shape_of(" { \"k\" : [ ] , \"l\":{}} ");
	assert_int_equal(s.depth, 2);
	assert_int_equal(s.values, 5);
}

/* Brackets, quotes and backslashes inside strings are the string's. */
static void test_strings(void **state)
{
	struct json_shape s;

	(void)state;
	s = shape_of("[\"[[[{\", \"\\\"]]\\\\\", \"\\u005b\"]");
	assert_int_equal(s.depth, 1);
	assert_int_equal(s.values, 4);
}

/* A truncated or malformed text gets a shape, and nothing past its end is
 * read (under ASan a read past the buffer would fail the test). */
static void test_malformed(void **state)
{
	static const char *const texts[] = { "\"abc\\", "[\"a", "[[[", "]]]{", "tru", "\\" };

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		size_t n = strlen(texts[i]);
		char *exact = malloc(n); /* no NUL after it */
		struct json_shape s;

		assert_non_null(exact);
		memcpy(exact, texts[i], n);
		json_shape(exact, n, &s);
		free(exact);
	}
	assert_int_equal(shape_of("[[[").depth, 3);
	assert_int_equal(shape_of("]]]{").depth, 1);
}

/* Depth is counted without recursion: a million levels. */
static void test_deep(void **state)
{
	size_t n = 1000000;
	char *text = malloc(2 * n);
	struct json_shape s;

	(void)state;
	assert_non_null(text);
	memset(text, '[', n);
	memset(text + n, ']', n);
	json_shape(text, 2 * n, &s);
	free(text);
	assert_int_equal(s.depth, n);
	assert_int_equal(s.values, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_deep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
