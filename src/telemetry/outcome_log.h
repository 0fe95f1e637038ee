/* The executor's local outcome log: one JSON line per attempt, appended to
 * <log>/outcomes.jsonl, <log> = $SANDGUARD_LOG_DIR or /var/log/sandguard.
 * It is the node-local record of every booking, independent of the agent
 * (whose ledger may be down). Each line:
 *   {"ts": "2025-01-01T00:00:00.000Z", "mode": "batch"|"verify"|"run",
 *    "tenant", "run_id", "batch_id", "sandbox", "cgroup_id",
 *    "attempt", "final", "cause", "class", "rule", "wall_ms",
 *    "n_scores", "score_mean", "score_var", "constant", "invalid", "detail"}
 * attempt is 1-based; 0 marks a batch refused before any sandbox ran
 * (paused, disabled, concurrency cap, missing agent). */
#ifndef SG_OUTCOME_LOG_H
#define SG_OUTCOME_LOG_H
#include <stddef.h>
#include "outcome.h"

#define SG_LOG_DIR_DEFAULT "/var/log/sandguard"
#define SG_OUTCOME_LOG     "outcomes.jsonl"

int outcome_log_path(char *buf, size_t len);

/* Append one line (under an flock, in one write, so concurrent executors
 * never interleave). Returns 0 or -errno; the caller warns and goes on:
 * a logging failure never fails a batch. */
int outcome_log_append(const struct sg_outcome *o, const char *mode, const char *detail);

#endif
