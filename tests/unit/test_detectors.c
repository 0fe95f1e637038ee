/* The reward band detector (explosion / collapse), the canary findings in
 * the health state, and the replay of a recorded series. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "health/detectors.h"
#include "health/health.h"
#include "health/health_replay.h"

/* The defaults (policies/default.json): window 20, band_window 50,
 * band_k 3, band_min_iqr 0.01; set by main(). */
static struct sg_health band_cfg;

static uint64_t rng_state;
static double uniform(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static void test_quantiles(void **s)
{
	const double v[] = { 1, 2, 3, 4, 5 };

	(void)s;
	assert_true(band_quantile(v, 5, 0.5) == 3);
	assert_true(band_quantile(v, 5, 0.25) == 2);
	assert_true(band_quantile(v, 5, 0.75) == 4);
	assert_true(band_quantile(v, 4, 0.5) == 2.5); /* between the middle two */
	assert_true(band_quantile(v, 1, 0.9) == 1);
}

/* Means uniform in 0.4..0.6 (IQR 0.1, band 0.2..0.8): never out. */
static enum band_side feed_noise(struct band_state *b, const struct sg_health *cfg, int n)
{
	enum band_side any = BAND_INSIDE;
	bool oom;

	for (int i = 0; i < n; i++) {
		enum band_side side = band_observe(b, cfg, 0.4 + 0.2 * uniform(), &oom);
		assert_false(oom);
		if (side != BAND_INSIDE)
			any = side;
	}
	return any;
}

static void test_band_fires_once_per_excursion(void **s)
{
	struct band_state b = { 0 };
	bool oom;

	(void)s;
	rng_state = 7;
	/* Not judged before the window is full, however far out. */
	for (int i = 0; i < 49; i++)
		assert_int_equal(band_observe(&b, &band_cfg, i == 10 ? 100 : 0.5, &oom),
				 BAND_INSIDE);
	assert_int_equal(b.judged, 0);
	band_free(&b);
	assert_int_equal(feed_noise(&b, &band_cfg, 2000), BAND_INSIDE);
	assert_int_equal(band_observe(&b, &band_cfg, 5.0, &oom), BAND_ABOVE);
	/* Still out: no second firing. */
	assert_int_equal(band_observe(&b, &band_cfg, 5.0, &oom), BAND_INSIDE);
	assert_int_equal(b.side, BAND_ABOVE);
	/* Back in, then out again: fires again; a collapse on the other side. */
	assert_int_equal(band_observe(&b, &band_cfg, 0.5, &oom), BAND_INSIDE);
	assert_int_equal(band_observe(&b, &band_cfg, 5.0, &oom), BAND_ABOVE);
	assert_int_equal(band_observe(&b, &band_cfg, 0.5, &oom), BAND_INSIDE);
	assert_int_equal(band_observe(&b, &band_cfg, -3.0, &oom), BAND_BELOW);
	band_free(&b);
}

static void test_band_floor_and_reset(void **s)
{
	struct sg_health cfg = band_cfg;
	struct band_state b = { 0 };
	bool oom;
	char why[256];

	(void)s;
	/* A window that never moves: IQR 0, floored at 0.01, band 0.47..0.53. */
	for (int i = 0; i < 50; i++)
		band_observe(&b, &cfg, 0.5, &oom);
	assert_int_equal(band_observe(&b, &cfg, 0.52, &oom), BAND_INSIDE);
	assert_int_equal(band_observe(&b, &cfg, 0.54, &oom), BAND_ABOVE);
	band_describe(&b, &cfg, why, sizeof(why));
	assert_non_null(strstr(why, "batch mean 0.54 above the band 0.47..0.53"));
	/* A new window size starts over: nothing is judged until it fills. */
	cfg.band_window = 10;
	assert_int_equal(band_observe(&b, &cfg, 50, &oom), BAND_INSIDE);
	assert_int_equal(b.judged, 0);
	assert_int_equal(b.len, 1);
	/* Off. */
	cfg.band_window = 0;
	assert_int_equal(band_observe(&b, &cfg, 500, &oom), BAND_INSIDE);
	band_free(&b);
}

static struct sg_outcome scored(double mean, double var)
{
	struct sg_outcome o = { .final = true, .cause = SG_CAUSE_OK, .n_scores = 32 };

	o.score_mean = mean;
	o.score_var = var;
	return o;
}

static void test_health_state_runs_band_and_canaries(void **s)
{
	struct health_state hs;
	struct sg_outcome o;
	unsigned fired = 0;
	char why[320];

	(void)s;
	rng_state = 11;
	health_init(&hs);
	for (int i = 0; i < 200; i++)
		fired |= health_observe(&hs, &band_cfg,
					(o = scored(0.4 + 0.2 * uniform(), 0.2), &o));
	assert_int_equal(fired, 0);
	o = scored(0.01, 0.01);
	assert_int_equal(health_observe(&hs, &band_cfg, &o), HEALTH_BIT(HEALTH_COLLAPSE));
	health_describe(&hs, &band_cfg, HEALTH_COLLAPSE, why, sizeof(why));
	assert_non_null(strstr(why, "below the band"));
	/* A canary finding fires on its batch, once per window. */
	o = scored(0.5, 0.2);
	o.canary_probes = 2;
	o.canary_failed = 1;
	snprintf(o.batch_id, sizeof(o.batch_id), "b-77");
	snprintf(o.canary_detail, sizeof(o.canary_detail), "probe hack scored 1");
	fired = health_observe(&hs, &band_cfg, &o);
	assert_true(fired & HEALTH_BIT(HEALTH_CANARY));
	health_describe(&hs, &band_cfg, HEALTH_CANARY, why, sizeof(why));
	assert_string_equal(why, "batch b-77: probe hack scored 1");
	assert_false(health_observe(&hs, &band_cfg, &o) & HEALTH_BIT(HEALTH_CANARY));
	/* Probes in range are no finding. */
	o.canary_failed = 0;
	o.canary_detail[0] = '\0';
	for (int i = 0; i < 40; i++)
		assert_false(health_observe(&hs, &band_cfg, &o) & HEALTH_BIT(HEALTH_CANARY));
	o.nondeterministic = true;
	assert_true(health_observe(&hs, &band_cfg, &o) & HEALTH_BIT(HEALTH_NONDETERMINISM));
	assert_int_equal(hs.fired_total[HEALTH_CANARY], 1);
	health_free(&hs);
}

static void test_replay(void **s)
{
	struct replay_result r;
	char err[256], *text;
	size_t used = 0, cap = 1 << 20;

	(void)s;
	text = malloc(cap);
	assert_non_null(text);
	rng_state = 3;
	/* 300 healthy batches of run r1, then an explosion on 300..319, with
	 * one schema failure among the healthy ones and a blank line. */
	for (int i = 0; i < 320; i++)
		used += (size_t)snprintf(
			text + used, cap - used,
			i == 100   ? "{\"run\":\"r1\",\"invalid\":true}\n\n"
			: i >= 300 ? "{\"run\":\"r1\",\"n\":8,\"mean\":%.3f,\"var\":0.1,"
				     "\"broken\":true,\"expect\":[\"explosion\"]}\n"
				   : "{\"run\":\"r1\",\"scores\":[%.3f,0.5]}\n",
			i >= 300 ? 9.0 : 0.4 + 0.2 * uniform());
	assert_int_equal(health_replay(text, used, "t", &band_cfg, &r, err, sizeof(err)), 0);
	assert_int_equal(r.batches, 320);
	assert_int_equal(r.healthy, 300);
	assert_int_equal(r.first_broken, 300);
	assert_int_equal(r.runs, 1);
	assert_int_equal(r.expect, HEALTH_BIT(HEALTH_EXPLOSION));
	assert_int_equal(r.fig[REPLAY_TENANT][HEALTH_EXPLOSION].fired, 1);
	assert_int_equal(r.fig[REPLAY_TENANT][HEALTH_EXPLOSION].fired_healthy, 0);
	assert_int_equal(replay_lag(&r, REPLAY_TENANT, HEALTH_EXPLOSION), 0);
	assert_int_equal(replay_lag(&r, REPLAY_RUN, HEALTH_EXPLOSION), 0);
	/* One invalid batch in a window of 20 is a rate of 0.05 < 0.2. */
	assert_int_equal(r.fig[REPLAY_TENANT][HEALTH_INVALID].fired, 0);
	assert_int_equal(replay_lag(&r, REPLAY_TENANT, HEALTH_DEAD), -1);

	/* Errors name the line. */
	assert_int_equal(health_replay("{\"scores\":[1]}\n[1]\n", 19, "x.jsonl", &band_cfg, &r, err,
				       sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "x.jsonl:2: not a JSON object");
	assert_int_equal(health_replay("{\"mean\":1}\n", 11, "x.jsonl", &band_cfg, &r, err,
				       sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "x.jsonl:1: expected \"scores\""));
	const char *boom = "{\"n\":2,\"mean\":1,\"var\":0,\"expect\":[\"boom\"]}";
	assert_int_equal(health_replay(boom, strlen(boom), "x.jsonl", &band_cfg, &r, err,
				       sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "expect"));
	free(text);
}

int main(void)
{
	static struct sg_policy p;

	policy_defaults(&p);
	band_cfg = p.health;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantiles),
		cmocka_unit_test(test_band_fires_once_per_excursion),
		cmocka_unit_test(test_band_floor_and_reset),
		cmocka_unit_test(test_health_state_runs_band_and_canaries),
		cmocka_unit_test(test_replay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
