/* Score-stream detectors. See src/health/health.h for what fires when. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "health.h"

void health_init(struct health_state *s)
{
	memset(s, 0, sizeof(*s));
}

void health_free(struct health_state *s)
{
	band_free(&s->band);
	memset(s, 0, sizeof(*s));
}

const char *health_detector_name(enum health_detector d)
{
	switch (d) {
	case HEALTH_CONSTANT:
		return "constant";
	case HEALTH_INVALID:
		return "invalid";
	case HEALTH_DEAD:
		return "dead";
	case HEALTH_EXPLOSION:
		return "explosion";
	case HEALTH_COLLAPSE:
		return "collapse";
	case HEALTH_CANARY:
		return "canary";
	case HEALTH_NONDETERMINISM:
		return "nondeterminism";
	default:
		return "unknown";
	}
}

static void window_reset(struct health_state *s, uint32_t window)
{
	s->window = window;
	s->batches = s->constant = s->invalid = 0;
	s->canary_failed = s->nondeterministic = 0;
	s->fired = 0;
	s->n = 0;
	s->mean = s->m2 = 0;
}

/* Pool one batch's scores into the window (Chan et al.'s parallel update,
 * so many small batches lose no precision to cancellation). */
static void pool_scores(struct health_state *s, const struct sg_outcome *o)
{
	double n_b = o->n_scores, delta, n;

	if (o->cause != SG_CAUSE_OK || o->n_scores == 0 || !isfinite(o->score_mean) ||
	    !isfinite(o->score_var) || o->score_var < 0)
		return;
	n = (double)s->n + n_b;
	delta = o->score_mean - s->mean;
	s->mean += delta * n_b / n;
	s->m2 += o->score_var * n_b + delta * delta * (double)s->n * n_b / n;
	s->n += o->n_scores;
}

static bool flat(double cur, double prev, double eps)
{
	/* The larger magnitude, at least 1 (no fmax(): the binary links no
	 * libm). A NaN compares false below, as it does with fmax(). */
	double scale = fabs(cur) > fabs(prev) ? fabs(cur) : fabs(prev);

	if (!(scale >= 1.0))
		scale = 1.0;

	return fabs(cur - prev) <= eps * scale;
}

/* A rate detector: fire once per window, as soon as the count makes the
 * full window's rate reach the threshold. */
static unsigned rate_check(struct health_state *s, enum health_detector d, uint32_t count,
			   double threshold)
{
	if ((s->fired & HEALTH_BIT(d)) || count == 0 || (double)count / s->window < threshold)
		return 0;
	s->fired |= HEALTH_BIT(d);
	s->fired_total[d]++;
	return HEALTH_BIT(d);
}

/* The window is full: judge the dead detector and keep its stats. */
static unsigned window_close(struct health_state *s, const struct sg_health *cfg)
{
	struct health_window_stats cur = { s->n, s->mean, s->n ? s->m2 / s->n : 0 };
	unsigned fired = 0;

	s->windows++;
	if (cur.n == 0) {
		s->have_prev = false;
		s->flat_windows = 0;
		return 0;
	}
	if (s->have_prev && flat(cur.mean, s->prev.mean, cfg->dead_epsilon) &&
	    flat(cur.var, s->prev.var, cfg->dead_epsilon))
		s->flat_windows++;
	else
		s->flat_windows = 0;
	s->prev = cur;
	s->have_prev = true;
	if (cfg->dead_windows > 0 && s->flat_windows >= cfg->dead_windows) {
		s->fired |= HEALTH_BIT(HEALTH_DEAD);
		s->fired_total[HEALTH_DEAD]++;
		fired = HEALTH_BIT(HEALTH_DEAD);
	}
	return fired;
}

/* The band detector: every scored ok batch's mean, its own window. */
static unsigned band_check(struct health_state *s, const struct sg_health *cfg,
			   const struct sg_outcome *o)
{
	enum health_detector d;
	bool oom;

	if (o->cause != SG_CAUSE_OK || o->n_scores == 0)
		return 0;
	switch (band_observe(&s->band, cfg, o->score_mean, &oom)) {
	case BAND_ABOVE:
		d = HEALTH_EXPLOSION;
		break;
	case BAND_BELOW:
		d = HEALTH_COLLAPSE;
		break;
	default:
		return 0;
	}
	s->fired_total[d]++;
	return HEALTH_BIT(d);
}

/* A canary finding fires at once (a count of 1 in a window of any size). */
static unsigned finding_check(struct health_state *s, enum health_detector d, uint32_t count)
{
	return rate_check(s, d, count, 0);
}

unsigned health_observe(struct health_state *s, const struct sg_health *cfg,
			const struct sg_outcome *o)
{
	unsigned fired = 0;

	if (!o->final)
		return 0;
	fired |= band_check(s, cfg, o);
	if (cfg->window == 0)
		return fired;
	if (s->window != cfg->window) {
		/* First use or a new window size: nothing before compares. */
		window_reset(s, cfg->window);
		s->have_prev = false;
		s->flat_windows = 0;
	} else if (s->batches >= s->window) {
		/* The last window closed on the previous batch; its counts were
		 * kept until now for health_describe(). */
		window_reset(s, cfg->window);
	}

	s->batches++;
	s->constant += o->constant;
	s->invalid += o->invalid;
	pool_scores(s, o);
	if (o->canary_failed || o->nondeterministic) {
		snprintf(s->canary_batch, sizeof(s->canary_batch), "%s", o->batch_id);
		snprintf(s->canary_detail, sizeof(s->canary_detail), "%s", o->canary_detail);
	}
	s->canary_failed += o->canary_failed ? 1 : 0;
	s->nondeterministic += o->nondeterministic;
	fired |= finding_check(s, HEALTH_CANARY, s->canary_failed);
	fired |= finding_check(s, HEALTH_NONDETERMINISM, s->nondeterministic);
	fired |= rate_check(s, HEALTH_CONSTANT, s->constant, cfg->constant_rate);
	fired |= rate_check(s, HEALTH_INVALID, s->invalid, cfg->invalid_rate);
	if (s->batches == s->window)
		fired |= window_close(s, cfg);
	return fired;
}

void health_describe(const struct health_state *s, const struct sg_health *cfg,
		     enum health_detector d, char *buf, size_t len)
{
	switch (d) {
	case HEALTH_CONSTANT:
		snprintf(buf, len, "%u of %u batches constant so far (rate %.2f >= %.2f)",
			 s->constant, s->window, (double)s->constant / s->window,
			 cfg->constant_rate);
		break;
	case HEALTH_INVALID:
		snprintf(buf, len, "%u of %u batches invalid so far (rate %.2f >= %.2f)",
			 s->invalid, s->window, (double)s->invalid / s->window, cfg->invalid_rate);
		break;
	case HEALTH_DEAD:
		snprintf(buf, len,
			 "score mean %.6g and variance %.6g flat within %g for "
			 "%u consecutive windows of %u batches",
			 s->prev.mean, s->prev.var, cfg->dead_epsilon, s->flat_windows, s->window);
		break;
	case HEALTH_EXPLOSION:
	case HEALTH_COLLAPSE:
		band_describe(&s->band, cfg, buf, len);
		break;
	case HEALTH_CANARY:
	case HEALTH_NONDETERMINISM:
		snprintf(buf, len, "batch %s: %s", s->canary_batch, s->canary_detail);
		break;
	default:
		snprintf(buf, len, "unknown detector %d", (int)d);
	}
}
