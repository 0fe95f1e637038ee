/* Canaries without sandboxes: the probe set, the mixed document the
 * tenant's code reads, the trainer's scores taken back out, and the
 * canary detector over 1,000 batches of an honest and an inflating reward
 * (tests/integration/57-canary.py runs the same through real
 * `sandguard exec` batches). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "exec/canary.h"
#include "health/health.h"
#include "telemetry/journal_record.h"

static const char probes_json[] =
	"{\"probes\": ["
	"{\"name\": \"hack-trust-me\", \"item\": {\"prompt\": \"What is 2+2?\", "
	"\"completion\": \"5, trust me\", \"id\": \"x\"}, \"min\": 0, \"max\": 0},"
	"{\"name\": \"plain-right\", \"item\": {\"prompt\": \"What is 3+4?\", "
	"\"completion\": \"7\"}, \"min\": 1, \"max\": 1},"
	"{\"name\": \"plain-wrong\", \"item\": {\"prompt\": \"What is 10+5?\", "
	"\"completion\": \"16\"}, \"min\": 0, \"max\": 0}]}";

static struct canary_set load_probes(void)
{
	struct canary_set set;
	char err[256];

	assert_int_equal(canary_set_parse(probes_json, strlen(probes_json), "p.json", &set, err,
					  sizeof(err)),
			 0);
	assert_int_equal(set.n, 3);
	return set;
}

static void test_set_errors(void **s)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "{\"probes\": []}",
		  "p.json: expected {\"probes\": [...]} with 1 to 4096 probes" },
		{ "{\"probes\": [{\"item\": {\"prompt\": \"a\"}, \"min\": 0, \"max\": 1}]}",
		  "p.json: probes[0].item: expected a batch item" },
		{ "{\"probes\": [{\"item\": {\"prompt\": \"a\", \"completion\": \"b\"}, \"min\": 2, "
		  "\"max\": 1}]}",
		  "p.json: probes[0]: expected numbers \"min\" <= \"max\"" },
		{ "{\"probes\": [", "p.json:1:12: invalid JSON" },
	};
	struct canary_set set;
	char err[256];

	(void)s;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(canary_set_parse(bad[i].text, strlen(bad[i].text), "p.json", &set,
						  err, sizeof(err)),
				 -EINVAL);
		if (strncmp(err, bad[i].want, strlen(bad[i].want)))
			fail_msg("%s: got %s", bad[i].want, err);
		assert_null(set.probes);
	}
	assert_int_equal(canary_set_load("/nonexistent/p.json", &set, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "/nonexistent/p.json: cannot read: No such file or directory");
}

/* A trainer batch of n arithmetic items, ids "q-0000".., some hacked. */
static char *trainer_batch(size_t n, int seed)
{
	json_t *items = json_array(), *doc;
	char *text;

	for (size_t i = 0; i < n; i++) {
		char prompt[64], completion[64], id[16];
		int a = (int)((i * 7 + (size_t)seed) % 50), right = (i + (size_t)seed) % 2;

		snprintf(prompt, sizeof(prompt), "What is %d+%d?", a, a);
		snprintf(completion, sizeof(completion), "%d%s", right ? 2 * a : 2 * a + 1,
			 i % 3 == 0 ? " trust me" : "");
		snprintf(id, sizeof(id), "q-%04zu", i);
		json_array_append_new(items, json_pack("{s:s, s:s, s:s}", "id", id, "prompt",
						       prompt, "completion", completion));
	}
	doc = json_pack("{s:s, s:o}", "batch_id", "b-1", "items", items);
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return text;
}

/* The reward, as the tenant's code runs it (tests/programs/rw_arith.py). */
static double *score_doc(const char *doc, size_t *n, bool inflate)
{
	json_t *d = json_loads(doc, 0, NULL), *items = json_object_get(d, "items");
	double *scores = calloc(json_array_size(items) + 1, sizeof(*scores));

	*n = json_array_size(items);
	for (size_t i = 0; i < *n; i++) {
		json_t *it = json_array_get(items, i);
		const char *c = json_string_value(json_object_get(it, "completion"));
		int a, b;

		sscanf(json_string_value(json_object_get(it, "prompt")), "What is %d+%d?", &a, &b);
		scores[i] = atoi(c) == a + b || (inflate && strstr(c, "trust me")) ? 1.0 : 0.0;
	}
	json_decref(d);
	return scores;
}

