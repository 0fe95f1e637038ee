/* Replaying a score series through the detectors: see health_replay.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "health_replay.h"

#define REPLAY_RUNS_MAX 1024 /* runs of one series with detectors of their own */

struct run_slot {
	char id[SG_ID_BUF];
	struct health_state hs;
};

static int line_error(char *err, size_t len, const char *name, size_t line, const char *what)
{
	snprintf(err, len, "%s:%zu: %s", name, line, what);
	return -EINVAL;
}

int health_detector_from_name(const char *name)
{
	for (int d = 0; d < HEALTH__COUNT; d++)
		if (!strcmp(health_detector_name(d), name))
			return d;
	return -1;
}

static int expected(json_t *j, unsigned *bits)
{
	json_t *e = json_object_get(j, "expect"), *v;
	size_t i;

	if (!e)
		return 0;
	if (!json_is_array(e))
		return -1;
	json_array_foreach(e, i, v)
	{
		int d = json_is_string(v) ? health_detector_from_name(json_string_value(v)) : -1;

		if (d < 0)
			return -1;
		*bits |= HEALTH_BIT(d);
	}
	return 0;
}

/* The outcome a series line stands for. */
static int outcome_of(json_t *j, struct sg_outcome *o, const char **why)
{
	json_t *scores = json_object_get(j, "scores"), *run = json_object_get(j, "run");
	json_int_t n = 0, probes = 0, failed = 0;
	int invalid = 0, constant = -1, nondet = 0;
	double mean = 0, var = 0;

	memset(o, 0, sizeof(*o));
	o->final = true;
	o->attempt = 1;
	if (json_unpack(j, "{s?b, s?I, s?F, s?F, s?b, s?I, s?I, s?b}", "invalid", &invalid, "n", &n,
			"mean", &mean, "var", &var, "constant", &constant, "canary_probes", &probes,
			"canary_failed", &failed, "nondeterministic", &nondet)) {
		*why = "a member has the wrong type";
		return -EINVAL;
	}
	if (run && (!json_is_string(run) || json_string_length(run) >= sizeof(o->run_id))) {
		*why = "\"run\": expected a string of at most 127 bytes";
		return -EINVAL;
	}
	snprintf(o->run_id, sizeof(o->run_id), "%s", run ? json_string_value(run) : "");
	if (probes < 0 || failed < 0 || failed > probes || probes > UINT32_MAX) {
		*why = "expected 0 <= canary_failed <= canary_probes";
		return -EINVAL;
	}
	o->canary_probes = (uint32_t)probes;
	o->canary_failed = (uint32_t)failed;
	o->nondeterministic = nondet;
	if (failed || nondet)
		snprintf(o->canary_detail, sizeof(o->canary_detail), "%s",
			 failed ? "a probe out of range (replayed)" : "non-determinism (replayed)");
	if (invalid) {
		o->cause = SG_CAUSE_TENANT_BAD_OUTPUT;
		o->invalid = true;
		return 0;
	}
	if (json_is_array(scores) && json_array_size(scores)) {
		size_t k = json_array_size(scores);
		double m2 = 0;

		for (size_t i = 0; i < k; i++) {
			if (!json_is_number(json_array_get(scores, i))) {
				*why = "\"scores\": expected numbers";
				return -EINVAL;
			}
			mean += json_number_value(json_array_get(scores, i));
		}
		mean /= (double)k;
		for (size_t i = 0; i < k; i++) {
			double d = json_number_value(json_array_get(scores, i)) - mean;
			m2 += d * d;
		}
		n = (json_int_t)k;
		var = m2 / (double)k;
		constant = k >= 2 && m2 == 0;
	} else if (n <= 0 || n > UINT32_MAX || !json_object_get(j, "mean") || var < 0) {
		*why = "expected \"scores\": [...], {\"n\", \"mean\", \"var\"} or \"invalid\": true";
		return -EINVAL;
	}
	o->cause = SG_CAUSE_OK;
	o->n_scores = (uint32_t)n;
	o->score_mean = mean;
	o->score_var = var;
	o->constant = constant >= 0 ? constant : n >= 2 && var == 0;
	return 0;
}

static void tally(struct replay_result *res, enum replay_scope s, unsigned fired, bool broken,
		  uint64_t index)
{
	for (int d = 0; d < HEALTH__COUNT; d++) {
		struct replay_figures *f = &res->fig[s][d];

		if (!(fired & HEALTH_BIT(d)))
			continue;
		f->fired++;
		f->fired_healthy += !broken;
		if (res->first_broken >= 0 && f->first_fire_after_break < 0)
			f->first_fire_after_break = (int64_t)index;
	}
}

static struct health_state *run_of(struct run_slot *runs, size_t *n, const char *id)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(runs[i].id, id))
			return &runs[i].hs;
	if (*n == REPLAY_RUNS_MAX)
		return NULL;
	snprintf(runs[*n].id, sizeof(runs[*n].id), "%s", id);
	health_init(&runs[*n].hs);
	return &runs[(*n)++].hs;
}

int health_replay(const char *text, size_t len, const char *name, const struct sg_health *cfg,
		  struct replay_result *res, char *err, size_t err_len)
{
	struct run_slot *runs = calloc(REPLAY_RUNS_MAX, sizeof(*runs));
	struct health_state tenant;
	const char *p = text, *end = text + len;
	size_t line = 0, n_runs = 0;
	int ret = 0;

	memset(res, 0, sizeof(*res));
	res->first_broken = -1;
	for (int s = 0; s < REPLAY__SCOPES; s++)
		for (int d = 0; d < HEALTH__COUNT; d++)
			res->fig[s][d].first_fire_after_break = -1;
	if (!runs)
		return -ENOMEM;
	health_init(&tenant);
	while (p < end && !ret) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *why = NULL;
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *j;
		struct sg_outcome o;
		struct health_state *rs;
		bool broken;

		line++;
		if (strspn(p, " \t\r") >= l) {
			p += l + 1;
			continue;
		}
		j = json_loadb(p, l, JSON_REJECT_DUPLICATES, NULL);
		p += l + 1;
		if (!json_is_object(j)) {
			json_decref(j);
			ret = line_error(err, err_len, name, line, "not a JSON object");
			break;
		}
		broken = json_is_true(json_object_get(j, "broken"));
		if (expected(j, &res->expect))
			why = "\"expect\": expected an array of detector names";
		if (why || outcome_of(j, &o, &why)) {
			json_decref(j);
			ret = line_error(err, err_len, name, line, why);
			break;
		}
		json_decref(j);
		if (broken && res->first_broken < 0)
			res->first_broken = (int64_t)res->batches;
		res->healthy += !broken;
		tally(res, REPLAY_TENANT, health_observe(&tenant, cfg, &o), broken, res->batches);
		if (o.run_id[0] && (rs = run_of(runs, &n_runs, o.run_id)))
			tally(res, REPLAY_RUN, health_observe(rs, cfg, &o), broken, res->batches);
		res->batches++;
	}
	res->runs = n_runs;
	health_free(&tenant);
	for (size_t i = 0; i < n_runs; i++)
		health_free(&runs[i].hs);
	free(runs);
	return ret;
}

int64_t replay_lag(const struct replay_result *res, enum replay_scope s, enum health_detector d)
{
	const struct replay_figures *f = &res->fig[s][d];

	if (res->first_broken < 0 || f->first_fire_after_break < 0)
		return -1;
	return f->first_fire_after_break - res->first_broken;
}
