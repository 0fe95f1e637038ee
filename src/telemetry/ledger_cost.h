/* What a tenant's runs cost, as the ledger keeps it (one row per tenant,
 * src/telemetry/ledger.h): the sums of the journal's metered records.
 *
 * Per outcome class (outcome_class(); SG_CLASS_NONE for runs that ended
 * ok), over every attempt whose record carries its cgroup's counters
 * (journal_record.h "cpu_us", "mem_peak_bytes"):
 *   runs              attempts metered
 *   cpu_us            CPU time (cgroup usage_usec), summed
 *   wall_ms           the attempts' wall time, summed
 *   mem_byte_seconds  peak memory x wall time, summed: the memory the
 *                     run held a claim on, in the unit clouds bill
 * A timeout its confirmation run follows is booked under its own class
 * (tenant_code): the CPU was spent whoever's fault the timeout turns out
 * to be. Checkpoint form, inside a tenant's row (left out when nothing
 * was metered; missing in older files, which then count from 0):
 *   "cost": {"<class>": {"runs": N, "cpu_us": N, "wall_ms": N,
 *                        "mem_byte_seconds": X}, ...} */
#ifndef SG_LEDGER_COST_H
#define SG_LEDGER_COST_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "outcome.h"

#define LEDGER_COST_CLASSES (SG_CLASS_VERDICT + 1)

struct ledger_cost {
	uint64_t runs;
	uint64_t cpu_us;
	uint64_t wall_ms;
	double mem_byte_seconds;
};

/* Add one outcome's cost (nothing when it carries no CPU time). */
void ledger_cost_book(struct ledger_cost cost[LEDGER_COST_CLASSES], const struct sg_outcome *o);

/* The checkpoint object (NULL when nothing was metered, or on ENOMEM:
 * then *oom is set). */
json_t *ledger_cost_to_json(const struct ledger_cost cost[LEDGER_COST_CLASSES], bool *oom);

/* Read it back. 0, or -1 with `why` saying what is wrong. */
int ledger_cost_from_json(json_t *obj, struct ledger_cost cost[LEDGER_COST_CLASSES], char *why,
			  size_t why_len);

#endif
