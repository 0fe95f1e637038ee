/* Score-stream health: per-tenant detectors over windows of batches, in the
 * spirit of the observability runbook's run-health catalog (a reward stream
 * that is constant, broken or flat must not stay quiet).
 *
 * Windows are tumbling and counted in batches: only final outcomes (the
 * batch's last attempt) are observed; earlier attempts are ignored. A window
 * holds cfg->window batches. Three detectors:
 *
 *   constant  constant (degenerate) batches / window >= cfg->constant_rate
 *   invalid   invalid (schema-gate) batches / window >= cfg->invalid_rate
 *   dead      the window's score mean and variance are both flat versus the
 *             previous window's for cfg->dead_windows consecutive windows
 *
 * constant and invalid fire as soon as the window is certain to reach its
 * threshold (the rate is always over the full window size, and counts only
 * grow), so they fire at most once per window, on the batch that crossed it.
 * They need at least one such batch: a rate of 0 means "any". A rate above 1
 * never fires.
 *
 * dead is judged when a window closes. Its scores are pooled from the
 * batches whose cause is ok and that carry scores (n_scores, score_mean,
 * score_var; score_var is taken as each batch's population variance).
 * "Flat" is |cur - prev| <= dead_epsilon * max(1, |cur|, |prev|) for the
 * mean and for the variance: an absolute tolerance for magnitudes up to 1,
 * relative above, so rewards on any scale are judged alike and values near
 * zero are not inflated. A window without any scores breaks the streak and is
 * no reference for the next. Once the streak reaches dead_windows, dead fires
 * on every window that extends it (once per window), so its counter keeps
 * rising while the stream stays dead. dead_windows = 0 turns dead off.
 *
 * explosion and collapse are the band detector of detectors.h, judged on
 * every scored ok batch's mean over its own trailing window of batches
 * (cfg->band_window, independent of the tumbling window).
 *
 * canary and nondeterminism come from the executor's canaries (the batch's
 * record, src/exec/canary.h): canary fires on a batch with a probe scored
 * outside its accepted range, nondeterminism on a batch whose determinism
 * probe scored differently in a second sandbox; each at most once per
 * tumbling window, so its counter counts windows with such batches.
 *
 * A window size of 0 turns constant, invalid, dead, canary and
 * nondeterminism off. If the window size changes (a
 * policy reload), the current window and the dead streak start over.
 *
 * Each detector fires at most once per window; health_observe() returns the
 * bits (HEALTH_BIT(d)) of the detectors that fired on this observation.
 * The state is plain memory: one per tenant, zeroed by health_init(), with no
 * locking (the agent loop owns it).
 */
#ifndef SG_HEALTH_H
#define SG_HEALTH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "detectors.h"
#include "telemetry/outcome.h"
#include "policy/policy.h"

enum health_detector {
	HEALTH_CONSTANT = 0,
	HEALTH_INVALID,
	HEALTH_DEAD,
	HEALTH_EXPLOSION,
	HEALTH_COLLAPSE,
	HEALTH_CANARY,
	HEALTH_NONDETERMINISM,
	HEALTH__COUNT
};

#define HEALTH_BIT(d) (1u << (d))

struct health_window_stats {
	uint64_t n; /* scores pooled */
	double mean;
	double var;
};

struct health_state {
	/* the current window */
	uint32_t window; /* the size it was started with */
	uint32_t batches, constant, invalid, canary_failed, nondeterministic;
	unsigned fired; /* bits fired in this window */
	uint64_t n;     /* pooled scores: count, mean, sum of squared deviations */
	double mean, m2;
	/* closed windows */
	bool have_prev;
	struct health_window_stats prev; /* the last closed window with scores */
	uint32_t flat_windows;           /* current streak of flat windows */
	uint64_t windows;                /* windows closed */
	uint64_t fired_total[HEALTH__COUNT];
	struct band_state band; /* explosion / collapse */
	/* the last batch with a canary finding (health_describe()) */
	char canary_batch[SG_ID_BUF];
	char canary_detail[SG_CANARY_DETAIL];
};

void health_init(struct health_state *s);
/* Frees what the band detector allocated; the state is zeroed. */
void health_free(struct health_state *s);

/* Observe one outcome; returns the HEALTH_BIT()s that fired on it. */
unsigned health_observe(struct health_state *s, const struct sg_health *cfg,
			const struct sg_outcome *o);

/* "constant", "invalid", "dead", "explosion", "collapse", "canary",
 * "nondeterminism" (the metric label and the event's detector). */
const char *health_detector_name(enum health_detector d);

/* One line on why `d` fired, for the event and the log, e.g.
 * "12 of 20 batches constant (rate 0.60 >= 0.50)". Meant to be called right
 * after health_observe() returned its bit. */
void health_describe(const struct health_state *s, const struct sg_health *cfg,
		     enum health_detector d, char *buf, size_t len);

#endif
