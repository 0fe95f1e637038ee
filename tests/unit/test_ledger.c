/* The per-tenant ledger: booking, the class split (verdicts included), bad
 * input, the tenant cap, and the checkpoint file (round trip with the
 * journal position, missing, a directory, a corrupt file moved aside but
 * never by a read-only load, one bad tenant row dropped alone, version 1). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "telemetry/ledger.h"
#include "ledger_fixture.h"

static void test_booking(void **state)
{
	struct ledger *l = ledger_new();
	struct sg_outcome o;
	struct ledger_tenant t;

	/* A batch that crashed, timed out, then passed: 3 attempts, 1 batch. */
	book(l, outcome("acme", SG_CAUSE_TENANT_CRASH, -1, false, 100));
	book(l, outcome("acme", SG_CAUSE_TENANT_TIMEOUT, -1, false, 10000));
	book(l, outcome("acme", SG_CAUSE_OK, -1, true, 250));
	/* A batch killed for forking, final. */
	book(l, outcome("acme", SG_CAUSE_TENANT_POLICY_VIOLATION, SG_RULE_FORK, true, 61000));
	/* A degenerate batch and an invalid one. */
	o = outcome("acme", SG_CAUSE_OK, -1, true, 5);
	o.constant = true;
	book(l, o);
	o = outcome("acme", SG_CAUSE_TENANT_BAD_OUTPUT, -1, true, 1000);
	o.invalid = true;
	book(l, o);

	t = get(l, "acme");
	assert_string_equal(t.name, "acme");
	assert_int_equal(t.attempts, 6);
	assert_int_equal(t.failures[SG_CAUSE_OK], 0);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_CRASH], 1);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_TIMEOUT], 1);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_POLICY_VIOLATION], 1);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_BAD_OUTPUT], 1);
	assert_int_equal(t.violations[SG_RULE_FORK], 1);
	assert_int_equal(t.violations[SG_RULE_EGRESS], 0);
	assert_int_equal(t.batches_ok, 2);
	assert_int_equal(t.batches_failed, 2);
	assert_int_equal(t.degenerate, 1);
	assert_int_equal(t.invalid, 1);

	/* Durations of final outcomes only: 0.25 s, 61 s, 0.005 s, 1 s. */
	assert_int_equal(t.duration.count, 4);
	assert_true(t.duration.sum_seconds > 62.254 && t.duration.sum_seconds < 62.256);
	assert_int_equal(t.duration.buckets[0], 1);               /* <= 0.005 */
	assert_int_equal(t.duration.buckets[5], 1);               /* <= 0.25 */
	assert_int_equal(t.duration.buckets[7], 1);               /* <= 1 */
	assert_int_equal(t.duration.buckets[LEDGER_N_BOUNDS], 1); /* > 60 */
	assert_true(ledger_duration_bounds[LEDGER_N_BOUNDS - 1] == 60);

	assert_int_equal(ledger_book_event(l, "acme", SG_EV_EGRESS_DENIED, SG_ACTION_DENIED), 0);
	assert_int_equal(ledger_book_event(l, "acme", SG_EV_EGRESS_DENIED, SG_ACTION_DENIED), 0);
	assert_int_equal(ledger_book_event(l, "beta", SG_EV_EXEC, SG_ACTION_LOGGED), 0);
	assert_int_equal(ledger_book_kill(l, "acme", SG_RULE_FORK), 0);
	t = get(l, "acme");
	assert_int_equal(t.events[SG_EV_EGRESS_DENIED][SG_ACTION_DENIED], 2);
	assert_int_equal(t.kills[SG_RULE_FORK], 1);
	t = get(l, "beta");
	assert_int_equal(t.events[SG_EV_EXEC][SG_ACTION_LOGGED], 1);
	assert_int_equal(t.attempts, 0);
	assert_int_equal(ledger_tenant_count(l), 2);
	assert_int_equal(ledger_get(l, "gamma", &t), -ENOENT);
	ledger_free(l);
}

