/* Verifier mode and run-once over a fake sandbox that "runs" a program
 * chosen by its stdin: statuses per test, reward 1 iff all pass, platform
 * errors retried and otherwise fatal to the request, parallel runs within
 * the tenant's concurrency, and run-once's limits and outputs. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "tmp_dir.h"
#include "exec/exec.h"
#include "journal_lines.h"
#include "node/tenant_state.h"
#include "lib/clock.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int running, max_running, runs, flaky_left;
static uint64_t seen_memory_mb, seen_timeout;
static size_t seen_files, seen_fetch;

/* The "program" adds two numbers; some inputs misbehave instead. */
static int fake_run(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	char in[256];
	int a = 0, b = 0, rc = 0;

	snprintf(in, sizeof(in), "%.*s", (int)spec->stdin_len, (const char *)spec->stdin_data);
	pthread_mutex_lock(&lock);
	runs++;
	if (++running > max_running)
		max_running = running;
	seen_memory_mb = spec->policy->limits.memory_mb;
	seen_timeout = spec->timeout_ms;
	seen_files = spec->n_files;
	seen_fetch = spec->n_fetch;
	if (!strcmp(in, "flaky-platform") && flaky_left > 0) {
		flaky_left--;
		rc = -EIO;
	}
	pthread_mutex_unlock(&lock);
	usleep(20000); /* overlap with the other workers */
	/* A run that outlasts its caller's start_by, however slow the node
	 * (a sanitizer build under load) was to start it. */
	while (!strcmp(in, "platform-late") && clock_ms(CLOCK_MONOTONIC) < spec->start_by_ms)
		usleep(1000);
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "fake");
	r->wall_ms = 20;
	r->err = strdup("");
	r->err_len = 0;
	if (rc) {
		snprintf(r->detail, sizeof(r->detail), "cgroup: cannot create");
	} else if (!strcmp(in, "platform") || !strcmp(in, "platform-late")) {
		snprintf(r->detail, sizeof(r->detail), "fork: Resource temporarily unavailable");
		rc = -EAGAIN;
	} else if (!strcmp(in, "hang")) {
		r->end = SB_TIMEOUT;
	} else if (!strcmp(in, "abort")) {
		r->end = SB_SIGNALED;
		r->signal = 6;
		free(r->err);
		r->err = strdup("Traceback: boom");
		r->err_len = strlen(r->err);
	} else if (!strcmp(in, "hog")) {
		r->end = SB_OOM;
	} else if (!strcmp(in, "connect")) {
		r->end = SB_KILLED_BY_AGENT;
		r->rule = 0;
	} else if (!strcmp(in, "huge")) {
		r->end = SB_OUTPUT_OVERSIZE;
	} else {
		sscanf(in, "%d %d", &a, &b);
		r->end = SB_EXITED;
		if (asprintf(&r->out, "%d\r\n\n", !strcmp(in, "flaky-platform") ? 7 : a + b) < 0)
			r->out = NULL;
		r->out_len = r->out ? strlen(r->out) : 0;
	}
	pthread_mutex_lock(&lock);
	running--;
	pthread_mutex_unlock(&lock);
	return rc;
}

static char tmp[64];
static struct sg_policy policy;
static struct exec_ctx ctx;
static char *const argv_[] = { "/usr/bin/python3", "solution.py", NULL };

static int setup(void **state)
{
	tmp_dir_executor(tmp, sizeof(tmp), "verify");
	policy_defaults(&policy);
	policy.limits.timeout_ms = 6000;
	ctx = (struct exec_ctx){
		.policy = &policy, .tenant = "coder", .argv = argv_, .run = fake_run
	};
	return 0;
}

static int teardown(void **state)
{
	tmp_dir_remove(tmp);
	return 0;
}

static void load(struct verify_cases *c, const char *json)
{
	char err[256];

	assert_int_equal(verify_cases_parse(json, strlen(json), "tests", c, err, sizeof(err)), 0);
}

