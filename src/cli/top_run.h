/* `sandguard top --run R`: one training run's totals, read from the outcome
 * journal (no agent needed): its batches and attempts, and what they cost
 * (the records' cpu_us, wall_ms and mem_peak_bytes, telemetry/
 * journal_record.h), CPU split by outcome class. Only the retained
 * segments are read: a run older than the journal's rotation shows what
 * is left of it. */
#ifndef SG_CLI_TOP_RUN_H
#define SG_CLI_TOP_RUN_H
#include <stdbool.h>

/* Print run `run_id`'s totals from the journal of `state_dir` (NULL: the
 * default). An exit status: SG_EXIT_OK, SG_EXIT_TENANT when the journal
 * has no record of the run, SG_EXIT_PLATFORM when it cannot be read. */
int top_run(const char *state_dir, const char *run_id, bool as_json);

#endif
