/* Batch-mode logic over a scripted fake sandbox (exec_batch_fixture.h):
 * the cause of every sandbox ending, retry / skip / pause, platform
 * errors, admission (paused, disabled, agent, concurrency) and booking
 * (the outcome log holds every attempt and exactly one final per batch).
 * The result object is in test_exec_result.c. */
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

/* Every line is for batch_id; attempts run 1..n in order; only the last is
 * final; the causes are `causes` (comma-separated). */
static void expect_booked(const char *batch_id, const char *causes)
{
	json_t *all = outcomes(), *line;
	char want[256], *save, *c;
	size_t i = 0, finals = 0, n;

	snprintf(want, sizeof(want), "%s", causes);
	for (c = strtok_r(want, ",", &save); c; c = strtok_r(NULL, ",", &save), i++) {
		line = json_array_get(all, i);
		assert_non_null(line);
		assert_string_equal(str(line, "batch_id"), batch_id);
		assert_string_equal(str(line, "cause"), c);
		finals += json_is_true(json_object_get(line, "final"));
	}
	n = i;
	assert_int_equal(json_array_size(all), n);
	assert_int_equal(finals, 1);
	assert_true(json_is_true(json_object_get(json_array_get(all, n - 1), "final")));
	json_decref(all);
}

/* ---- the cause of every sandbox ending -------------------------------- */

static void expect_cause(struct step s, enum sg_cause cause, int rule, const char *detail)
{
	struct sandbox_spec spec = { .policy = &policy, .timeout_ms = 1500 };
	struct sandbox_result r;
	char got[EXEC_DETAIL_MAX];
	int got_rule, rc;

	play(1, s);
	rc = exec_box_run(&ctx, &(struct exec_box){ 0 }, &spec, &r);
	assert_int_equal(exec_classify(rc, &r, &spec, &got_rule, got, sizeof(got)), cause);
	assert_int_equal(got_rule, rule);
	assert_string_equal(got, detail);
	sandbox_result_free(&r);
}

static void test_classify(void **state)
{
	policy.limits.memory_mb = 256;
	expect_cause(OK_OUT("[1]"), SG_CAUSE_OK, -1, "");
	expect_cause(EXIT(3), SG_CAUSE_TENANT_CRASH, -1, "exited with code 3");
	expect_cause((struct step){ .end = SB_SIGNALED, .code = 6 }, SG_CAUSE_TENANT_CRASH, -1,
		     "killed by signal SIGABRT (6)");
	expect_cause(ENDED(SB_TIMEOUT), SG_CAUSE_TENANT_TIMEOUT, -1,
		     "deadline of 1500 ms passed: the sandbox was killed");
	expect_cause((struct step){ .end = SB_OOM, .rule = SG_RULE_MEMORY }, SG_CAUSE_TENANT_OOM,
		     -1, "memory limit of 256 MB exceeded");
	expect_cause(ENDED(SB_OUTPUT_OVERSIZE), SG_CAUSE_TENANT_BAD_OUTPUT, -1,
		     "oversized: stdout exceeded the cap of 1048576 bytes");
	expect_cause(ENDED(SB_FORK_LIMIT), SG_CAUSE_TENANT_POLICY_VIOLATION, SG_RULE_FORK,
		     "fork limit reached (max_tasks 64, max_forks 1024)");
	expect_cause((struct step){ .end = SB_KILLED_BY_AGENT, .rule = SG_RULE_EGRESS },
		     SG_CAUSE_TENANT_POLICY_VIOLATION, SG_RULE_EGRESS,
		     "killed by the agent: egress rule");
	expect_cause((struct step){ .end = SB_KILLED_BY_AGENT,
				    .rule = SG_RULE_FILE,
				    .detail = "open /etc/shadow" },
		     SG_CAUSE_TENANT_POLICY_VIOLATION, SG_RULE_FILE,
		     "killed by the agent: file rule: open /etc/shadow");
	/* The run's own command refused by the exec rule (no argv here). */
	expect_cause((struct step){ .end = SB_POLICY_REFUSED, .rule = SG_RULE_EXEC },
		     SG_CAUSE_TENANT_POLICY_VIOLATION, SG_RULE_EXEC,
		     "the exec rule refused the run's command (?)");
	/* An agent kill is a violation even when the agent did not say which rule. */
	expect_cause((struct step){ .end = SB_KILLED_BY_AGENT, .rule = -1 },
		     SG_CAUSE_TENANT_POLICY_VIOLATION, -1,
		     "killed by the agent (rule not reported)");
	expect_cause(PLATFORM(-ENOSPC, "scratch: No space left on device"), SG_CAUSE_PLATFORM_ERROR,
		     -1, "platform error: scratch: No space left on device");
	expect_cause(PLATFORM(-EAGAIN, NULL), SG_CAUSE_PLATFORM_ERROR, -1,
		     "platform error: Resource temporarily unavailable");
}

