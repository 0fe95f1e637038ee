/* The executor's inputs: every malformed batch or test file gets an exact
 * message (a usage error, never booked), and a valid batch reaches the
 * reward program untouched, extra fields included. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "exec/exec.h"

static void expect_batch_error(const char *text, const char *want)
{
	struct exec_batch b;
	char err[512];

	assert_int_equal(exec_batch_parse(text, strlen(text), "b.json", &b, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, want);
}

static void test_batch_parse(void **state)
{
	expect_batch_error("", "b.json:1:0: invalid JSON: '[' or '{' expected near end of file");
	expect_batch_error("{\"batch_id\": \"x\",}",
			   "b.json:1:18: invalid JSON: string or '}' expected near '}'");
	expect_batch_error(
		"[]",
		"b.json: expected a batch object {\"batch_id\": ..., \"items\": [...]}, got an array");
	expect_batch_error("{\"items\": []}", "b.json: missing \"batch_id\"");
	expect_batch_error("{\"batch_id\": 7, \"items\": []}",
			   "b.json: \"batch_id\" must be a string, got a number");
	expect_batch_error("{\"batch_id\": \"\", \"items\": []}",
			   "b.json: \"batch_id\" must be 1 to 127 bytes long, got 0");
	expect_batch_error("{\"batch_id\": \"x\"}", "b.json: missing \"items\"");
	expect_batch_error("{\"batch_id\": \"x\", \"items\": {}}",
			   "b.json: \"items\" must be an array, got an object");
	expect_batch_error("{\"batch_id\": \"x\", \"items\": []}",
			   "b.json: \"items\" is empty: a batch needs at least one item");
	expect_batch_error("{\"batch_id\": \"x\", \"items\": [1]}",
			   "b.json: items[0] must be an object, got a number");
	expect_batch_error("{\"batch_id\": \"x\", \"items\": [{\"prompt\": \"p\"}]}",
			   "b.json: items[0] has no \"completion\"");
	expect_batch_error(
		"{\"batch_id\": \"x\", \"items\": [{\"prompt\": \"p\", \"completion\": \"c\"}, {\"prompt\": null, \"completion\": \"c\"}]}",
		"b.json: items[1].prompt must be a string, got null");
	expect_batch_error("{\"batch_id\": \"x\", \"batch_id\": \"y\", \"items\": []}",
			   "b.json:1:28: invalid JSON: duplicate object key near '\"batch_id\"'");

	struct exec_batch b;
	char err[256];
	const char *extra =
		"{\"batch_id\": \"x\", \"items\": [{\"prompt\": \"p\", \"completion\": \"c\", \"answer\": 4}], \"meta\": 1}";
	assert_int_equal(exec_batch_parse(extra, strlen(extra), "b.json", &b, err, sizeof(err)), 0);
	assert_int_equal(b.n_items, 1);
	assert_ptr_equal(b.json, extra); /* extra fields go to the program untouched */
	exec_batch_free(&b);
}

static void test_verify_parse(void **state)
{
	struct verify_cases c;
	char err[256];
	const char *ok =
		"[{\"input\": \"1 2\\n\", \"output\": \"3\\n\"}, {\"input\": \"\", \"output\": \"\"}]";

	assert_int_equal(verify_cases_parse(ok, strlen(ok), "t.json", &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.v[0].input, "1 2\n");
	assert_int_equal(c.v[1].output_len, 0);
	verify_cases_free(&c);
	assert_int_equal(verify_cases_parse("[]", 2, "t.json", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "t.json: no tests: the array is empty");
	assert_int_equal(verify_cases_parse("{}", 2, "t.json", &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "t.json: \"inputs\" must be an array of strings");
	/* LiveCodeBench's input_output object, as verl and SandboxFusion read it. */
	const char *in_outs = "{\"inputs\": [\"1\\n2\", \"3\\n4\"], \"outputs\": [\"3\", \"7\"], "
			      "\"fn_name\": \"add\"}";
	assert_int_equal(
		verify_cases_parse(in_outs, strlen(in_outs), "t.json", &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.v[1].input, "3\n4");
	assert_string_equal(c.v[1].output, "7");
	assert_string_equal(c.v[1].fn_name, "add");
	verify_cases_free(&c);
	in_outs = "{\"inputs\": [\"1\"], \"outputs\": [], \"fn_name\": null}";
	assert_int_equal(verify_cases_parse(in_outs, strlen(in_outs), "t.json", &c, err,
					    sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "t.json: 1 inputs but 0 outputs");
	in_outs = "{\"input\": \"1\"}";
	assert_int_equal(verify_cases_parse(in_outs, strlen(in_outs), "t.json", &c, err,
					    sizeof(err)),
			 -EINVAL);
	assert_string_equal(err,
			    "t.json: unknown key \"input\" (tests are an array [{\"input\", "
			    "\"output\"}] or an object {\"inputs\", \"outputs\", \"fn_name\"})");
	const char *bad =
		"[{\"input\": \"1\", \"output\": \"1\"}, {\"input\": \"1\", \"output\": 1}]";
	assert_int_equal(verify_cases_parse(bad, strlen(bad), "t.json", &c, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "t.json: tests[1].output must be a string, got a number");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_parse),
		cmocka_unit_test(test_verify_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