static void test_class_split(void **state)
{
	struct ledger *l = ledger_new();
	struct ledger_tenant t;
	struct sg_outcome o;

	for (int c = 0; c < SG_CAUSE__COUNT; c++)
		book(l,
		     outcome("acme", c, c == SG_CAUSE_TENANT_POLICY_VIOLATION ? SG_RULE_EXEC : -1,
			     true, 1));
	book(l, outcome("acme", SG_CAUSE_PLATFORM_ERROR, -1, false, 1));
	t = get(l, "acme");
	/* Two platform errors: the platform's, never the tenant's. */
	assert_int_equal(t.failures[SG_CAUSE_PLATFORM_ERROR], 2);
	assert_int_equal(t.failures_by_class[SG_CLASS_PLATFORM], 2);
	/* timeout, bad_output, crash, oom, violation, paused. */
	assert_int_equal(t.failures_by_class[SG_CLASS_TENANT_CODE], 6);
	assert_int_equal(t.failures_by_class[SG_CLASS_NONE], 0);
	assert_int_equal(t.batches_ok, 1);
	assert_int_equal(t.batches_failed, SG_CAUSE__COUNT - 1);

	/* Model-written programs (verifier, run-once): a failed run is the
	 * verdict, nobody's fault; paused and platform keep their class. */
	for (int m = SG_MODE_VERIFY; m <= SG_MODE_RUN; m++)
		for (int c = 0; c < SG_CAUSE__COUNT; c++) {
			o = outcome("beta", c,
				    c == SG_CAUSE_TENANT_POLICY_VIOLATION ? SG_RULE_EGRESS : -1,
				    true, 1);
			o.mode = m;
			book(l, o);
		}
	t = get(l, "beta");
	assert_int_equal(t.failures_by_class[SG_CLASS_TENANT_CODE], 2); /* paused x 2 */
	assert_int_equal(t.failures_by_class[SG_CLASS_PLATFORM], 2);
	assert_int_equal(t.failures_by_class[SG_CLASS_VERDICT], 10);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_CRASH], 0);
	assert_int_equal(t.verdicts[SG_CAUSE_TENANT_CRASH], 2);
	assert_int_equal(t.verdicts[SG_CAUSE_TENANT_PAUSED], 0);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_PAUSED], 2);
	assert_int_equal(t.violations[SG_RULE_EGRESS], 2); /* still a security signal */
	/* A delivered verdict is a request that worked; paused and platform did not. */
	assert_int_equal(t.batches_ok, 2 + 10);
	assert_int_equal(t.batches_failed, 4);
	assert_int_equal(outcome_class(SG_MODE_BATCH, SG_CAUSE_TENANT_CRASH), SG_CLASS_TENANT_CODE);
	assert_int_equal(outcome_class(SG_MODE_RUN, SG_CAUSE_TENANT_TIMEOUT), SG_CLASS_VERDICT);
	assert_string_equal(fault_class_name(SG_CLASS_VERDICT), "verdict");
	ledger_free(l);
}

/* Timeouts' confirmation runs (issue 31): a timeout its confirmation
 * follows counts as an attempt but as nobody's failure until the
 * confirmation says whose it is; the confirmations are counted by how
 * they ended. */
static void test_confirmations(void **state)
{
	struct ledger *l = ledger_new();
	struct sg_outcome o;
	struct ledger_tenant t;

	o = outcome("acme", SG_CAUSE_TENANT_TIMEOUT, -1, false, 1000);
	o.confirm = SG_CONFIRM_NEXT;
	book(l, o);
	o = outcome("acme", SG_CAUSE_OK, -1, true, 400); /* overturned: the node's */
	o.confirm = SG_CONFIRM_RUN;
	book(l, o);
	o = outcome("acme", SG_CAUSE_TENANT_TIMEOUT, -1, false, 1000);
	o.confirm = SG_CONFIRM_NEXT;
	book(l, o);
	o = outcome("acme", SG_CAUSE_TENANT_TIMEOUT, -1, true, 1000); /* confirmed */
	o.confirm = SG_CONFIRM_RUN;
	book(l, o);
	o = outcome("acme", SG_CAUSE_TENANT_TIMEOUT, -1, true, 1000);
	o.confirm = SG_CONFIRM_UNADMITTED;
	book(l, o);
	t = get(l, "acme");
	assert_int_equal(t.attempts, 5);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_TIMEOUT],
			 2); /* the confirmed and the unadmitted */
	assert_int_equal(t.failures_by_class[SG_CLASS_TENANT_CODE], 2);
	assert_int_equal(t.confirmations, 2);
	assert_int_equal(t.confirmations_overturned, 1);
	assert_int_equal(t.confirmations_unadmitted, 1);
	assert_int_equal(t.batches_ok + t.batches_failed, 3);
	ledger_free(l);
}

