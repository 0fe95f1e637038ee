/* The sandbox is mechanism only: it links without the agent's code
 * (control/) and without the interpreter forkserver's (interp/), and runs
 * real sandboxes, as root, with no enforcer or with this test's own
 * (src/sandbox/sandbox_enforcer.h). Asserts what the sandbox asks of its
 * enforcer and when, and that the enforcer's record decides the run's
 * end: a tripped rule is the run's violation, whatever the main process
 * did. A spec that names no enforcer is refused. With this test's own
 * interpreter hook (src/sandbox/sandbox_interp.h): each run asks it, a
 * cold run carries its why, and the state it made in a sandbox is ended
 * with the sandbox. */
#include <errno.h>
#include <fcntl.h>
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
#include "sandbox/sandbox_interp.h"

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

/* The interpreter hook's fake: its state in a sandbox is this struct
 * (opaque to the sandbox). */
struct sb_interp {
	int fd;
};

static struct {
	bool want; /* what wanted() answers */
	int wanted, started, why_cold, ended;
	struct sb_interp made;
} hk;

static bool h_wanted(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	(void)sb, (void)spec;
	hk.wanted++;
	return hk.want;
}

/* A start that fails after it made its state, as a parent whose preloads
 * do not import does. */
static int h_start(struct sandbox *sb, const struct sandbox_spec *spec, char *detail, size_t dlen)
{
	(void)spec;
	hk.started++;
	hk.made.fd = -1;
	sandbox_interp_set(sb, &hk.made);
	snprintf(detail, dlen, "fake interpreter: could not start");
	return -ENOEXEC;
}

static void h_why_cold(const struct sandbox *sb, const struct sandbox_spec *spec, char *why,
		       size_t len)
{
	(void)sb, (void)spec;
	hk.why_cold++;
	snprintf(why, len, "fake: cold for a while");
}

static int h_channel(const struct sb_interp *in)
{
	return in->fd;
}

/* Never called while no interpreter runs (its channel is -1). */
static int h_send_call(struct sandbox *sb, const struct sandbox_spec *spec, const int fds[4],
		       char *detail, size_t dlen)
{
	(void)sb, (void)spec, (void)fds, (void)detail, (void)dlen;
	fail();
	return -EIO;
}

static int h_read_done(struct sandbox *sb, int *status, int timeout_ms)
{
	(void)sb, (void)status, (void)timeout_ms;
	fail();
	return -EIO;
}

static int h_between(struct sandbox *sb, char *detail, size_t dlen)
{
	(void)sb, (void)detail, (void)dlen;
	fail();
	return -EIO;
}

static void h_refuse(const struct sandbox *sb, const char *why)
{
	(void)sb, (void)why;
	fail();
}

static void h_end(struct sb_interp *in)
{
	assert_ptr_equal(in, &hk.made);
	hk.ended++;
}

static const struct sb_interp_ops fake_interp = {
	.wanted = h_wanted,
	.start = h_start,
	.why_cold = h_why_cold,
	.channel = h_channel,
	.send_call = h_send_call,
	.read_done = h_read_done,
	.check = h_between,
	.prefork = h_between,
	.refuse = h_refuse,
	.end = h_end,
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
	/* Its sandboxes' cgroups went with them; the tenant's stays (as on a
	 * node) and goes here, on v2 and on each v1 controller. */
	static const char *const v1[] = { "cpu", "memory", "pids", "blkio" };
	const char *base = strrchr(e->cg, '/') + 1;
	char mnt[PATH_MAX], path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/unit-enforcer", e->cg);
	rmdir(path);
	rmdir(e->cg);
	for (size_t i = 0; i < sizeof(v1) / sizeof(*v1); i++) {
		if (cgroup_v1_mount(v1[i], mnt, sizeof(mnt)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/unit-enforcer", mnt, base);
		rmdir(path);
		snprintf(path, sizeof(path), "%s/%s", mnt, base);
		rmdir(path);
	}
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

/* A sandbox that fails before its cgroups exist (here: a scratch root that
 * is a file) closes none of the process's descriptors on its way out:
 * its cgroup's descriptors start as none, not 0 (the review's find: a
 * zeroed counter set closed fd 0 five times, and in a threaded executor
 * whatever another thread had opened as 0 next). */
static void test_failed_start_closes_nothing_of_ours(void **state)
{
	struct sandbox_result res;
	struct env *e = *state;
	char saved[sizeof(e->policy.scratch_root)], saved_file[PATH_MAX];
	struct stat before, after;
	int p[2], keep0, fd;

	if (!e)
		skip();
	/* fd 0 is a pipe of ours for the test's length, whatever stdin was */
	keep0 = dup(0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[0], 0), 0);
	assert_int_equal(fstat(0, &before), 0);
	memcpy(saved, e->policy.scratch_root, sizeof(saved));
	snprintf(e->policy.scratch_root, sizeof(e->policy.scratch_root), "%s/a-file/scratch",
		 e->dir);
	snprintf(saved_file, sizeof(saved_file), "%s/a-file", e->dir);
	fd = open(saved_file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_true(run(e, (struct sb_enforcer){ .none = true }, "exit 0", &res) < 0);
	sandbox_result_free(&res);
	memcpy(e->policy.scratch_root, saved, sizeof(saved));
	unlink(saved_file);
	assert_int_equal(fstat(0, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	assert_int_equal(fcntl(p[0], F_GETFD), 0); /* the pipe's own fds too */
	assert_int_equal(fcntl(p[1], F_GETFD), 0);
	if (keep0 >= 0) {
		dup2(keep0, 0);
		close(keep0);
	}
	close(p[0]);
	close(p[1]);
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

static void test_interp_hook_asked(void **state)
{
	struct sb_enforcer none = { .none = true };
	struct sandbox_result res;
	struct env *e = *state;

	if (!e)
		skip();
	sandbox_use_interp(&fake_interp);
	/* Not wanted: the run is cold, and says why the hook gave. */
	memset(&hk, 0, sizeof(hk));
	assert_int_equal(run(e, none, "exit 4", &res), 0);
	assert_int_equal(res.end, SB_EXITED);
	assert_int_equal(res.exit_code, 4);
	assert_false(res.warm);
	assert_string_equal(res.warm_fallback, "fake: cold for a while");
	sandbox_result_free(&res);
	assert_int_equal(hk.wanted, 1);
	assert_int_equal(hk.why_cold, 1);
	assert_int_equal(hk.started, 0);
	assert_int_equal(hk.ended, 0); /* no state was made */
	/* Wanted, and its start fails: the run fails with the hook's detail,
	 * nothing of the tenant's ran, and the state the hook made in the
	 * sandbox is ended with it, once. */
	memset(&hk, 0, sizeof(hk));
	hk.want = true;
	assert_int_equal(run(e, none, "exit 0", &res), -ENOEXEC);
	assert_non_null(strstr(res.detail, "fake interpreter: could not start"));
	assert_false(res.warm);
	sandbox_result_free(&res);
	assert_int_equal(hk.started, 1);
	assert_int_equal(hk.ended, 1);
	sandbox_use_interp(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_with_no_enforcer),
		cmocka_unit_test(test_zero_enforcer_refused),
		cmocka_unit_test(test_failed_start_closes_nothing_of_ours),
		cmocka_unit_test(test_enforcer_asked_and_obeyed),
		cmocka_unit_test(test_interp_hook_asked),
	};

	return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
