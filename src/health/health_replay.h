/* Replaying a recorded score series through the score-stream detectors
 * (src/health/health.h), as `sandguard health replay` does: the
 * detectors exactly as the agent runs them, over a file instead of the
 * journal, with a ground truth to measure them against.
 *
 * A series is JSON lines, one batch each (blank lines are skipped):
 *   {"scores": [0.5, 1, ...]}                   a batch that passed the gate
 *   {"n": 64, "mean": 0.31, "var": 0.21}        the same, summarised
 *   {"invalid": true}                           a batch the schema gate refused
 * with optional members "run" (a run id: each run also gets detectors of
 * its own), "constant" (summaries: every score equal; else var == 0 and
 * n >= 2), "canary_probes" / "canary_failed" / "nondeterministic" (the
 * executor's canary findings), and "broken": true on the batches where the
 * series is broken (the ground truth: a detector firing on any other batch
 * is a false positive), "expect": ["explosion", ...] (the detectors the
 * series is meant to trip, on any line).
 *
 * Per scope (the tenant: every batch; each run: its own) and detector:
 * how often it fired, how often on healthy batches (the false-positive
 * rate is that over the healthy batches), and its lag: the batches from the
 * first broken batch to its first firing at or after it (0: it fired on
 * that very batch).
 */
#ifndef SG_HEALTH_REPLAY_H
#define SG_HEALTH_REPLAY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "health.h"

enum replay_scope { REPLAY_TENANT = 0, REPLAY_RUN, REPLAY__SCOPES };

struct replay_figures {
	uint64_t fired, fired_healthy;
	int64_t first_fire_after_break; /* batch index; -1: none */
};

struct replay_result {
	uint64_t batches, healthy;
	int64_t first_broken; /* batch index; -1: the series is healthy */
	size_t runs;
	unsigned expect; /* HEALTH_BIT()s the series names in "expect" */
	struct replay_figures fig[REPLAY__SCOPES][HEALTH__COUNT];
};

/* Replay `len` bytes of a series. 0; -EINVAL with `err` naming the line
 * and what is wrong; -ENOMEM. */
int health_replay(const char *text, size_t len, const char *name, const struct sg_health *cfg,
		  struct replay_result *res, char *err, size_t err_len);

/* The detector of that name, or -1. */
int health_detector_from_name(const char *name);

/* The lag in batches, or -1 when the detector never fired after the break
 * (or the series has none). */
int64_t replay_lag(const struct replay_result *res, enum replay_scope s, enum health_detector d);

#endif