static void test_bad_input(void **state)
{
	struct ledger *l = ledger_new();
	struct sg_outcome o;
	const char *bad_names[] = { "", "Acme", "-x", "_overflow", "a/b", "a b", NULL };

	for (int i = 0; i < 7; i++) {
		o = outcome(bad_names[i] ? bad_names[i] : "", SG_CAUSE_OK, -1, true, 1);
		assert_int_equal(ledger_book_outcome(l, &o), -EINVAL);
		assert_int_equal(ledger_book_event(l, bad_names[i], SG_EV_EXEC, SG_ACTION_LOGGED),
				 -EINVAL);
		assert_int_equal(ledger_book_kill(l, bad_names[i], SG_RULE_FILE), -EINVAL);
	}
	/* A tenant name filling the whole field has no terminator. */
	memset(o.tenant, 'a', sizeof(o.tenant));
	assert_int_equal(ledger_book_outcome(l, &o), -EINVAL);

	o = outcome("acme", SG_CAUSE_TENANT_POLICY_VIOLATION, -1, true, 1);
	assert_int_equal(ledger_book_outcome(l, &o), -EINVAL); /* violation needs a rule */
	o.rule = SG_RULE__COUNT;
	assert_int_equal(ledger_book_outcome(l, &o), -EINVAL);
	o = outcome("acme", SG_CAUSE__COUNT, -1, true, 1);
	assert_int_equal(ledger_book_outcome(l, &o), -EINVAL);
	assert_int_equal(ledger_book_event(l, "acme", 0, SG_ACTION_DENIED), -EINVAL);
	assert_int_equal(ledger_book_event(l, "acme", SG_EV__COUNT, SG_ACTION_DENIED), -EINVAL);
	assert_int_equal(ledger_book_event(l, "acme", SG_EV_EXEC, 0), -EINVAL);
	assert_int_equal(ledger_book_event(l, "acme", SG_EV_EXEC, SG_ACTION_LOGGED + 1), -EINVAL);
	assert_int_equal(ledger_book_kill(l, "acme", SG_RULE__COUNT), -EINVAL);
	assert_int_equal(ledger_book_kill(l, "acme", -1), -EINVAL);
	/* Nothing of a refused booking was counted, not even the tenant. */
	assert_int_equal(ledger_tenant_count(l), 0);

	/* A pinned artifact refused (src/exec/artifact.h) is a violation
	 * that names no rule: booked as the cause, no rule counted. */
	o = outcome("acme", SG_CAUSE_TENANT_POLICY_VIOLATION, -1, true, 0);
	snprintf(o.artifact_refused, sizeof(o.artifact_refused), "artifact /p: revoked");
	assert_int_equal(ledger_book_outcome(l, &o), 0);
	struct ledger_tenant t = get(l, "acme");
	assert_int_equal(t.failures[SG_CAUSE_TENANT_POLICY_VIOLATION], 1);
	for (int r = 0; r < SG_RULE__COUNT; r++)
		assert_int_equal(t.violations[r], 0);
	ledger_free(l);
}

static void test_tenant_cap(void **state)
{
	struct ledger *l = ledger_new();
	char name[32];
	struct ledger_tenant t;

	/* No policy check: every name counts as invented. */
	for (int i = 0; i < LEDGER_MAX_INVENTED; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		book(l, outcome(name, SG_CAUSE_OK, -1, true, 1));
	}
	assert_int_equal(ledger_overflowed(l), 0);
	book(l, outcome("late-1", SG_CAUSE_TENANT_OOM, -1, true, 1));
	assert_int_equal(ledger_book_kill(l, "late-2", SG_RULE_MEMORY), 0);
	book(l, outcome("t7", SG_CAUSE_TENANT_OOM, -1, true, 1)); /* known: its own row */

	assert_int_equal(ledger_tenant_count(l), LEDGER_MAX_INVENTED + 1);
	assert_int_equal(ledger_overflowed(l), 2);
	assert_int_equal(ledger_get(l, "late-1", &t), -ENOENT);
	t = get(l, LEDGER_OVERFLOW);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_OOM], 1);
	assert_int_equal(t.kills[SG_RULE_MEMORY], 1);
	t = get(l, "t7");
	assert_int_equal(t.failures[SG_CAUSE_TENANT_OOM], 1);
	ledger_free(l);
}

/* ---- the state file ---- */

static char dir[64], path[128];

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/sg-ledger-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/ledger.json", dir);
	return 0;
}

static int teardown_dir(void **state)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[400];

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	return rmdir(dir);
}

