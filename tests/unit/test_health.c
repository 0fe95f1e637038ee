/* Score-stream detectors on synthetic series from a seeded PRNG: each fires
 * on its constructed case, at the batch or window expected, and all stay
 * silent on noisy healthy streams (compare the runbook's detector tests). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "health/health.h"

static const struct sg_health cfg = {
	/* the defaults in policies/default.json */
	.window = 20,      .constant_rate = 0.5, .invalid_rate = 0.2,
	.dead_windows = 5, .dead_epsilon = 1e-6,
};

#define SCORES 32 /* scores per batch */

/* splitmix64: tiny, seeded, the same series on every machine. */
static uint64_t rng_state;
static double uniform(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return ((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static double normal(double mean, double sd)
{
	double u = uniform(), v = uniform();
	return mean + sd * sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

/* A final, ok batch of SCORES scores drawn from N(mean, sd). */
static struct sg_outcome batch(double mean, double sd)
{
	struct sg_outcome o = { .tenant = "acme",
				.cause = SG_CAUSE_OK,
				.rule = -1,
				.attempt = 1,
				.final = true,
				.n_scores = SCORES };
	double x[SCORES], sum = 0, ss = 0;

	for (int i = 0; i < SCORES; i++)
		sum += x[i] = normal(mean, sd);
	o.score_mean = sum / SCORES;
	for (int i = 0; i < SCORES; i++)
		ss += (x[i] - o.score_mean) * (x[i] - o.score_mean);
	o.score_var = ss / SCORES;
	o.constant = sd == 0;
	return o;
}

static struct sg_outcome invalid_batch(void)
{
	struct sg_outcome o = { .tenant = "acme",
				.cause = SG_CAUSE_TENANT_BAD_OUTPUT,
				.rule = -1,
				.attempt = 1,
				.final = true,
				.invalid = true };
	return o;
}

/* Feed n batches; record which batch indices fired each detector. */
struct fires {
	int at[HEALTH__COUNT][64];
	int n[HEALTH__COUNT];
};

static void record(struct fires *f, unsigned mask, int i)
{
	for (int d = 0; d < HEALTH__COUNT; d++)
		if (mask & HEALTH_BIT(d)) {
			assert_true(f->n[d] < 64);
			f->at[d][f->n[d]++] = i;
		}
}

/* A healthy stream: noisy scores, rare invalid output, rare constant batches. */
static int n_invalid, n_constant;
static struct sg_outcome healthy(double mean, double sd)
{
	double u = uniform();

	if (u < 0.01) {
		n_invalid++;
		return invalid_batch();
	}
	if (u < 0.03) {
		n_constant++;
		return batch(mean, 0);
	}
	return batch(mean, sd);
}

static void test_silent_on_healthy(void **state)
{
	struct health_state s;
	struct fires f = { 0 };

	/* 100 windows on a [0,1] reward, then 100 on a large-scale one. */
	rng_state = 1;
	health_init(&s);
	for (int i = 0; i < 4000; i++) {
		struct sg_outcome o = i < 2000 ? healthy(0.5, 0.1) : healthy(1000, 10);
		if (i == 2000)
			health_init(&s);
		record(&f, health_observe(&s, &cfg, &o), i);
	}
	assert_int_equal(f.n[HEALTH_CONSTANT], 0);
	assert_int_equal(f.n[HEALTH_INVALID], 0);
	assert_int_equal(f.n[HEALTH_DEAD], 0);
	assert_int_equal(s.windows, 100);
	/* The series did hold constant and invalid batches: silent, not blind. */
	assert_true(n_invalid > 10 && n_constant > 30);
}

/* k of every 20 batches constant (at seeded positions), the rest healthy. */
static void run_rate_case(int k, bool constant, struct fires *f)
{
	struct health_state s;

	health_init(&s);
	for (int w = 0; w < 5; w++) {
		int pos[20], chosen = 0;
		memset(pos, 0, sizeof(pos));
		while (chosen < k) {
			int p = (int)(uniform() * 20);
			if (!pos[p]) {
				pos[p] = 1;
				chosen++;
			}
		}
		for (int b = 0; b < 20; b++) {
			struct sg_outcome o = pos[b] ? (constant ? batch(0.5, 0) : invalid_batch())
						     : batch(0.5, 0.1);
			record(f, health_observe(&s, &cfg, &o), w * 20 + b);
		}
	}
}

static void test_constant_rate(void **state)
{
	struct fires f = { 0 };

	rng_state = 2;
	run_rate_case(9, true, &f); /* 0.45 < 0.5 */
	assert_int_equal(f.n[HEALTH_CONSTANT], 0);
	run_rate_case(10, true, &f); /* 0.50: the threshold itself fires */
	assert_int_equal(f.n[HEALTH_CONSTANT], 5);
	memset(&f, 0, sizeof(f));
	run_rate_case(14, true, &f);
	/* Once per window, each inside its own window. */
	assert_int_equal(f.n[HEALTH_CONSTANT], 5);
	for (int w = 0; w < 5; w++)
		assert_int_equal(f.at[HEALTH_CONSTANT][w] / 20, w);
	assert_int_equal(f.n[HEALTH_INVALID], 0);
	assert_int_equal(f.n[HEALTH_DEAD], 0);
}

static void test_invalid_rate(void **state)
{
	struct fires f = { 0 };

	rng_state = 3;
	run_rate_case(3, false, &f); /* 0.15 < 0.2 */
	assert_int_equal(f.n[HEALTH_INVALID], 0);
	run_rate_case(4, false, &f);
	assert_int_equal(f.n[HEALTH_INVALID], 5);
	for (int w = 0; w < 5; w++)
		assert_int_equal(f.at[HEALTH_INVALID][w] / 20, w);
	assert_int_equal(f.n[HEALTH_CONSTANT], 0);
}

/* It fires on the batch that crosses the threshold, not at the window's end. */
static void test_rate_fires_early(void **state)
{
	struct health_state s;
	struct sg_outcome ok, bad = invalid_batch();
	char why[160];

	rng_state = 4;
	health_init(&s);
	ok = batch(0.5, 0.1);
	assert_int_equal(health_observe(&s, &cfg, &ok), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(health_observe(&s, &cfg, &bad), 0);
	assert_int_equal(health_observe(&s, &cfg, &bad), HEALTH_BIT(HEALTH_INVALID));
	assert_int_equal(health_observe(&s, &cfg, &bad), 0); /* once per window */
	health_describe(&s, &cfg, HEALTH_INVALID, why, sizeof(why));
	assert_string_equal(why, "5 of 20 batches invalid so far (rate 0.25 >= 0.20)");

	/* Earlier attempts of a batch are not batches. */
	bad.final = false;
	for (int i = 0; i < 100; i++)
		assert_int_equal(health_observe(&s, &cfg, &bad), 0);
	assert_int_equal(s.batches, 6);
}

/* Healthy for 10 windows, then the reward goes flat. */
static void run_dead_case(double mean, double sd_after, struct fires *f)
{
	struct health_state s;

	health_init(&s);
	for (int i = 0; i < 400; i++) {
		struct sg_outcome o = i < 200 ? batch(mean, 0.1 * (fabs(mean) > 1 ? fabs(mean) : 1))
					      : batch(mean, sd_after);
		o.constant = false; /* judge the dead detector alone */
		record(f, health_observe(&s, &cfg, &o), i);
	}
}

static void test_dead_stream(void **state)
{
	struct fires f = { 0 };

	rng_state = 5;
	/* Constant reward from window 10: window 10 differs from 9, windows
	 * 11..15 are flat, so the fifth flat window (15) fires first, then
	 * every window that follows (16..19). */
	run_dead_case(0.7, 0, &f);
	assert_int_equal(f.n[HEALTH_DEAD], 5);
	assert_int_equal(f.at[HEALTH_DEAD][0], 15 * 20 + 19);
	assert_int_equal(f.at[HEALTH_DEAD][4], 19 * 20 + 19);

	/* Flat within noise: jitter far below epsilon still counts as dead. */
	memset(&f, 0, sizeof(f));
	run_dead_case(0.7, 1e-9, &f);
	assert_int_equal(f.n[HEALTH_DEAD], 5);
	assert_int_equal(f.at[HEALTH_DEAD][0], 15 * 20 + 19);

	/* Relative above 1: a reward near 1000 with noise of 1e-7 of its size
	 * moves its window mean by a few 1e-6 (more than epsilon as an
	 * absolute), yet relative to 1000 it is flat: dead. */
	memset(&f, 0, sizeof(f));
	run_dead_case(1000, 1e-4, &f);
	assert_int_equal(f.n[HEALTH_DEAD], 5);

	/* Near zero, absolute: all-zero rewards are dead too. */
	memset(&f, 0, sizeof(f));
	run_dead_case(0, 0, &f);
	assert_int_equal(f.n[HEALTH_DEAD], 5);
	assert_int_equal(f.n[HEALTH_CONSTANT], 0);
}

static void test_dead_streak_breaks(void **state)
{
	struct health_state s;
	struct sg_outcome flat = batch(0.7, 0), bad = invalid_batch();
	struct sg_health c = cfg;
	unsigned fired = 0;
	char why[200];

	flat.constant = false; /* constant off: only dead is watched */
	flat.score_mean = 0.7; /* exactly, for the description below */
	flat.score_var = 0;
	c.invalid_rate = 2; /* invalid off: a rate above 1 never fires */
	health_init(&s);
	/* 4 flat windows after the first (streak 4), then a window without a
	 * single score, then 4 more flat ones: never 5 in a row. */
	for (int w = 0; w < 10; w++)
		for (int b = 0; b < 20; b++)
			fired |= health_observe(&s, &c, w == 5 ? &bad : &flat);
	assert_int_equal(fired, 0);
	assert_int_equal(s.flat_windows, 3);
	for (int b = 0; b < 20; b++)
		fired |= health_observe(&s, &c, &flat);
	for (int b = 0; b < 19; b++)
		fired |= health_observe(&s, &c, &flat);
	assert_int_equal(fired, 0);
	assert_int_equal(health_observe(&s, &c, &flat), HEALTH_BIT(HEALTH_DEAD));
	health_describe(&s, &c, HEALTH_DEAD, why, sizeof(why));
	assert_string_equal(why, "score mean 0.7 and variance 0 flat within 1e-06 for "
				 "5 consecutive windows of 20 batches");

	/* dead_windows = 0 and window = 0 turn detectors off. */
	c.dead_windows = 0;
	for (int b = 0; b < 200; b++)
		assert_int_equal(health_observe(&s, &c, &flat) & HEALTH_BIT(HEALTH_DEAD), 0);
	c = cfg;
	c.window = 0;
	for (int b = 0; b < 200; b++)
		assert_int_equal(health_observe(&s, &c, &bad), 0);
}

/* A policy reload with a new window size starts the window over. */
static void test_window_change(void **state)
{
	struct health_state s;
	struct sg_outcome bad = invalid_batch();
	struct sg_health c = cfg;

	health_init(&s);
	for (int i = 0; i < 3; i++)
		assert_int_equal(health_observe(&s, &c, &bad), 0);
	c.window = 10; /* 3 of 10 would be >= 0.2, but those 3 were another window */
	assert_int_equal(health_observe(&s, &c, &bad), 0);
	assert_int_equal(s.invalid, 1);
	assert_int_equal(health_observe(&s, &c, &bad), HEALTH_BIT(HEALTH_INVALID));
	assert_string_equal(health_detector_name(HEALTH_DEAD), "dead");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_silent_on_healthy), cmocka_unit_test(test_constant_rate),
		cmocka_unit_test(test_invalid_rate),      cmocka_unit_test(test_rate_fires_early),
		cmocka_unit_test(test_dead_stream),       cmocka_unit_test(test_dead_streak_breaks),
		cmocka_unit_test(test_window_change),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