static void test_all_pass(void **state)
{
	struct verify_cases c;
	struct exec_result res;
	json_t *j;

	load(&c,
	     "[{\"input\": \"1 2\", \"output\": \"3\"}, {\"input\": \"2 2\", \"output\": \"4\\n\"},"
	     " {\"input\": \"5 5\", \"output\": \"10.0\"}, {\"input\": \"0 0\", \"output\": \"0\"}]");
	max_running = runs = 0;
	assert_int_equal(exec_verify(&ctx, "v1", &c, &res), 0);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.reward, 1);
	assert_int_equal(res.attempts, 4);
	assert_int_equal(seen_timeout, 6000);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(res.tests[i].status, VERIFY_PASS);
	/* Parallel up to min(concurrency 8, cores, tests), never beyond. */
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	assert_true(max_running >= 1 && max_running <= (cores < 4 ? cores : 4));
	if (cores >= 2)
		assert_true(max_running >= 2);
	j = exec_result_json("coder", &res);
	assert_string_equal(json_string_value(json_object_get(j, "batch_id")), "v1");
	assert_int_equal(json_integer_value(json_object_get(j, "reward")), 1);
	assert_int_equal(json_array_size(json_object_get(j, "tests")), 4);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(j, "tests"), 0), "status")),
			    "pass");
	assert_true(json_real_value(json_array_get(json_object_get(j, "scores"), 0)) == 1.0);
	json_decref(j);
	exec_result_free(&res);
	verify_cases_free(&c);
}

static void test_failures_are_the_verdict(void **state)
{
	struct verify_cases c;
	struct exec_result res;

	load(&c,
	     "[{\"input\": \"1 2\", \"output\": \"3\"}, {\"input\": \"1 1\", \"output\": \"3\"},"
	     " {\"input\": \"hang\", \"output\": \"\"}, {\"input\": \"abort\", \"output\": \"\"},"
	     " {\"input\": \"hog\", \"output\": \"\"}, {\"input\": \"connect\", \"output\": \"\"},"
	     " {\"input\": \"huge\", \"output\": \"\"}]");
	runs = 0;
	exec_verify(&ctx, "v2", &c, &res);
	assert_int_equal(res.cause, SG_CAUSE_OK); /* the verifier worked: reward 0 */
	assert_int_equal(res.reward, 0);
	assert_int_equal(runs, 7); /* no retries of tenant outcomes */
	assert_int_equal(res.tests[0].status, VERIFY_PASS);
	assert_int_equal(res.tests[1].status, VERIFY_FAIL);
	assert_string_equal(res.tests[1].detail, "line 1 differs");
	assert_int_equal(res.tests[2].status, VERIFY_TIMEOUT);
	assert_int_equal(res.tests[3].status, VERIFY_CRASH);
	assert_int_equal(res.tests[4].status, VERIFY_OOM);
	assert_int_equal(res.tests[5].status, VERIFY_VIOLATION);
	assert_int_equal(res.tests[5].rule, 0);
	assert_int_equal(res.tests[6].status, VERIFY_FAIL);
	assert_string_equal(res.detail, "test 1: fail: line 1 differs");
	assert_string_equal(res.err, "Traceback: boom"); /* the first failing test with stderr */
	assert_int_equal(exec_exit_code(res.cause), 0);
	exec_result_free(&res);
	verify_cases_free(&c);
}

static void test_platform_error_fails_request(void **state)
{
	struct verify_cases c;
	struct exec_result res;
	json_t *j;

	load(&c,
	     "[{\"input\": \"1 2\", \"output\": \"3\"}, {\"input\": \"platform\", \"output\": \"\"}]");
	runs = 0;
	exec_verify(&ctx, NULL, &c, &res);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_int_equal(res.reward, -1);
	assert_int_equal(runs, 1 + 3); /* retried up to the budget */
	assert_int_equal(res.tests[1].status, VERIFY_ERROR);
	assert_string_equal(res.detail,
			    "test 1: platform error: fork: Resource temporarily unavailable");
	assert_true(!strncmp(res.batch_id, "verify-", 7)); /* made up */
	assert_int_equal(exec_exit_code(res.cause), 2);
	j = exec_result_json("coder", &res);
	assert_true(json_is_null(json_object_get(j, "reward")));
	assert_true(json_is_null(json_object_get(j, "scores")));
	assert_string_equal(json_string_value(json_object_get(j, "status")), "failed");
	json_decref(j);
	exec_result_free(&res);

	/* A transient platform error is retried and the test still counts. */
	flaky_left = 2;
	runs = 0;
	verify_cases_free(&c);
	load(&c, "[{\"input\": \"flaky-platform\", \"output\": \"7\"}]");
	exec_verify(&ctx, "v3", &c, &res);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.reward, 1);
	assert_int_equal(runs, 3);
	assert_int_equal(res.attempts, 3);
	exec_result_free(&res);
	verify_cases_free(&c);
}