/* The names in the directory other than ledger.json, joined by spaces. */
static void other_files(char *out, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	out[0] = '\0';
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && strcmp(e->d_name, "ledger.json"))
			snprintf(out + strlen(out), len - strlen(out), "%s ", e->d_name);
	if (d)
		closedir(d);
}

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static struct ledger *populated(void)
{
	struct ledger *l = ledger_new();
	struct sg_outcome o;
	char name[32];

	book(l, outcome("acme", SG_CAUSE_TENANT_CRASH, -1, false, 100));
	book(l, outcome("acme", SG_CAUSE_TENANT_POLICY_VIOLATION, SG_RULE_EGRESS, true, 1234));
	o = outcome("beta", SG_CAUSE_OK, -1, true, 7);
	o.constant = true;
	o.invalid = true;
	book(l, o);
	book(l, outcome("beta", SG_CAUSE_PLATFORM_ERROR, -1, true, 333));
	assert_int_equal(ledger_book_event(l, "acme", SG_EV_FILE_DENIED, SG_ACTION_DENIED), 0);
	assert_int_equal(ledger_book_event(l, "acme", SG_EV_HEALTH, SG_ACTION_LOGGED), 0);
	assert_int_equal(ledger_book_kill(l, "beta", SG_RULE_EXEC), 0);
	/* acme, beta and 1023 more: the last one overflows. */
	for (int i = 0; i < LEDGER_MAX_INVENTED - 1; i++) {
		snprintf(name, sizeof(name), "bulk-%d", i);
		assert_int_equal(ledger_book_kill(l, name, SG_RULE_FORK), 0);
	}
	return l;
}

static void compare_tenant(const struct ledger_tenant *t, void *ctx)
{
	struct ledger_tenant u;

	assert_int_equal(ledger_get(ctx, t->name, &u), 0);
	assert_memory_equal(t, &u, sizeof(u));
}

static void test_round_trip(void **state)
{
	struct ledger *a = populated(), *b = ledger_new();
	struct journal_pos pos = { 7, 12345 };
	struct ledger_checkpoint cp;
	struct ledger_load_report rep;
	struct sg_outcome o;
	char others[256];

	o = outcome("acme", SG_CAUSE_TENANT_TIMEOUT, -1, true, 3);
	o.mode = SG_MODE_VERIFY;
	book(a, o); /* a verdict */
	o.confirm = SG_CONFIRM_RUN;
	o.cause = SG_CAUSE_OK;
	book(a, o); /* an overturned confirmation */
	o = outcome("acme", SG_CAUSE_PLATFORM_ERROR, -1, true, 2000);
	o.cpu_known = o.mem_peak_known = true;
	o.cpu_us = 1500000;
	o.mem_peak_bytes = 1u << 30;
	book(a, o); /* a metered run: 1.5 s CPU, 1 GiB for 2 s */
	assert_int_equal(get(a, "acme").cost[SG_CLASS_PLATFORM].cpu_us, 1500000);
	assert_true(get(a, "acme").cost[SG_CLASS_PLATFORM].mem_byte_seconds == 2.0 * (1u << 30));
	assert_int_equal(ledger_save(a, path, &pos), 0);
	assert_int_equal(ledger_save(a, path, &pos), 0); /* over an existing file */
	other_files(others, sizeof(others));
	assert_string_equal(others, ""); /* no temporary left behind */

	assert_int_equal(ledger_load(b, path, 0, &cp, &rep), 0);
	assert_int_equal(rep.n_dropped, 0);
	assert_true(cp.has_position);
	assert_int_equal(cp.pos.segment, 7);
	assert_int_equal(cp.pos.offset, 12345);
	assert_int_equal(ledger_tenant_count(b), ledger_tenant_count(a));
	assert_int_equal(ledger_overflowed(b), 1);
	ledger_foreach(a, compare_tenant, b); /* every count, every tenant */
	assert_int_equal(get(b, "acme").verdicts[SG_CAUSE_TENANT_TIMEOUT], 1);
	assert_int_equal(get(b, "acme").confirmations_overturned, 1);
	assert_int_equal(get(b, "acme").cost[SG_CLASS_PLATFORM].runs, 1);
	assert_int_equal(get(b, "acme").cost[SG_CLASS_PLATFORM].cpu_us, 1500000);
	assert_int_equal(get(b, "acme").cost[SG_CLASS_PLATFORM].wall_ms, 2000);
	assert_true(get(b, "acme").cost[SG_CLASS_PLATFORM].mem_byte_seconds == 2.0 * (1u << 30));
	assert_int_equal(get(b, "acme").cost[SG_CLASS_NONE].runs, 0); /* unmetered runs: none */
	ledger_load_report_free(&rep);

	/* And it keeps booking after the restore. */
	assert_int_equal(ledger_book_kill(b, "acme", SG_RULE_FILE), 0);
	assert_int_equal(get(b, "acme").kills[SG_RULE_FILE], 1);
	ledger_free(a);
	ledger_free(b);
}

