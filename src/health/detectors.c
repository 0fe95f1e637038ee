/* Reward explosion and collapse: see src/health/detectors.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "detectors.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double band_quantile(const double *sorted, size_t n, double p)
{
	double pos = p * (double)(n - 1);
	size_t i = (size_t)pos;

	if (n == 0)
		return 0;
	if (i + 1 >= n)
		return sorted[n - 1];
	return sorted[i] + (pos - (double)i) * (sorted[i + 1] - sorted[i]);
}

static bool window_ready(struct band_state *s, uint32_t cap, bool *oom)
{
	if (s->cap == cap && s->ring)
		return true;
	/* First use, or a new window size: nothing before compares. */
	free(s->ring);
	memset(s, 0, sizeof(*s));
	s->ring = calloc(cap, sizeof(*s->ring));
	if (!s->ring) {
		*oom = true;
		return false;
	}
	s->cap = cap;
	return true;
}

static void push(struct band_state *s, double mean)
{
	if (s->len < s->cap) {
		s->ring[(s->head + s->len++) % s->cap] = mean;
		return;
	}
	s->ring[s->head] = mean;
	s->head = (s->head + 1) % s->cap;
}

enum band_side band_observe(struct band_state *s, const struct sg_health *cfg, double mean,
			    bool *oom)
{
	enum band_side side = BAND_INSIDE, fired = BAND_INSIDE;
	double sorted_buf[256], *sorted = sorted_buf, iqr;

	*oom = false;
	if (cfg->band_window == 0 || !isfinite(mean))
		return BAND_INSIDE;
	if (!window_ready(s, cfg->band_window, oom))
		return BAND_INSIDE;
	if (s->len == s->cap) {
		if (s->cap > sizeof(sorted_buf) / sizeof(*sorted_buf)) {
			sorted = malloc(s->cap * sizeof(*sorted));
			if (!sorted) {
				*oom = true;
				return BAND_INSIDE;
			}
		}
		memcpy(sorted, s->ring, s->cap * sizeof(*sorted));
		qsort(sorted, s->cap, sizeof(*sorted), cmp_double);
		iqr = band_quantile(sorted, s->cap, 0.75) - band_quantile(sorted, s->cap, 0.25);
		if (iqr < cfg->band_min_iqr)
			iqr = cfg->band_min_iqr;
		s->last_median = band_quantile(sorted, s->cap, 0.5);
		s->last_lo = s->last_median - cfg->band_k * iqr;
		s->last_hi = s->last_median + cfg->band_k * iqr;
		s->last_mean = mean;
		s->judged++;
		if (sorted != sorted_buf)
			free(sorted);
		side = mean > s->last_hi   ? BAND_ABOVE
		       : mean < s->last_lo ? BAND_BELOW
					   : BAND_INSIDE;
		if (side != BAND_INSIDE && side != s->side)
			fired = side;
		s->side = side;
	}
	push(s, mean);
	return fired;
}

void band_free(struct band_state *s)
{
	free(s->ring);
	memset(s, 0, sizeof(*s));
}

void band_describe(const struct band_state *s, const struct sg_health *cfg, char *buf, size_t len)
{
	snprintf(buf, len,
		 "batch mean %.6g %s the band %.6g..%.6g (median %.6g +- %g x IQR, floor %g) of "
		 "the %u batches before it",
		 s->last_mean,
		 s->last_mean > s->last_hi   ? "above"
		 : s->last_mean < s->last_lo ? "below"
					     : "inside",
		 s->last_lo, s->last_hi, s->last_median, cfg->band_k, cfg->band_min_iqr, s->cap);
}