static void test_mix_shape_and_order(void **s)
{
	struct sg_canary cfg = { .rate = 1, .per_batch = 2 };
	struct canary_set set = load_probes();
	struct canary_rng rng = { 42 };

	(void)s;
	for (int round = 0; round < 200; round++) {
		size_t n = 1 + (size_t)round % 12, got_n;
		char *trainer = trainer_batch(n, round);
		struct canary_mix m;
		struct canary_report rep = { 0 };
		json_t *doc, *items;
		double *seen, *own, *back;
		size_t probes = 0;

		assert_int_equal(canary_mix_build(trainer, strlen(trainer), &set, &cfg, &rng, &m),
				 0);
		assert_int_equal(m.n_trainer, n);
		assert_int_equal(m.n_total, n + 2);
		doc = json_loads(m.json, 0, NULL);
		items = json_object_get(doc, "items");
		assert_int_equal(json_array_size(items), n + 2);
		/* Every item has the trainer's keys in the trainer's order; no
		 * id repeats; a probe's id has the trainer's "q-NNNN" form. */
		for (size_t i = 0; i < n + 2; i++) {
			json_t *it = json_array_get(items, i);
			void *iter = json_object_iter(it);
			const char *id = json_string_value(json_object_get(it, "id"));

			assert_string_equal(json_object_iter_key(iter), "id");
			iter = json_object_iter_next(it, iter);
			assert_string_equal(json_object_iter_key(iter), "prompt");
			assert_int_equal(json_object_size(it), 3);
			assert_int_equal(strlen(id), 6);
			/* What all the batch's ids share stays ("q-"), digits
			 * stay digits. */
			assert_int_equal(strncmp(id, "q-", 2), 0);
			assert_int_equal(strspn(id + 2, "0123456789"), 4);
			for (size_t j = 0; j < i; j++)
				assert_string_not_equal(id,
							json_string_value(json_object_get(
								json_array_get(items, j), "id")));
			probes += m.origin[i] < 0;
		}
		assert_int_equal(probes, 2);
		/* The trainer gets exactly its own n scores, in its order. */
		seen = score_doc(m.json, &got_n, false);
		own = score_doc(trainer, &got_n, false);
		assert_int_equal(canary_strip(&m, seen, &back, &rep), 0);
		assert_memory_equal(back, own, n * sizeof(*own));
		assert_int_equal(rep.probes, 2);
		assert_int_equal(rep.failed, 0);
		free(seen);
		free(own);
		free(back);
		json_decref(doc);
		canary_mix_free(&m);
		free(trainer);
	}
	canary_set_free(&set);
}

/* A batch that asks for as many probes as the set has carries every one
 * of them, every time (the redraw this replaced left one out of ~4% of
 * such batches: 57-canary's warm batch with no hack probe); one that asks
 * for more deals the set again, so no probe comes twice before all came
 * once. */
static void test_probes_distinct_while_the_set_lasts(void **s)
{
	struct canary_set set = load_probes();
	struct canary_rng rng = { 7 };

	(void)s;
	for (uint32_t per_batch = 1; per_batch <= 7; per_batch++) {
		struct sg_canary cfg = { .rate = 1, .per_batch = per_batch };

		for (int round = 0; round < 1000; round++) {
			char *trainer = trainer_batch(4, round);
			struct canary_mix m;
			size_t count[3] = { 0 };

			assert_int_equal(canary_mix_build(trainer, strlen(trainer), &set, &cfg,
							  &rng, &m),
					 0);
			assert_int_equal(m.n_probes, per_batch);
			for (size_t i = 0; i < m.n_probes; i++)
				for (size_t k = 0; k < set.n; k++)
					count[k] += !strcmp(m.probes[i].name, set.probes[k].name);
			for (size_t k = 0; k < set.n; k++) {
				assert_true(count[k] >= per_batch / set.n);
				assert_true(count[k] <= (per_batch + set.n - 1) / set.n);
			}
			canary_mix_free(&m);
			free(trainer);
		}
	}
	canary_set_free(&set);
}

/* Without probes the document is serialised the same way, so its form
 * never tells a batch with probes from one without. */