/* A request's platform retries come from one pool of max_retries for all
 * its tests (issue 31): eight tests that each meet a platform error cost
 * 8 + 2 runs, not 8 x 3. */
static void test_platform_retries_bounded_per_request(void **state)
{
	struct verify_cases c;
	struct exec_result res;
	char json[1024] = "[";

	for (int i = 0; i < 8; i++)
		strcat(json, i ? ", {\"input\": \"platform\", \"output\": \"\"}"
			       : "{\"input\": \"platform\", \"output\": \"\"}");
	strcat(json, "]");
	load(&c, json);
	uint32_t was = policy.max_retries;
	policy.max_retries = 2;
	runs = 0;
	exec_verify(&ctx, "pool", &c, &res);
	policy.max_retries = was;
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_int_equal(runs, 8 + 2);
	exec_result_free(&res);
	verify_cases_free(&c);
}

static void test_verify_booking(void **state)
{
	struct verify_cases c;
	struct exec_result res;
	int lines = 0, finals = 0;
	json_t *all, *j;
	size_t i;

	journal_clear();
	load(&c,
	     "[{\"input\": \"1 2\", \"output\": \"3\"}, {\"input\": \"hang\", \"output\": \"\"}]");
	exec_verify(&ctx, "v4", &c, &res);
	all = journal_lines();
	json_array_foreach(all, i, j)
	{
		assert_string_equal(json_string_value(json_object_get(j, "mode")), "verify");
		assert_string_equal(json_string_value(json_object_get(j, "batch_id")), "v4");
		if (json_is_true(json_object_get(j, "final"))) {
			finals++;
			assert_string_equal(json_string_value(json_object_get(j, "cause")), "ok");
			assert_true(json_real_value(json_object_get(j, "score_mean")) == 0.0);
		} else {
			/* A failed test run is the program's verdict, never the tenant's fault. */
			const char *cls = json_string_value(json_object_get(j, "class"));
			assert_true(!strcmp(cls, "none") || !strcmp(cls, "verdict"));
		}
		lines++;
	}
	json_decref(all);
	assert_int_equal(lines, 3); /* two runs, then the request */
	assert_int_equal(finals, 1);
	exec_result_free(&res);
	verify_cases_free(&c);
}

static void test_verify_paused(void **state)
{
	struct verify_cases c;
	struct exec_result res;

	load(&c, "[{\"input\": \"1 2\", \"output\": \"3\"}]");
	assert_int_equal(tenant_pause("coder", "test"), 0);
	runs = 0;
	exec_verify(&ctx, "v5", &c, &res);
	assert_int_equal(runs, 0);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_PAUSED);
	assert_int_equal(res.reward, -1);
	exec_result_free(&res);
	assert_int_equal(tenant_resume("coder"), 0);
	verify_cases_free(&c);
}

