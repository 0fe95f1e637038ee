/* Batch mode's result object over the scripted fake sandbox
 * (exec_batch_fixture.h): its JSON, the ids and reasons it carries, and
 * the stderr excerpt. Kept apart from test_exec_batch.c, which checks
 * causes, retries and booking. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "exec/exec.h"
#include "exec/exec_internal.h"
#include "journal_lines.h"
#include "node/tenant_state.h"
#include "tmp_dir.h"
#include "exec_batch_fixture.h"

/* ---- the result object ---------------------------------------------------- */

static void test_result_json(void **state)
{
	struct exec_result res;
	json_t *j;

	play(1,
	     ((struct step){
		     .end = SB_EXITED, .out = "[0.5, 0.25]", .err = "warn: \xff\xfe bad utf-8" }));
	exec_batch(&ctx, &batch, &res);
	j = exec_result_json("acme", &res);
	assert_string_equal(str(j, "tenant"), "acme");
	assert_string_equal(str(j, "batch_id"), "b1");
	assert_string_equal(str(j, "status"), "ok");
	assert_string_equal(str(j, "cause"), "ok");
	assert_true(json_is_null(json_object_get(j, "rule")));
	assert_true(json_is_null(json_object_get(j, "detail")));
	assert_int_equal(json_array_size(json_object_get(j, "scores")), 2);
	assert_true(json_real_value(json_array_get(json_object_get(j, "scores"), 1)) == 0.25);
	assert_int_equal(num(j, "attempts"), 1);
	assert_non_null(json_object_get(j, "wall_ms"));
	assert_string_equal(str(j, "stderr"), "warn: \xef\xbf\xbd\xef\xbf\xbd bad utf-8");
	assert_null(json_object_get(j, "tests"));
	json_decref(j);
	exec_result_free(&res);

	play(1, ((struct step){ .end = SB_FORK_LIMIT }));
	policy.failure = SG_FAILURE_SKIP;
	exec_batch(&ctx, &batch, &res);
	j = exec_result_json("acme", &res);
	assert_string_equal(str(j, "status"), "failed");
	assert_string_equal(str(j, "cause"), "tenant_policy_violation");
	assert_string_equal(str(j, "rule"), "fork");
	assert_true(json_is_null(json_object_get(j, "scores")));
	assert_null(json_object_get(j, "stats"));
	json_decref(j);
	exec_result_free(&res);
	policy.failure = SG_FAILURE_RETRY;
}

/* Identity and the why: the result names the run and each attempt's
 * sandbox; each record says why its cause, why it was retried or final,
 * the slot uid, the limits and the policy file it ran under. */
static void test_ids_and_reasons(void **state)
{
	struct exec_result res;
	json_t *j, *all, *sb;

	truncate_log();
	policy.failure = SG_FAILURE_RETRY;
	policy.max_retries = 2;
	snprintf(policy.source, sizeof(policy.source), "/etc/sandguard/policies/acme.json");
	play(3, ENDED(SB_TIMEOUT), EXIT(1), OK_OUT("[1, 1]"));
	exec_batch(&ctx, &batch, &res);
	j = exec_result_json("acme", &res);
	assert_string_equal(str(j, "run_id"), "run-1");
	sb = json_object_get(j, "sandboxes");
	assert_int_equal(json_array_size(sb), 3);
	for (size_t i = 0; i < 3; i++) {
		char want[16];
		snprintf(want, sizeof(want), "fake-%zu", i + 1);
		assert_string_equal(str(json_array_get(sb, i), "sandbox"), want);
		assert_int_equal(num(json_array_get(sb, i), "attempt"), (json_int_t)i + 1);
	}
	assert_string_equal(str(json_array_get(sb, 0), "cause"), "tenant_timeout");
	assert_string_equal(str(json_array_get(sb, 2), "cause"), "ok");
	json_decref(j);

	all = outcomes();
	assert_int_equal(json_array_size(all), 3);
	assert_string_equal(str(json_array_get(all, 0), "reason"),
			    "the program was still running when its deadline of 2000 ms "
			    "(limits.timeout_ms) passed, so the executor killed the sandbox");
	assert_string_equal(
		str(json_array_get(all, 0), "decision"),
		"retried: tenant_timeout is retried under failure mode retry (attempt 1 of 3)");
	assert_string_equal(
		str(json_array_get(all, 1), "reason"),
		"the program exited with code 1 by itself: no deadline, memory limit or "
		"agent kill ended it");
	assert_true(json_is_null(json_object_get(json_array_get(all, 2), "decision")));
	for (size_t i = 0; i < 3; i++) {
		json_t *rec = json_array_get(all, i);
		assert_int_equal(num(rec, "uid"), 60001 + (json_int_t)i);
		assert_int_equal(num(rec, "init_pid"), 7001 + (json_int_t)i);
		assert_int_equal(num(json_object_get(rec, "limits"), "timeout_ms"), 2000);
		assert_int_equal(num(json_object_get(rec, "limits"), "max_tasks"),
				 policy.limits.max_tasks);
		assert_string_equal(str(rec, "policy"), "/etc/sandguard/policies/acme.json");
		assert_string_equal(str(rec, "run_id"), "run-1");
	}
	json_decref(all);
	exec_result_free(&res);

	/* A violation is final at once; the budget, once spent, says so. */
	truncate_log();
	play(1, ((struct step){ .end = SB_KILLED_BY_AGENT, .rule = SG_RULE_EGRESS }));
	exec_batch(&ctx, &batch, &res);
	exec_result_free(&res);
	play(3, EXIT(2), EXIT(2), EXIT(2));
	exec_batch(&ctx, &batch, &res);
	exec_result_free(&res);
	all = outcomes();
	assert_string_equal(str(json_array_get(all, 0), "decision"),
			    "final: a policy violation is never retried");
	assert_string_equal(
		str(json_array_get(all, 3), "decision"),
		"final: the attempt budget is spent (3 attempts: 1 + failure.max_retries)");
	json_decref(all);
	policy.source[0] = '\0';
}

static void test_stderr_excerpt(void **state)
{
	static char big[3 * EXEC_STDERR_EXCERPT];
	struct exec_result res;
	const char *s;
	json_t *j;

	memset(big, 'e', sizeof(big) - 1);
	big[0] = 'H';
	big[sizeof(big) - 2] = 'T';
	play(1, ((struct step){ .end = SB_EXITED, .out = "[1,2]", .err = big }));
	exec_batch(&ctx, &batch, &res);
	j = exec_result_json("acme", &res);
	s = str(j, "stderr");
	assert_true(strlen(s) < EXEC_STDERR_EXCERPT + 64);
	assert_true(s[0] == 'H' && s[strlen(s) - 1] == 'T');
	assert_non_null(strstr(s, "\n...[8191 bytes omitted]...\n"));
	json_decref(j);
	exec_result_free(&res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_result_json),
		cmocka_unit_test(test_stderr_excerpt),
		cmocka_unit_test(test_ids_and_reasons),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