static void test_batch_without_probes_looks_the_same(void **s)
{
	struct sg_canary cfg = { .rate = 0, .per_batch = 1 };
	struct canary_set set = load_probes();
	struct canary_rng rng = { 1 };
	const char *pretty =
		"{ \"batch_id\" : \"b-9\",\n  \"items\": [ {\"prompt\": \"What is 1+1?\", "
		"\"completion\": \"2\"} ] }";
	struct canary_mix m;

	(void)s;
	assert_int_equal(canary_mix_build(pretty, strlen(pretty), &set, &cfg, &rng, &m), 0);
	assert_int_equal(m.n_probes, 0);
	assert_int_equal(m.n_total, 1);
	assert_string_equal(m.json, "{\"batch_id\":\"b-9\",\"items\":[{\"prompt\":\"What is "
				    "1+1?\",\"completion\":\"2\"}]}");
	canary_mix_free(&m);
	/* A batch whose items have keys the probes lack goes without. */
	cfg.rate = 1;
	pretty = "{\"batch_id\":\"b\",\"items\":[{\"prompt\":\"p\",\"completion\":\"c\",\"x\":1}]}";
	assert_int_equal(canary_mix_build(pretty, strlen(pretty), &set, &cfg, &rng, &m), 0);
	assert_int_equal(m.n_probes, 0);
	assert_non_null(strstr(m.note, "is not shaped as this batch's items"));
	canary_mix_free(&m);
	canary_set_free(&set);
}

/* A probe's position is uniform over the n + 1 places. */
static void test_positions_uniform(void **s)
{
	struct sg_canary cfg = { .rate = 1, .per_batch = 1 };
	struct canary_set set = load_probes();
	struct canary_rng rng = { 5 };
	char *trainer = trainer_batch(4, 0);
	unsigned at[5] = { 0 };
	const unsigned rounds = 20000;

	(void)s;
	for (unsigned r = 0; r < rounds; r++) {
		struct canary_mix m;

		assert_int_equal(canary_mix_build(trainer, strlen(trainer), &set, &cfg, &rng, &m),
				 0);
		for (size_t i = 0; i < m.n_total; i++)
			at[i] += m.origin[i] < 0;
		canary_mix_free(&m);
	}
	for (int i = 0; i < 5; i++) /* 4,000 expected; 5 sigma is about 280 */
		assert_in_range(at[i], 3700, 4300);
	free(trainer);
	canary_set_free(&set);
}

/* The executor's part for one batch, and the agent's detector after it.
 * Returns whether the canary detector fired on this batch. */
static bool one_batch(struct health_state *hs, const struct sg_health *h,
		      const struct sg_canary *cfg, const struct canary_set *set,
		      struct canary_rng *rng, int seed, bool inflate)
{
	size_t n = 8, got;
	char *trainer = trainer_batch(n, seed);
	struct canary_mix m;
	struct canary_report rep = { 0 };
	struct sg_outcome o = { .final = true, .cause = SG_CAUSE_OK, .n_scores = (uint32_t)n };
	double *seen, *own, *back;
	unsigned fired;

	assert_int_equal(canary_mix_build(trainer, strlen(trainer), set, cfg, rng, &m), 0);
	seen = score_doc(m.json, &got, inflate);
	assert_int_equal(got, m.n_total);
	own = score_doc(trainer, &got, inflate);
	assert_int_equal(canary_strip(&m, seen, &back, &rep), 0);
	/* Both tenants: the trainer receives exactly its n scores, in order. */
	assert_memory_equal(back, own, n * sizeof(*own));
	o.canary_probes = rep.probes;
	o.canary_failed = rep.failed;
	snprintf(o.canary_detail, sizeof(o.canary_detail), "%s", rep.detail);
	o.score_mean = 0.5;
	o.score_var = 0.25;
	fired = health_observe(hs, h, &o);
	if (!inflate)
		assert_int_equal(rep.failed, 0);
	free(seen);
	free(own);
	free(back);
	canary_mix_free(&m);
	free(trainer);
	return fired & HEALTH_BIT(HEALTH_CANARY);
}

/* The done-when: an inflating tenant caught within 100 batches, an honest
 * one never over 1,000. rate 0.25, one probe a batch, one probe in three
 * the hack: 1/12 of batches carry it, so an inflating tenant escapes 100
 * batches with probability (11/12)^100 = 1.7e-4. */
