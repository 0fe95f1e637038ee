/* The fold: the journal into the ledger, each outcome id booked once (a
 * later record of an id, such as an orphan reaper's, is ignored), also
 * across a restart from a checkpoint position; tenants whose rows were
 * lost rebuilt from the records before it; bad lines skipped and counted;
 * the id set itself (growth, forgetting with deleted segments). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "telemetry/journal.h"
#include "telemetry/journal_record.h"
#include "telemetry/outcome_fold.h"
#include "telemetry/outcome_ids.h"

static char state[64];
static struct journal j;

static int setup(void **s)
{
	snprintf(state, sizeof(state), "/tmp/sg-fold-XXXXXX");
	if (!mkdtemp(state))
		return -1;
	unsetenv("SANDGUARD_JOURNAL_SEGMENT_BYTES");
	unsetenv("SANDGUARD_JOURNAL_KEEP");
	return journal_init(&j, state);
}

static int teardown(void **s)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	return system(cmd);
}

static struct journal_pos book(const char *id, const char *tenant, enum sg_cause cause, bool final)
{
	struct sg_outcome o = { .cause = cause, .rule = -1, .attempt = 1, .final = final };
	struct journal_pos at;
	char *line;
	size_t len;

	snprintf(o.id, sizeof(o.id), "%s", id);
	snprintf(o.tenant, sizeof(o.tenant), "%s", tenant);
	assert_int_equal(journal_record_encode(&o, NULL, &line, &len), 0);
	assert_int_equal(journal_append(&j, line, len, &at), 0);
	free(line);
	return at;
}

static struct ledger_tenant row(struct ledger *l, const char *tenant)
{
	struct ledger_tenant t;

	assert_int_equal(ledger_get(l, tenant, &t), 0);
	return t;
}

static int observed;
static void count_observed(void *ctx, const struct sg_outcome *o)
{
	observed++;
}

/* Fold everything from `from`; returns the fold (caller frees). */
static void fold_all(struct outcome_fold *f, struct ledger *l, struct journal_pos from)
{
	assert_int_equal(fold_init(f, j.dir, l, &from), 0);
	assert_true(fold_prime(f, NULL, 0) >= 0);
	while (fold_run(f, 3) > 0) /* small chunks: the agent's loop does the same */
		;
}

static void test_duplicates_ignored(void **s)
{
	struct ledger *l = ledger_new();
	struct outcome_fold f;
	struct ledger_tenant t;

	book("sb-1", "acme", SG_CAUSE_OK, true);
	book("sb-2", "acme", SG_CAUSE_TENANT_CRASH, true);
	/* The reaper's record of an attempt its executor booked already. */
	book("sb-1", "acme", SG_CAUSE_PLATFORM_ERROR, true);
	book("sb-2", "acme", SG_CAUSE_PLATFORM_ERROR, true);
	observed = 0;
	assert_int_equal(fold_init(&f, j.dir, l, &(struct journal_pos){ 0, 0 }), 0);
	f.observe = count_observed;
	assert_int_equal(fold_run(&f, 100), 4);
	assert_int_equal(fold_run(&f, 100), 0); /* nothing new */
	t = row(l, "acme");
	assert_int_equal(t.attempts, 2);
	assert_int_equal(t.batches_ok, 1);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_CRASH], 1); /* the first record wins */
	assert_int_equal(t.failures[SG_CAUSE_PLATFORM_ERROR], 0);
	assert_int_equal(f.stats.booked, 2);
	assert_int_equal(f.stats.duplicates, 2);
	assert_int_equal(observed, 2);

	/* The journal grows: only the new record is folded. */
	book("sb-3", "beta", SG_CAUSE_OK, true);
	assert_int_equal(fold_run(&f, 100), 1);
	assert_int_equal(row(l, "beta").batches_ok, 1);
	fold_free(&f);
	ledger_free(l);
}

/* A restart: counts restored from a checkpoint at `pos`, the rest folded.
 * A duplicate after the checkpoint of a record before it is still ignored,
 * and nothing is counted twice or lost. */
static void test_restart_from_checkpoint(void **s)
{
	struct ledger *first = ledger_new(), *restored = ledger_new(), *whole = ledger_new();
	struct outcome_fold f;
	struct journal_pos pos;
	char path[PATH_MAX];
	struct ledger_checkpoint cp;
	struct ledger_load_report rep;

	book("sb-1", "acme", SG_CAUSE_OK, true);
	book("sb-2", "acme", SG_CAUSE_TENANT_TIMEOUT, false);
	fold_all(&f, first, (struct journal_pos){ 0, 0 });
	pos = fold_position(&f);
	fold_free(&f);
	snprintf(path, sizeof(path), "%s/ledger.json", state);
	assert_int_equal(ledger_save(first, path, &pos), 0);

	book("sb-2", "acme", SG_CAUSE_PLATFORM_ERROR, true); /* a late duplicate */
	book("sb-3", "acme", SG_CAUSE_OK, true);

	assert_int_equal(ledger_load(restored, path, 0, &cp, &rep), 0);
	assert_true(cp.has_position);
	fold_all(&f, restored, cp.pos);
	assert_int_equal(f.stats.duplicates, 1);
	assert_int_equal(f.stats.booked, 1);
	fold_free(&f);
	fold_all(&f, whole, (struct journal_pos){ 0, 0 }); /* the same, from scratch */
	fold_free(&f);
	struct ledger_tenant a = row(restored, "acme"), b = row(whole, "acme");
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(a.attempts, 3);
	assert_int_equal(a.batches_ok, 2);
	assert_int_equal(a.failures[SG_CAUSE_TENANT_TIMEOUT], 1);
	assert_int_equal(a.failures[SG_CAUSE_PLATFORM_ERROR], 0);
	ledger_load_report_free(&rep);
	ledger_free(first);
	ledger_free(restored);
	ledger_free(whole);
}