static void test_run_once(void **state)
{
	struct exec_run_result res;
	struct sandbox_file file = { .path = "lib.py", .data = "x", .len = 1, .mode = 0644 };
	const char *fetch[] = { "out.txt" };
	struct exec_run_request req = {
		.request_id = "r1",
		.stdin_data = "20 22",
		.stdin_len = 5,
		.memory_mb = 1024,
		.files = &file,
		.n_files = 1,
		.fetch = fetch,
		.n_fetch = 1,
	};

	policy.limits.memory_mb = 512;
	ctx.timeout_ms = 60000; /* above the policy: lowered */
	assert_int_equal(exec_run(&ctx, &req, &res), 0);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_true(res.has_return_code);
	assert_int_equal(res.return_code, 0);
	assert_string_equal(res.out, "42\r\n\n"); /* raw: no normalization */
	assert_int_equal(res.memory_mb, 512);     /* 1024 asked, the policy caps it */
	assert_int_equal(seen_memory_mb, 512);
	assert_int_equal(res.timeout_ms, 6000);
	assert_int_equal(seen_timeout, 6000);
	assert_int_equal(seen_files, 1);
	assert_int_equal(seen_fetch, 1);
	exec_run_result_free(&res);

	req.memory_mb = 64; /* below the policy: honoured */
	ctx.timeout_ms = 1000;
	req.stdin_data = "hang";
	req.stdin_len = 4;
	exec_run(&ctx, &req, &res);
	assert_int_equal(seen_memory_mb, 64);
	assert_int_equal(res.timeout_ms, 1000);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_TIMEOUT);
	assert_true(res.timed_out);
	assert_false(res.has_return_code);
	exec_run_result_free(&res);

	req.stdin_data = "abort";
	req.stdin_len = 5;
	exec_run(&ctx, &req, &res);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_CRASH);
	assert_false(res.has_return_code);
	assert_int_equal(res.signal, 6);
	assert_string_equal(res.err, "Traceback: boom");
	exec_run_result_free(&res);

	runs = 0;
	req.stdin_data = "platform";
	req.stdin_len = 8;
	exec_run(&ctx, &req, &res);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_int_equal(runs, 3);
	assert_int_equal(res.attempts, 3);
	exec_run_result_free(&res);
	ctx.timeout_ms = 0;
}

/* A run that cannot start by its caller's start_by (serve: what the
 * client waits) is not started, not retried, and booked once as a
 * platform error; the caller learns it was late. */
static void test_run_too_late(void **state)
{
	struct exec_run_result res;
	struct exec_run_request req = { .request_id = "late-1",
					.stdin_data = "20 22",
					.stdin_len = 5 };
	json_t *all, *j;
	size_t i;
	int lines = 0;

	journal_clear();
	runs = 0;
	ctx.start_by_ms = clock_ms(CLOCK_MONOTONIC) - 1;
	assert_int_equal(exec_run(&ctx, &req, &res), 0);
	ctx.start_by_ms = 0;
	assert_int_equal(runs, 0);
	assert_int_equal(res.attempts, 0); /* refused after admission: nothing ran */
	assert_int_equal(res.refusal, EXEC_REFUSED_LATE);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_non_null(strstr(res.detail, "by the time its caller gave it"));
	all = journal_lines();
	json_array_foreach(all, i, j)
	{
		assert_string_equal(json_string_value(json_object_get(j, "batch_id")), "late-1");
		assert_true(json_is_true(json_object_get(j, "final")));
		assert_string_equal(json_string_value(json_object_get(j, "cause")),
				    "platform_error");
		lines++;
	}
	json_decref(all);
	assert_int_equal(lines, 1);
	exec_run_result_free(&res);

	/* A platform error whose retry would start after start_by: the retry
	 * is not run, and the request ends late with two records. */
	journal_clear();
	runs = 0;
	req.stdin_data = "platform-late";
	req.stdin_len = 13;
	/* Time enough to start the first attempt on a loaded node; the fake
	 * run ends after it. */
	ctx.start_by_ms = clock_ms(CLOCK_MONOTONIC) + 1000;
	exec_run(&ctx, &req, &res);
	ctx.start_by_ms = 0;
	assert_int_equal(runs, 1);
	assert_int_equal(res.attempts, 2);
	assert_int_equal(res.refusal, EXEC_REFUSED_LATE); /* its last attempt was late */
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	all = journal_lines();
	assert_int_equal(json_array_size(all), 2);
	assert_false(json_is_true(json_object_get(json_array_get(all, 0), "final")));
	assert_true(json_is_true(json_object_get(json_array_get(all, 1), "final")));
	json_decref(all);
	exec_run_result_free(&res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_pass),
		cmocka_unit_test(test_failures_are_the_verdict),
		cmocka_unit_test(test_platform_error_fails_request),
		cmocka_unit_test(test_platform_retries_bounded_per_request),
		cmocka_unit_test(test_verify_booking),
		cmocka_unit_test(test_verify_paused),
		cmocka_unit_test(test_run_once),
		cmocka_unit_test(test_run_too_late),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