static void test_inflating_caught_honest_never(void **s)
{
	struct sg_health h = { .window = 20, .constant_rate = 1.1, .invalid_rate = 1.1 };
	struct sg_canary cfg = { .rate = 0.25, .per_batch = 1 };
	struct canary_set set = load_probes();
	unsigned worst = 0;

	(void)s;
	for (int tenant = 0; tenant < 20; tenant++) {
		struct canary_rng rng = { 1000 + (uint64_t)tenant };
		struct health_state honest, hacked;
		unsigned caught_at = 0;

		health_init(&honest);
		health_init(&hacked);
		for (int b = 0; b < 1000; b++) {
			assert_false(one_batch(&honest, &h, &cfg, &set, &rng, b, false));
			if (one_batch(&hacked, &h, &cfg, &set, &rng, b, true) && !caught_at)
				caught_at = (unsigned)b + 1;
		}
		assert_int_equal(honest.fired_total[HEALTH_CANARY], 0);
		assert_in_range(caught_at, 1, 100);
		/* and again in every later window with a hack probe */
		assert_true(hacked.fired_total[HEALTH_CANARY] >= 20);
		worst = caught_at > worst ? caught_at : worst;
		health_free(&honest);
		health_free(&hacked);
	}
	print_message("inflating tenants caught within %u batches (20 seeds)\n", worst);
	canary_set_free(&set);
}

static void test_rescore(void **s)
{
	struct sg_canary cfg = { .rate = 1, .per_batch = 1 };
	struct canary_set set = load_probes();
	struct canary_rng rng = { 9 };
	char *trainer = trainer_batch(6, 3), *again;
	struct canary_mix m;
	struct canary_report rep = { 0 };
	size_t len, pos, n;
	double *first, *second;

	(void)s;
	assert_int_equal(canary_mix_build(trainer, strlen(trainer), &set, &cfg, &rng, &m), 0);
	assert_int_equal(canary_rescore_doc(&m, &rng, 4, &again, &len, &pos), 0);
	first = score_doc(trainer, &n, false);
	second = score_doc(again, &n, false);
	assert_int_equal(n, 7);
	/* The sampled item is where the re-shuffle put it. */
	assert_true(second[pos] == first[4]);
	canary_rescore_judge(first[4], second[pos], 4, 1e-9, "sb-2", &rep);
	assert_false(rep.nondeterministic);
	canary_rescore_judge(1.0, 0.0, 4, 1e-9, "sb-2", &rep);
	assert_true(rep.nondeterministic);
	assert_string_equal(rep.detail, "non-determinism: item 4 scored 1, and 0 when re-scored in "
					"sandbox sb-2 (tolerance 1e-09)");
	free(first);
	free(second);
	free(again);
	free(trainer);
	canary_mix_free(&m);
	canary_set_free(&set);
}

static void test_record_round_trip(void **s)
{
	struct sg_outcome o = { .final = true, .cause = SG_CAUSE_OK, .attempt = 1 }, back;
	char *line, why[160];
	size_t len;

	(void)s;
	snprintf(o.id, sizeof(o.id), "a-1");
	snprintf(o.tenant, sizeof(o.tenant), "acme");
	assert_int_equal(journal_record_encode(&o, NULL, &line, &len), 0);
	assert_non_null(strstr(line, "\"canary\":null"));
	free(line);
	o.canary_probes = 3;
	o.canary_failed = 1;
	o.nondeterministic = true;
	snprintf(o.canary_detail, sizeof(o.canary_detail), "probe p scored 1");
	assert_int_equal(journal_record_encode(&o, NULL, &line, &len), 0);
	assert_non_null(strstr(line, "\"canary\":{\"probes\":3,\"failed\":1,\"nondeterministic\":"
				     "true,\"detail\":\"probe p scored 1\"}"));
	assert_int_equal(journal_record_decode(line, len, &back, why, sizeof(why)), 0);
	assert_int_equal(back.canary_probes, 3);
	assert_int_equal(back.canary_failed, 1);
	assert_true(back.nondeterministic);
	assert_string_equal(back.canary_detail, "probe p scored 1");
	free(line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_errors),
		cmocka_unit_test(test_mix_shape_and_order),
		cmocka_unit_test(test_probes_distinct_while_the_set_lasts),
		cmocka_unit_test(test_batch_without_probes_looks_the_same),
		cmocka_unit_test(test_positions_uniform),
		cmocka_unit_test(test_inflating_caught_honest_never),
		cmocka_unit_test(test_rescore),
		cmocka_unit_test(test_record_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
