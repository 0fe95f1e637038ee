/* Outcomes and bookings for the ledger's unit tests (test_ledger.c,
 * test_ledger_fleet.c). */
#ifndef SG_TEST_LEDGER_FIXTURE_H
#define SG_TEST_LEDGER_FIXTURE_H
#include <stdio.h>
#include "telemetry/ledger.h"

static struct sg_outcome outcome(const char *tenant, enum sg_cause cause, int rule, bool final,
				 uint64_t wall_ms)
{
	struct sg_outcome o = {
		.cause = cause, .rule = rule, .attempt = 1, .final = final, .wall_ms = wall_ms
	};
	snprintf(o.tenant, sizeof(o.tenant), "%s", tenant);
	return o;
}

static struct ledger_tenant get(struct ledger *l, const char *tenant)
{
	struct ledger_tenant t;
	assert_int_equal(ledger_get(l, tenant, &t), 0);
	return t;
}

static void book(struct ledger *l, struct sg_outcome o)
{
	assert_int_equal(ledger_book_outcome(l, &o), 0);
}

#endif
