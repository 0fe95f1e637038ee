/* Verifier mode for a compiled language (src/exec/verify_compile.c) over a
 * fake sandbox: the program built once and handed to every test
 * read-only and mappable, a compile error the one verdict (booked once,
 * the compiler's message kept), a compile's platform error retried and
 * otherwise the request's, a program over the output cap the program's
 * fault, and an interpreted language's source handed in as is. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tmp_dir.h"
#include "exec/exec.h"
#include "exec/verify_compile.h"
#include "journal_lines.h"

#define PROGRAM "ELF-PROGRAM"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int compiles, tests_run, wrong_handoff, flaky_left;

static bool compile_run(const struct sandbox_spec *spec)
{
	return !strcmp(spec->argv[0], "/usr/bin/g++");
}

/* The compiler: its source says how it goes. */
static int fake_compile(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	const char *src = spec->files[0].data;
	bool flaky;

	pthread_mutex_lock(&lock);
	compiles++;
	flaky = strstr(src, "flaky") && flaky_left > 0 && flaky_left--;
	pthread_mutex_unlock(&lock);
	if (flaky || strstr(src, "platform")) {
		snprintf(r->detail, sizeof(r->detail), "cgroup: cannot create");
		return -EIO;
	}
	if (strstr(src, "broken")) {
		r->end = SB_EXITED;
		r->exit_code = 1;
		r->err = strdup("main.cpp:1:1: error: 'broken' was not declared");
		r->err_len = strlen(r->err);
		return 0;
	}
	r->end = SB_EXITED;
	r->fetched = calloc(1, sizeof(*r->fetched));
	r->n_fetched = 1;
	r->fetched[0].path = strdup(spec->fetch[0]);
	r->fetched[0].truncated = strstr(src, "huge") != NULL;
	r->fetched[0].data = r->fetched[0].truncated ? NULL : strdup(PROGRAM);
	r->fetched[0].len = r->fetched[0].data ? strlen(PROGRAM) : 0;
	return 0;
}

/* A test: the program (or the source) must be in its scratch, read-only. */
static int fake_run(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	char in[64];
	int a = 0, b = 0;
	bool interpreted = !strcmp(spec->argv[0], "/usr/bin/node");
	const struct sandbox_file *f = spec->n_files == 1 ? &spec->files[0] : NULL;

	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "fake");
	if (compile_run(spec))
		return fake_compile(spec, r);
	pthread_mutex_lock(&lock);
	tests_run++;
	if (!f || !spec->cold ||
	    (interpreted
		     ? strcmp(f->path, "main.js") || f->mode != 0444 || spec->allow_exec_in_scratch
		     : strcmp(f->path, "main") || f->mode != 0555 || f->len != strlen(PROGRAM) ||
			       memcmp(f->data, PROGRAM, f->len) || !spec->allow_exec_in_scratch))
		wrong_handoff++;
	pthread_mutex_unlock(&lock);
	snprintf(in, sizeof(in), "%.*s", (int)spec->stdin_len, (const char *)spec->stdin_data);
	sscanf(in, "%d %d", &a, &b);
	r->end = SB_EXITED;
	if (asprintf(&r->out, "%d\n", a + b) < 0)
		r->out = NULL;
	r->out_len = r->out ? strlen(r->out) : 0;
	return 0;
}

static char tmp[64];
static struct sg_policy policy;
static struct exec_ctx ctx;
static char *const run_argv[] = { "/lib64/ld-linux-x86-64.so.2", "./main", NULL };
static char *const node_argv[] = { "/usr/bin/node", "main.js", NULL };
static char *const compile_argv[] = { "/usr/bin/g++", "-O2", "-o", "main", "main.cpp", NULL };
static struct sandbox_file source = { .path = "main.cpp", .mode = 0444 };
static struct exec_build build = { .compile = compile_argv,
				   .files = &source,
				   .n_files = 1,
				   .artifact = "main",
				   .artifact_mode = 0555,
				   .timeout_ms = 5000 };
static const char two_tests[] = "[{\"input\": \"1 2\", \"output\": \"3\"}, "
				"{\"input\": \"40 2\", \"output\": \"42\"}]";

static int setup(void **state)
{
	(void)state;
	tmp_dir_executor(tmp, sizeof(tmp), "vcompile");
	policy_defaults(&policy);
	policy.limits.timeout_ms = 6000;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tmp_dir_remove(tmp);
	return 0;
}