/* A tenant whose checkpoint row was lost gets its outcomes back from the
 * records before the position; the others are not counted twice. */
static void test_reset_tenants(void **s)
{
	struct ledger *l = ledger_new();
	struct outcome_fold f;
	struct journal_pos pos;
	char *reset[] = { "acme" };

	book("a1", "acme", SG_CAUSE_OK, true);
	book("b1", "beta", SG_CAUSE_OK, true);
	book("a2", "acme", SG_CAUSE_TENANT_CRASH, true);
	pos = book("a3", "acme", SG_CAUSE_OK, true);
	/* The checkpoint said: beta had 1 batch, acme's row was unreadable. */
	assert_int_equal(fold_init(&f, j.dir, l, &pos), 0);
	assert_int_equal(fold_prime(&f, reset, 1), 3);
	assert_int_equal(ledger_get(l, "beta", &(struct ledger_tenant){ 0 }), -ENOENT);
	assert_int_equal(row(l, "acme").attempts, 2);
	while (fold_run(&f, 100) > 0)
		;
	assert_int_equal(row(l, "acme").attempts, 3);
	assert_int_equal(row(l, "acme").failures[SG_CAUSE_TENANT_CRASH], 1);
	fold_free(&f);
	ledger_free(l);
}

static void test_bad_lines(void **s)
{
	struct ledger *l = ledger_new();
	struct outcome_fold f;

	book("a1", "acme", SG_CAUSE_OK, true);
	assert_int_equal(journal_append(&j, "not json", 8, NULL), 0);
	assert_int_equal(journal_append(&j, "{\"v\":1,\"id\":\"x\"}", 17, NULL), 0);
	book("a2", "acme", SG_CAUSE_OK, true);
	fold_all(&f, l, (struct journal_pos){ 0, 0 });
	assert_int_equal(f.stats.bad, 2);
	assert_int_equal(f.stats.booked, 2);
	assert_int_equal(row(l, "acme").batches_ok, 2);
	fold_free(&f);
	ledger_free(l);
}

/* Rotation deletes old segments; the fold forgets their ids, so the set
 * stays the size of the retained journal. */
static void test_ids_follow_retention(void **s)
{
	struct ledger *l = ledger_new();
	struct outcome_fold f;
	char id[32];

	setenv("SANDGUARD_JOURNAL_SEGMENT_BYTES", "4096", 1);
	setenv("SANDGUARD_JOURNAL_KEEP", "2", 1);
	assert_int_equal(journal_init(&j, state), 0);
	assert_int_equal(fold_init(&f, j.dir, l, &(struct journal_pos){ 0, 0 }), 0);
	for (int i = 0; i < 300; i++) {
		snprintf(id, sizeof(id), "id-%d", i);
		book(id, "acme", SG_CAUSE_OK, true);
		while (fold_run(&f, 100) > 0) /* the agent keeps up */
			;
	}
	assert_int_equal(f.stats.booked, 300);
	assert_int_equal(f.stats.gap_segments, 0);
	assert_true(outcome_ids_count(f.ids) < 100); /* about two segments' worth */
	assert_int_equal(row(l, "acme").batches_ok, 300);
	fold_free(&f);
	ledger_free(l);
}

static void test_id_set(void **s)
{
	struct outcome_ids *ids = outcome_ids_new();
	char id[32];

	for (int i = 0; i < 10000; i++) {
		snprintf(id, sizeof(id), "x%d", i);
		assert_int_equal(outcome_ids_add(ids, id, 1 + i / 1000), 1);
	}
	assert_int_equal(outcome_ids_count(ids), 10000);
	for (int i = 0; i < 10000; i += 7) {
		snprintf(id, sizeof(id), "x%d", i);
		assert_int_equal(outcome_ids_add(ids, id, 99), 0);
	}
	outcome_ids_forget_before(ids, 6); /* segments 1..5 */
	assert_int_equal(outcome_ids_count(ids), 5000);
	assert_int_equal(outcome_ids_add(ids, "x0", 11), 1);    /* forgotten */
	assert_int_equal(outcome_ids_add(ids, "x9999", 11), 0); /* kept */
	outcome_ids_free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_duplicates_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_from_checkpoint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_tenants, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ids_follow_retention, setup, teardown),
		cmocka_unit_test(test_id_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
