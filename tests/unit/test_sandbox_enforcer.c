/* The sandbox is mechanism only: it links without the agent's code
 * (control/), and runs real sandboxes, as root, with no enforcer or with
 * this test's own (src/sandbox/sandbox_enforcer.h). Asserts what the
 * sandbox asks of its enforcer and when, and that the enforcer's record
 * decides the run's end: a tripped rule is the run's violation, whatever
 * the main process did. A spec that names no enforcer is refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "abi/events.h"
#include "lib/cgroup.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"

struct fake {
	int enrolled, named, released, unregistered, verdicts, quiet_asked, trip_asked;
	int trip; /* what trip_rule answers: 1 tripped (SG_RULE_FORK), 0 not */
};

static int f_enroll(void *ctx, const struct sb_enrollment *s, bool notify, struct sb_enrolled *e)
{
	struct fake *f = ctx;

	(void)notify;
	assert_non_null(s->tenant);
	assert_true(s->cgroup_id != 0); /* the cgroup exists before any code runs */
	f->enrolled++;
	e->enforced = true;
	e->notified = false;
	return 0;
}

static int f_name_run(void *ctx, const struct sb_enrollment *s, char *detail, size_t len)
{
	(void)s, (void)detail, (void)len;
	((struct fake *)ctx)->named++;
	return 0;
}

static int f_unregister(void *ctx, uint64_t id)
{
	(void)id;
	((struct fake *)ctx)->unregistered++;
	return 0;
}

static void f_release(void *ctx, uint64_t id)
{
	(void)id;
	((struct fake *)ctx)->released++;
}

static bool f_has_agent(void *ctx)
{
	(void)ctx;
	return false;
}

static bool f_files_preventive(void *ctx)
{
	(void)ctx;
	return false;
}

static int f_kill_verdict(void *ctx, uint64_t id, int *rule, int timeout_ms)
{
	(void)id, (void)rule, (void)timeout_ms;
	((struct fake *)ctx)->verdicts++;
	return 0;
}

static int f_quiet(void *ctx, uint64_t id)
{
	struct fake *f = ctx;

	(void)id;
	f->quiet_asked++;
	return !f->trip;
}

static int f_trip_rule(void *ctx, uint64_t id, int *rule)
{
	struct fake *f = ctx;

	(void)id;
	f->trip_asked++;
	if (f->trip)
		*rule = SG_RULE_FORK;
	return f->trip;
}

static int f_first_rule(void *ctx, uint64_t id, int *rule)
{
	struct fake *f = ctx;

	(void)id;
	*rule = SG_RULE_FORK;
	return f->trip;
}

static const struct sb_enforcer_ops fake_ops = {
	.enroll = f_enroll,
	.name_run = f_name_run,
	.unregister = f_unregister,
	.release = f_release,
	.has_agent = f_has_agent,
	.files_preventive = f_files_preventive,
	.kill_verdict = f_kill_verdict,
	.quiet = f_quiet,
	.trip_rule = f_trip_rule,
	.first_rule = f_first_rule,
};

struct env {
	char dir[64], cg[PATH_MAX];
	struct sg_policy policy;
};

static int env_setup(void **state)
{
	static struct env e;
	char mnt[PATH_MAX], path[PATH_MAX + 16];

	if (geteuid() != 0 || cgroup2_mount(mnt, sizeof(mnt)))
		return 0; /* each test skips */
	snprintf(e.dir, sizeof(e.dir), "/tmp/sg-unit-enforcer-XXXXXX");
	assert_non_null(mkdtemp(e.dir));
	snprintf(path, sizeof(path), "%s/run", e.dir);
	assert_int_equal(mkdir(path, 0700), 0);
	setenv("SANDGUARD_RUN_DIR", path, 1);
	snprintf(e.cg, sizeof(e.cg), "%s/sandguard-unit-enforcer-%d", mnt, (int)getpid());
	setenv("SANDGUARD_CGROUP_ROOT", e.cg, 1);
	setenv("SANDGUARD_UID_BASE", "71000", 1);
	policy_defaults(&e.policy);
	snprintf(e.policy.scratch_root, sizeof(e.policy.scratch_root), "%s/scratch", e.dir);
	assert_int_equal(mkdir(e.policy.scratch_root, 0755), 0);
	e.policy.limits.timeout_ms = 10000;
	*state = &e;
	return 0;
}

static int env_teardown(void **state)
{
	struct env *e = *state;
	char cmd[PATH_MAX + 64];

	if (!e)
		return 0;
	rmdir(e->cg); /* its tenants' cgroups went with their sandboxes */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int run(struct env *e, struct sb_enforcer enforcer, const char *script,
	       struct sandbox_result *res)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	struct sandbox_spec spec = { .policy = &e->policy,
				     .tenant = "unit-enforcer",
				     .argv = argv,
				     .timeout_ms = 10000,
				     .enforcer = enforcer };

	memset(res, 0, sizeof(*res));
	return sandbox_run(&spec, res);
}

static void test_runs_with_no_enforcer(void **state)
{
	struct sandbox_result res;
	struct env *e = *state;

	if (!e)
		skip();
	assert_int_equal(run(e, (struct sb_enforcer){ .none = true }, "exit 3", &res), 0);
	assert_int_equal(res.end, SB_EXITED);
	assert_int_equal(res.exit_code, 3);
	assert_false(res.agent_enforced);
	sandbox_result_free(&res);
}

static void test_zero_enforcer_refused(void **state)
{
	struct sandbox_result res;
	struct env *e = *state;

	if (!e)
		skip();
	assert_int_equal(run(e, (struct sb_enforcer){ 0 }, "exit 0", &res), -EINVAL);
	assert_non_null(strstr(res.detail, "no enforcer"));
	sandbox_result_free(&res);
}

static void test_enforcer_asked_and_obeyed(void **state)
{
	struct sandbox_result res;
	struct env *e = *state;
	struct fake quiet = { 0 }, tripped = { .trip = 1 };

	if (!e)
		skip();
	/* A run that broke no rule: enrolled once, its record asked, its
	 * entries released once, no agent asked (none answers). */
	assert_int_equal(
		run(e, (struct sb_enforcer){ .ops = &fake_ops, .ctx = &quiet }, "exit 0", &res), 0);
	assert_int_equal(res.end, SB_EXITED);
	assert_int_equal(res.exit_code, 0);
	assert_true(res.agent_enforced);
	sandbox_result_free(&res);
	assert_int_equal(quiet.enrolled, 1);
	assert_true(quiet.quiet_asked >= 1);
	assert_int_equal(quiet.trip_asked, 0); /* quiet: nothing to look up */
	assert_int_equal(quiet.released, 1);
	assert_int_equal(quiet.verdicts, 0);
	assert_int_equal(quiet.unregistered, 0); /* never told an agent */
	/* The enforcer's record says a kill-class rule tripped: that is the
	 * run's end, though its main process exited 0. */
	assert_int_equal(run(e, (struct sb_enforcer){ .ops = &fake_ops, .ctx = &tripped }, "exit 0",
			     &res),
			 0);
	assert_int_equal(res.end, SB_RULE_TRIPPED);
	assert_int_equal(res.rule, SG_RULE_FORK);
	sandbox_result_free(&res);
	assert_int_equal(tripped.trip_asked, 1);
	assert_int_equal(tripped.released, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_with_no_enforcer),
		cmocka_unit_test(test_zero_enforcer_refused),
		cmocka_unit_test(test_enforcer_asked_and_obeyed),
	};

	return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