/* Verify `code` against two tests; the journal's lines in *lines. */
static void verify(const char *code, struct exec_result *res, json_t **lines)
{
	struct verify_cases c;
	char err[256];

	compiles = tests_run = wrong_handoff = 0;
	source.data = code;
	source.len = strlen(code);
	ctx = (struct exec_ctx){ .policy = &policy,
				 .tenant = "coder",
				 .argv = run_argv,
				 .run = fake_run,
				 .build = &build };
	assert_int_equal(
		verify_cases_parse(two_tests, strlen(two_tests), "tests", &c, err, sizeof(err)), 0);
	journal_clear();
	assert_int_equal(exec_verify(&ctx, "vc", &c, res), 0);
	*lines = journal_lines();
	verify_cases_free(&c);
}

static void test_built_once(void **state)
{
	struct exec_result res;
	json_t *lines, *compile;

	(void)state;
	verify("int main() {}", &res, &lines);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.reward, 1);
	assert_int_equal(compiles, 1);
	assert_int_equal(tests_run, 2);
	assert_int_equal(wrong_handoff, 0);
	assert_int_equal(res.attempts, 3);
	assert_non_null(res.compile);
	assert_int_equal(res.compile->program_bytes, strlen(PROGRAM));
	/* the compile, two tests, the request */
	assert_int_equal(json_array_size(lines), 4);
	compile = json_array_get(lines, 0);
	assert_string_equal(json_string_value(json_object_get(compile, "detail")), "compile");
	assert_true(json_is_null(json_object_get(compile, "test")));
	assert_false(json_is_true(json_object_get(compile, "final")));
	json_decref(lines);
	exec_result_free(&res);
}

static void test_compile_error_is_the_verdict(void **state)
{
	struct exec_result res;
	json_t *lines, *j, *final;

	(void)state;
	verify("broken", &res, &lines);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.reward, 0);
	assert_int_equal(compiles, 1);
	assert_int_equal(tests_run, 0);
	assert_int_equal(res.n_tests, 0);
	assert_non_null(strstr(res.detail, "compile error: exited with code 1: main.cpp:1:1"));
	assert_non_null(res.err);
	assert_non_null(strstr(res.err, "'broken' was not declared"));
	j = exec_result_json("coder", &res);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "compile"), "status")),
		"error");
	json_decref(j);
	/* the compile's run, then the request's one verdict */
	assert_int_equal(json_array_size(lines), 2);
	final = json_array_get(lines, 1);
	assert_true(json_is_true(json_object_get(final, "final")));
	assert_true(json_real_value(json_object_get(final, "score_mean")) == 0.0);
	json_decref(lines);
	exec_result_free(&res);
}

static void test_compile_platform_errors(void **state)
{
	struct exec_result res;
	json_t *lines;

	(void)state;
	flaky_left = 1; /* once: retried, then built */
	verify("flaky", &res, &lines);
	assert_int_equal(res.reward, 1);
	assert_int_equal(compiles, 2);
	json_decref(lines);
	exec_result_free(&res);

	verify("platform", &res, &lines); /* every time: the request's */
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_int_equal(res.reward, -1);
	assert_int_equal(compiles, 1 + (int)policy.max_retries);
	assert_int_equal(tests_run, 0);
	json_decref(lines);
	exec_result_free(&res);
}

static void test_program_over_the_cap(void **state)
{
	struct exec_result res;
	json_t *lines;

	(void)state;
	verify("huge", &res, &lines);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.reward, 0);
	assert_int_equal(tests_run, 0);
	assert_non_null(strstr(res.detail, "larger than the policy's output cap"));
	json_decref(lines);
	exec_result_free(&res);
}

static void test_interpreted_source(void **state)
{
	static struct sandbox_file js = { .path = "main.js", .data = "x", .len = 1, .mode = 0444 };
	struct exec_build node = {
		.files = &js, .n_files = 1, .artifact = "main.js", .artifact_mode = 0444
	};
	struct verify_cases c;
	struct exec_result res;
	char err[256];

	(void)state;
	compiles = tests_run = wrong_handoff = 0;
	ctx = (struct exec_ctx){ .policy = &policy,
				 .tenant = "coder",
				 .argv = node_argv,
				 .run = fake_run,
				 .build = &node };
	assert_int_equal(
		verify_cases_parse(two_tests, strlen(two_tests), "tests", &c, err, sizeof(err)), 0);
	assert_int_equal(exec_verify(&ctx, "vn", &c, &res), 0);
	assert_int_equal(res.reward, 1);
	assert_int_equal(compiles, 0);
	assert_int_equal(tests_run, 2);
	assert_int_equal(wrong_handoff, 0);
	assert_null(res.compile);
	verify_cases_free(&c);
	exec_result_free(&res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_built_once),
		cmocka_unit_test(test_compile_error_is_the_verdict),
		cmocka_unit_test(test_compile_platform_errors),
		cmocka_unit_test(test_program_over_the_cap),
		cmocka_unit_test(test_interpreted_source),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
