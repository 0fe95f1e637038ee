/* The reward band detector: reward explosion and collapse, in the
 * observability runbook's words "the batch mean leaves a robust band,
 * median +/- k*IQR of its own trailing window, in either direction".
 *
 * The window counts batches, never time: it holds the means of the last
 * cfg->band_window scored batches before the one judged. A batch is judged
 * once the window is full; its mean is then compared with
 *
 *     median - k * max(IQR, band_min_iqr) .. median + k * max(IQR, band_min_iqr)
 *
 * (quartiles by linear interpolation between order statistics). Above the
 * band is an explosion, below a collapse. The floor keeps a window whose
 * means barely move (a reward of 0 or 1 on large batches) from firing on
 * the smallest change; band_min_iqr 0 turns it off.
 *
 * A detector fires on the first batch of an excursion, and again only after
 * a batch back inside the band: a stream that stays out fires once, not on
 * every batch. Every judged batch joins the window afterwards, in band or
 * not, so a lasting shift becomes the new normal after about half a window
 * (a change is news once). band_window 0 turns both off; a change of
 * band_window (a policy reload) starts the window over.
 */
#ifndef SG_DETECTORS_H
#define SG_DETECTORS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/policy.h"

enum band_side { BAND_INSIDE = 0, BAND_ABOVE, BAND_BELOW };

struct band_state {
	double *ring; /* band_window means, oldest at head once full; NULL until used */
	uint32_t cap, len, head;
	enum band_side side; /* where the last judged batch was */
	/* the last judgement, for band_describe() */
	double last_mean, last_median, last_lo, last_hi;
	uint64_t judged;
};

/* Observe one scored batch's mean (a finite number). Returns BAND_ABOVE
 * or BAND_BELOW when an explosion or a collapse fires on it, else
 * BAND_INSIDE (also when the window is not full yet). -ENOMEM is never
 * returned: without memory for the window the detector stays quiet and
 * *oom is set. */
enum band_side band_observe(struct band_state *s, const struct sg_health *cfg, double mean,
			    bool *oom);

void band_free(struct band_state *s);

/* "batch mean 4.2 above the band 0.31 +- 3 x 0.12 (0.01..0.67) of the last
 * 50 batches" */
void band_describe(const struct band_state *s, const struct sg_health *cfg, char *buf, size_t len);

/* The p-quantile (0..1) of n sorted values, interpolated linearly. */
double band_quantile(const double *sorted, size_t n, double p);

#endif