/* ---- batches ------------------------------------------------------------ */

static void test_ok(void **state)
{
	struct exec_result res;

	truncate_log();
	play(1, OK_OUT("[0.25, 0.75]\n"));
	assert_int_equal(exec_batch(&ctx, &batch, &res), 0);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.attempts, 1);
	assert_int_equal(res.n_scores, 2);
	assert_true(res.scores[0] == 0.25 && res.scores[1] == 0.75);
	assert_true(res.stats.mean == 0.5);
	assert_string_equal(last_stdin, batch_json); /* the document as given */
	assert_int_equal(last_timeout, 2000);
	assert_int_equal(exec_exit_code(res.cause), 0);
	expect_booked("b1", "ok");
	json_t *all = outcomes(), *line = json_array_get(all, 0);
	assert_string_equal(str(line, "tenant"), "acme");
	assert_string_equal(str(line, "run_id"), "run-1");
	assert_string_equal(str(line, "sandbox"), "fake-1");
	assert_string_equal(str(line, "mode"), "batch");
	assert_string_equal(str(line, "class"), "none");
	assert_int_equal(num(line, "n_scores"), 2);
	assert_int_equal(num(line, "attempt"), 1);
	json_decref(all);
	exec_result_free(&res);
}

static void test_retry_then_ok(void **state)
{
	struct exec_result res;

	truncate_log();
	policy.failure = SG_FAILURE_RETRY;
	policy.max_retries = 2;
	play(3, ENDED(SB_TIMEOUT), EXIT(1), OK_OUT("[1, 1]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.attempts, 3);
	assert_true(res.stats.constant);
	expect_booked("b1", "tenant_timeout,tenant_crash,ok");
	exec_result_free(&res);
}

static void test_retry_exhausted(void **state)
{
	struct exec_result res;

	truncate_log();
	play(3, OK_OUT("[0.5]"), OK_OUT("[0.5]"), OK_OUT("[0.5]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_BAD_OUTPUT);
	assert_string_equal(res.detail, "expected 2 scores, got 1");
	assert_int_equal(res.attempts, 3);
	assert_null(res.scores);
	assert_int_equal(exec_exit_code(res.cause), 1);
	expect_booked("b1", "tenant_bad_output,tenant_bad_output,tenant_bad_output");
	json_t *all = outcomes();
	assert_true(json_is_true(json_object_get(json_array_get(all, 2), "invalid")));
	json_decref(all);
	exec_result_free(&res);
}

static void test_violation_is_final(void **state)
{
	struct exec_result res;

	truncate_log();
	play(1, ((struct step){ .end = SB_KILLED_BY_AGENT, .rule = SG_RULE_EGRESS }));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_POLICY_VIOLATION);
	assert_int_equal(res.rule, SG_RULE_EGRESS);
	assert_int_equal(res.attempts, 1);
	expect_booked("b1", "tenant_policy_violation");
	exec_result_free(&res);
}

static void test_skip(void **state)
{
	struct exec_result res;

	truncate_log();
	policy.failure = SG_FAILURE_SKIP;
	play(1, ((struct step){ .end = SB_SIGNALED, .code = 11 }));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_CRASH);
	assert_string_equal(res.detail, "killed by signal SIGSEGV (11)");
	assert_int_equal(res.attempts, 1);
	assert_int_equal(tenant_paused("acme", NULL, 0), 0);
	expect_booked("b1", "tenant_crash");
	exec_result_free(&res);
	policy.failure = SG_FAILURE_RETRY;
}

static void test_platform_retried_in_any_mode(void **state)
{
	struct exec_result res;

	truncate_log();
	policy.failure = SG_FAILURE_SKIP;
	play(3, PLATFORM(-EIO, "cgroup: Input/output error"), PLATFORM(-ENOSPC, "disk full"),
	     OK_OUT("[0,1]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	assert_int_equal(res.attempts, 3);
	expect_booked("b1", "platform_error,platform_error,ok");
	json_t *all = outcomes();
	assert_string_equal(str(json_array_get(all, 0), "class"), "platform");
	json_decref(all);
	exec_result_free(&res);

	truncate_log();
	play(3, PLATFORM(-EIO, "a"), PLATFORM(-EIO, "b"), PLATFORM(-ENOSPC, "disk full"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_string_equal(res.detail, "platform error: disk full");
	assert_int_equal(exec_exit_code(res.cause), 2);
	expect_booked("b1", "platform_error,platform_error,platform_error");
	exec_result_free(&res);
	policy.failure = SG_FAILURE_RETRY;
}

static void test_pause(void **state)
{
	struct exec_result res;
	char info[1024];

	truncate_log();
	policy.failure = SG_FAILURE_PAUSE;
	play(1, ENDED(SB_TIMEOUT));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_TIMEOUT);
	assert_true(res.paused_tenant);
	assert_string_equal(res.detail, "deadline of 2000 ms passed: the sandbox was killed; "
					"tenant acme paused until 'sandguard tenant resume acme'");
	assert_int_equal(tenant_paused("acme", info, sizeof(info)), 1);
	assert_non_null(strstr(info, "batch b1: tenant_timeout: deadline of 2000 ms"));
	exec_result_free(&res);

	/* Refused without running anything, booked final as attempt 0. */
	play(0);
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(calls, 0);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_PAUSED);
	assert_int_equal(res.attempts, 0);
	assert_non_null(strstr(res.detail, "tenant acme is paused since "));
	assert_non_null(strstr(res.detail, "; resume with 'sandguard tenant resume acme'"));
	assert_int_equal(exec_exit_code(res.cause), 1);
	json_t *all = outcomes();
	assert_int_equal(json_array_size(all), 2);
	assert_string_equal(str(json_array_get(all, 1), "cause"), "tenant_paused");
	assert_int_equal(num(json_array_get(all, 1), "attempt"), 0);
	json_decref(all);
	exec_result_free(&res);

	assert_int_equal(tenant_resume("acme"), 0);
	assert_int_equal(tenant_resume("acme"), -ENOENT);
	play(1, OK_OUT("[1,2]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	exec_result_free(&res);

	/* A platform error never pauses. */
	play(3, PLATFORM(-EIO, "x"), PLATFORM(-EIO, "x"), PLATFORM(-EIO, "x"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_false(res.paused_tenant);
	assert_int_equal(tenant_paused("acme", NULL, 0), 0);
	exec_result_free(&res);
	policy.failure = SG_FAILURE_RETRY;
}

static void test_disabled_and_agent(void **state)
{
	struct exec_result res;

	play(0);
	policy.enabled = false;
	snprintf(policy.source, sizeof(policy.source), "/etc/sandguard/policies/acme.json");
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_TENANT_PAUSED);
	assert_string_equal(res.detail, "tenant acme is disabled by its policy "
					"(/etc/sandguard/policies/acme.json: \"enabled\": false)");
	exec_result_free(&res);
	policy.enabled = true;

	setenv("SANDGUARD_AGENT_SOCK", "/run/test/agent.sock", 1);
	policy.require_agent = true;
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(calls, 0);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_string_equal(res.detail,
			    "platform error: the policy of tenant acme requires the agent "
			    "(require_agent), but no agent answers at /run/test/agent.sock");
	assert_int_equal(exec_exit_code(res.cause), 2);
	exec_result_free(&res);
	policy.require_agent = false;
	unsetenv("SANDGUARD_AGENT_SOCK");
}

static void test_concurrency(void **state)
{
	struct tenant_slot held;
	struct exec_result res;

	policy.limits.concurrency = 1;
	assert_int_equal(tenant_slot_acquire("acme", 1, 0, &held), 0);

	policy.limits.on_excess = SG_EXCESS_REFUSE;
	play(0);
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(calls, 0);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_string_equal(res.detail,
			    "platform error: concurrency cap reached: 1 sandboxes of tenant acme "
			    "already running on this node (on_excess refuse); retry later");
	exec_result_free(&res);

	policy.limits.on_excess = SG_EXCESS_WAIT;
	policy.limits.queue_timeout_ms = 100;
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_PLATFORM_ERROR);
	assert_string_equal(res.detail,
			    "platform error: concurrency cap reached: 1 sandboxes of tenant acme "
			    "still running after waiting 100 ms (queue_timeout_ms); retry later");
	assert_true(res.wall_ms >= 100);
	exec_result_free(&res);

	tenant_slot_release(&held);
	play(1, OK_OUT("[1,2]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(res.cause, SG_CAUSE_OK);
	exec_result_free(&res);
	/* The batch gave its slot back. */
	assert_int_equal(tenant_slot_acquire("acme", 1, 0, &held), 0);
	tenant_slot_release(&held);
	policy.limits.concurrency = 8;
}

static void test_timeout_never_above_policy(void **state)
{
	struct exec_result res;

	ctx.timeout_ms = 999999;
	play(1, OK_OUT("[1,2]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(last_timeout, 2000);
	exec_result_free(&res);
	ctx.timeout_ms = 500;
	play(1, OK_OUT("[1,2]"));
	exec_batch(&ctx, &batch, &res);
	assert_int_equal(last_timeout, 500);
	exec_result_free(&res);
	ctx.timeout_ms = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_retry_then_ok),
		cmocka_unit_test(test_retry_exhausted),
		cmocka_unit_test(test_violation_is_final),
		cmocka_unit_test(test_skip),
		cmocka_unit_test(test_platform_retried_in_any_mode),
		cmocka_unit_test(test_pause),
		cmocka_unit_test(test_disabled_and_agent),
		cmocka_unit_test(test_concurrency),
		cmocka_unit_test(test_timeout_never_above_policy),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