static void test_missing_file(void **state)
{
	struct ledger *l = populated();
	struct journal_pos pos = { 1, 0 };
	struct ledger_checkpoint cp;
	struct ledger_load_report rep;
	struct stat st;

	assert_int_equal(ledger_load(l, path, 0, &cp, &rep), -ENOENT);
	assert_int_equal(get(l, "acme").attempts, 2); /* untouched */
	assert_int_equal(ledger_save(l, "/nonexistent-dir/ledger.json", &pos), -ENOENT);

	/* A directory where the checkpoint should be: said as it is, left
	 * where it is (never "set aside"), and no save can replace it. */
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(ledger_load(l, path, 0, &cp, &rep), -EISDIR);
	assert_non_null(strstr(rep.why, "Is a directory"));
	assert_non_null(strstr(rep.why, "left where it is"));
	assert_string_equal(rep.aside, "");
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_true(ledger_save(l, path, &pos) < 0);
	assert_int_equal(rmdir(path), 0);
	ledger_free(l);
}

static const char ok_tenant[] =
	"\"attempts\": 1, \"batches\": {\"ok\": 1, \"failed\": 0}, \"degenerate\": 0, "
	"\"invalid\": 0, \"verdicts\": {}, \"violations\": {}, \"kills\": {}, \"events\": {}, "
	"\"duration\": {\"buckets\": [1,0,0,0,0,0,0,0,0,0,0,0,0,0], \"sum_seconds\": 0.001}";
#define V2_HEAD "{\"version\": 2, \"journal\": {\"segment\": 3, \"offset\": 9}, \"overflowed\": 0, "

/* Not a ledger at all: nothing is restored, the file is moved aside (kept
 * byte for byte) - or, read-only, left exactly where it is. */
static void test_corrupt_files(void **state)
{
	char text[1024], others[512], aside[400], seen[1024];
	const char *corrupt[] = {
		"",
		V2_HEAD "\"tenants\": {\"acme\": {",
		"{\"version\": 3, \"journal\": {\"segment\": 1, \"offset\": 0}, \"overflowed\": 0, \"tenants\": {}}",
		V2_HEAD "\"tenants\": {}, \"x\": 1}",
		"{\"version\": 2, \"overflowed\": 0, \"tenants\": {}}",
		"{\"version\": 2, \"journal\": {\"segment\": -1, \"offset\": 0}, \"overflowed\": 0, \"tenants\": {}}",
		"{\"version\": 1, \"overflowed\": -1, \"tenants\": {}}",
		"{\"version\": 1, \"overflowed\": 0, \"tenants\": {}, \"x\": 1}",
		V2_HEAD "\"tenants\": {\"acme\": {%s, \"failures\": {}}, \"acme\": {}}}",
		"[1, 2]",
	};

	for (size_t i = 0; i < sizeof(corrupt) / sizeof(corrupt[0]); i++) {
		struct ledger *l = populated();
		uint64_t before = get(l, "acme").attempts;
		struct ledger_checkpoint cp;
		struct ledger_load_report rep;
		int fd;
		ssize_t n;

		snprintf(text, sizeof(text), corrupt[i], ok_tenant);
		write_file(text);
		/* Read-only (sandguard top): never renamed. */
		assert_int_equal(ledger_load(l, path, LEDGER_LOAD_READ_ONLY, &cp, &rep), -EBADMSG);
		assert_string_equal(rep.aside, "");
		assert_true(rep.why[0]);
		assert_int_equal(access(path, F_OK), 0);
		ledger_load_report_free(&rep);
		/* The agent's load: moved aside, kept. */
		assert_int_equal(ledger_load(l, path, 0, &cp, &rep), -EBADMSG);
		/* The ledger is untouched; the file is gone from its path but kept. */
		assert_int_equal(get(l, "acme").attempts, before);
		assert_int_equal(access(path, F_OK), -1);
		other_files(others, sizeof(others));
		assert_int_equal(strncmp(others, "ledger.json.corrupt-", 20), 0);
		assert_ptr_equal(strchr(others, ' '), others + strlen(others) - 1); /* one file */
		snprintf(aside, sizeof(aside), "%s/%.*s", dir, (int)strlen(others) - 1, others);
		assert_string_equal(rep.aside, aside); /* said where */
		fd = open(aside, O_RDONLY);
		assert_true(fd >= 0);
		n = read(fd, seen, sizeof(seen) - 1);
		close(fd);
		assert_int_equal(n, (ssize_t)strlen(text));
		assert_memory_equal(seen, text, n);
		unlink(aside);
		ledger_load_report_free(&rep);
		ledger_free(l);
	}
}

