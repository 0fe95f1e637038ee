/* The ledger at a fleet's scale (issue 32): tenants with policy files
 * are each booked under their own name, however many invented names came
 * first; only invented names past LEDGER_MAX_INVENTED, or any name past
 * LEDGER_MAX_TENANTS rows, go to the overflow row. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "telemetry/ledger.h"
#include "ledger_fixture.h"

/* The policy check of the tests below: names starting "p-" have a file. */
static bool has_policy(const char *tenant, void *ctx)
{
	int *calls = ctx;

	(*calls)++;
	return !strncmp(tenant, "p-", 2);
}

/* A fleet: 2,000 invented names booked first, then 10,000 tenants with
 * policy files, each its own row; only the invented names past
 * LEDGER_MAX_INVENTED are folded into the overflow row. */
static void test_fleet(void **state)
{
	struct ledger *l = ledger_new();
	char name[32];
	int calls = 0;
	struct ledger_tenant t;

	ledger_set_policy_check(l, has_policy, &calls);
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "inv-%d", i);
		book(l, outcome(name, SG_CAUSE_OK, -1, true, 1));
	}
	for (int i = 0; i < 10000; i++) {
		snprintf(name, sizeof(name), "p-%d", i);
		book(l, outcome(name, SG_CAUSE_TENANT_CRASH, -1, true, 1));
		book(l, outcome(name, SG_CAUSE_OK, -1, true, 1)); /* found, not asked again */
	}
	assert_int_equal(calls, 12000);
	assert_int_equal(ledger_invented_count(l), LEDGER_MAX_INVENTED);
	assert_int_equal(ledger_overflowed(l), 2000 - LEDGER_MAX_INVENTED);
	assert_int_equal(ledger_tenant_count(l), LEDGER_MAX_INVENTED + 10000 + 1);
	for (int i = 0; i < 10000; i += 999) {
		snprintf(name, sizeof(name), "p-%d", i);
		t = get(l, name);
		assert_int_equal(t.attempts, 2);
		assert_int_equal(t.failures[SG_CAUSE_TENANT_CRASH], 1);
		assert_false(t.invented);
	}
	t = get(l, "p-9999");
	assert_int_equal(t.batches_ok, 1);
	assert_true(get(l, "inv-0").invented);
	assert_int_equal(ledger_get(l, "inv-1999", &t), -ENOENT);
	t = get(l, LEDGER_OVERFLOW);
	assert_int_equal(t.attempts, 2000 - LEDGER_MAX_INVENTED);
	assert_int_equal(t.failures[SG_CAUSE_TENANT_CRASH], 0); /* no policy tenant in it */
	ledger_free(l);
}

/* Rows in all are capped too: past LEDGER_MAX_TENANTS, even a tenant with
 * a policy file goes to the overflow row. */
static void test_total_cap(void **state)
{
	struct ledger *l = ledger_new();
	char name[32];
	int calls = 0;

	ledger_set_policy_check(l, has_policy, &calls);
	for (int i = 0; i < LEDGER_MAX_TENANTS; i++) {
		snprintf(name, sizeof(name), "p-%d", i);
		assert_int_equal(ledger_book_kill(l, name, SG_RULE_FORK), 0);
	}
	assert_int_equal(ledger_overflowed(l), 0);
	assert_int_equal(ledger_book_kill(l, "p-late", SG_RULE_FORK), 0);
	assert_int_equal(ledger_overflowed(l), 1);
	assert_int_equal(get(l, LEDGER_OVERFLOW).kills[SG_RULE_FORK], 1);
	assert_int_equal(get(l, "p-0").kills[SG_RULE_FORK], 1);
	snprintf(name, sizeof(name), "p-%d", LEDGER_MAX_TENANTS - 1);
	assert_int_equal(get(l, name).kills[SG_RULE_FORK], 1);
	assert_int_equal(calls, LEDGER_MAX_TENANTS + 1);
	ledger_free(l);
}

/* A checkpoint restored into a ledger with a policy check: each row is
 * asked again (a file added since the save makes its row a customer's),
 * and the invented count it leaves bounds the next invented names. */
static void test_reclassified_on_load(void **state)
{
	struct ledger *a = ledger_new(), *b = ledger_new();
	struct journal_pos pos = { 1, 0 };
	struct ledger_checkpoint cp;
	struct ledger_load_report rep = { 0 };
	json_t *doc;
	char name[32];
	int calls = 0;

	for (int i = 0; i < LEDGER_MAX_INVENTED; i++) {
		snprintf(name, sizeof(name), i % 2 ? "p-%d" : "inv-%d", i);
		book(a, outcome(name, SG_CAUSE_OK, -1, true, 1));
	}
	assert_int_equal(ledger_invented_count(a), LEDGER_MAX_INVENTED); /* no check in a */
	doc = ledger_to_json(a, &pos);
	assert_non_null(doc);
	ledger_set_policy_check(b, has_policy, &calls);
	assert_int_equal(ledger_from_json(b, doc, &cp, &rep), 0);
	assert_int_equal(rep.n_dropped, 0);
	ledger_load_report_free(&rep);
	json_decref(doc);
	assert_int_equal(calls, LEDGER_MAX_INVENTED);
	assert_int_equal(ledger_invented_count(b), LEDGER_MAX_INVENTED / 2);
	for (int i = 0; i < LEDGER_MAX_INVENTED / 2; i++) {
		snprintf(name, sizeof(name), "new-%d", i);
		book(b, outcome(name, SG_CAUSE_OK, -1, true, 1));
	}
	assert_int_equal(ledger_overflowed(b), 0);
	book(b, outcome("new-late", SG_CAUSE_OK, -1, true, 1));
	book(b, outcome("p-late", SG_CAUSE_OK, -1, true, 1));
	assert_int_equal(ledger_overflowed(b), 1);
	assert_int_equal(get(b, "p-late").attempts, 1);
	ledger_free(a);
	ledger_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet),
		cmocka_unit_test(test_total_cap),
		cmocka_unit_test(test_reclassified_on_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