/* One bad tenant row costs that tenant alone: every other is restored,
 * the bad one is named, and the file stays (it is a ledger). */
static void test_bad_rows(void **state)
{
	char text[2048];
	const char *bad_rows[] = {
		"\"Bad Name\": {}",
		"\"acme\": {%s, \"failures\": {\"tenant_bogus\": 1}}",
		"\"acme\": {%s, \"failures\": {\"ok\": 1}}",
		"\"acme\": {%s, \"failures\": {\"tenant_crash\": 1.5}}",
		"\"acme\": {%s, \"failures\": {\"tenant_policy_violation\": 2}}",
		"\"acme\": {%s}",
		"\"acme\": {%s, \"failures\": {}, \"extra\": 0}",
		"\"acme\": {%s, \"failures\": {\"tenant_crash\": -1}}",
	};

	for (size_t i = 0; i < sizeof(bad_rows) / sizeof(bad_rows[0]); i++) {
		struct ledger *l = populated();
		struct ledger_checkpoint cp;
		struct ledger_load_report rep;
		struct ledger_tenant t;
		char row[1024];

		snprintf(row, sizeof(row), bad_rows[i], ok_tenant);
		snprintf(text, sizeof(text),
			 V2_HEAD "\"tenants\": {%s, \"beta\": {%s, \"failures\": "
				 "{\"tenant_crash\": 4}}}}",
			 row, ok_tenant);
		write_file(text);
		assert_int_equal(ledger_load(l, path, 0, &cp, &rep), 0);
		assert_int_equal(rep.n_dropped, 1);
		assert_string_equal(rep.dropped[0], i == 0 ? "Bad Name" : "acme");
		assert_true(rep.why[0]);
		assert_int_equal(access(path, F_OK), 0); /* not moved aside */
		assert_true(cp.has_position);
		assert_int_equal(cp.pos.segment, 3);
		t = get(l, "beta");
		assert_int_equal(t.failures[SG_CAUSE_TENANT_CRASH], 4);
		assert_int_equal(t.failures_by_class[SG_CLASS_TENANT_CODE], 4);
		assert_int_equal(ledger_get(l, "acme", &t), -ENOENT);
		assert_int_equal(ledger_tenant_count(l), 1);
		ledger_load_report_free(&rep);
		ledger_free(l);
	}
}

/* A checkpoint from before the journal: counts restored, no position. */
static void test_version_1(void **state)
{
	struct ledger *l = ledger_new();
	struct ledger_checkpoint cp;
	struct ledger_load_report rep;
	char text[1024];

	snprintf(
		text, sizeof(text),
		"{\"version\": 1, \"overflowed\": 0, \"tenants\": {\"acme\": {"
		"\"attempts\": 1, \"batches\": {\"ok\": 1, \"failed\": 0}, \"degenerate\": 0, "
		"\"invalid\": 0, \"violations\": {}, \"kills\": {}, \"events\": {}, "
		"\"duration\": {\"buckets\": [1,0,0,0,0,0,0,0,0,0,0,0,0,0], \"sum_seconds\": 0.001}, "
		"\"failures\": {\"tenant_crash\": 1}}}}");
	write_file(text);
	assert_int_equal(ledger_load(l, path, 0, &cp, &rep), 0);
	assert_false(cp.has_position);
	assert_int_equal(get(l, "acme").failures[SG_CAUSE_TENANT_CRASH], 1);
	assert_int_equal(get(l, "acme").failures_by_class[SG_CLASS_TENANT_CODE], 1);
	ledger_load_report_free(&rep);
	ledger_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_booking),
		cmocka_unit_test(test_class_split),
		cmocka_unit_test(test_confirmations),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_tenant_cap),
		cmocka_unit_test_setup_teardown(test_round_trip, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_missing_file, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_corrupt_files, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_bad_rows, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_version_1, setup_dir, teardown_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
