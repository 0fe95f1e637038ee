/* The agent's score-stream detectors (src/health/health.h): one state
 * per tenant and one per run, fed by the outcome journal's fold. A
 * detector that fires is a `health` event, a log line and a counter;
 * a batch's canaries are counted too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent.h"
#include "agent_artifact.h"
#include "agent_health.h"
#include "agent_metrics.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "telemetry/event_json.h"
#include "health/health.h"

/* Runs watched at once (a node serves a few dozen at a time); the one
 * seen longest ago goes first, and its detectors start over if it comes
 * back. About 700 bytes a run, plus the band's window (band_window
 * doubles), allocated with the first run seen. */
#define RUNS_WATCHED 1024

struct run_health {
	int tenant; /* registry index; -1: free */
	char run_id[SG_ID_BUF];
	uint64_t seen; /* a counter, for eviction */
	struct health_state hs;
};

struct agent_health {
	struct run_health runs[RUNS_WATCHED];
	uint64_t clock;
};

static struct health_state *tenant_state(struct agent *a, int idx)
{
	struct health_state **hs = &a->health[idx];

	if (!*hs) {
		*hs = calloc(1, sizeof(**hs));
		if (*hs)
			health_init(*hs);
	}
	return *hs;
}

static struct health_state *run_state(struct agent *a, int idx, const char *run_id)
{
	struct agent_health *h = a->run_health;
	struct run_health *oldest = NULL;

	if (!run_id[0])
		return NULL; /* a batch of no run is the tenant's stream only */
	if (!h) {
		h = a->run_health = calloc(1, sizeof(*h));
		if (!h)
			return NULL;
		for (size_t i = 0; i < RUNS_WATCHED; i++)
			h->runs[i].tenant = -1;
	}
	h->clock++;
	for (size_t i = 0; i < RUNS_WATCHED; i++) {
		struct run_health *r = &h->runs[i];

		if (r->tenant == idx && !strcmp(r->run_id, run_id)) {
			r->seen = h->clock;
			return &r->hs;
		}
		/* a free entry first, else the one seen longest ago */
		if (r->tenant < 0) {
			if (!oldest || oldest->tenant >= 0)
				oldest = r;
		} else if (!oldest || (oldest->tenant >= 0 && r->seen < oldest->seen)) {
			oldest = r;
		}
	}
	health_free(&oldest->hs);
	oldest->tenant = idx;
	snprintf(oldest->run_id, sizeof(oldest->run_id), "%s", run_id);
	oldest->seen = h->clock;
	return &oldest->hs;
}

/* Each detector that fired: the log, the counter and the event. A run's
 * events name the run (and the batch that fired it); a tenant's name the
 * batch only for canary findings, which are about one batch. */
static void report(struct agent *a, const struct sg_tenant *t, const struct sg_outcome *o,
		   struct health_state *hs, unsigned fired, bool per_run)
{
	for (int d = 0; d < HEALTH__COUNT; d++) {
		bool about_batch = per_run || d == HEALTH_CANARY || d == HEALTH_NONDETERMINISM;
		struct event_ctx ev = { .node = a->opts.node,
					.tenant = t->name,
					.batch_id = about_batch && o->batch_id[0] ? o->batch_id
										  : NULL,
					.run_id = about_batch && o->run_id[0] ? o->run_id : NULL,
					.boot_to_real_ns = a->boot_to_real_ns };
		char why[320], line[EVENT_JSON_MAX];
		json_t *fields;

		if (!per_run)
			agent_metrics_detector(a, t->name, health_detector_name(d),
					       !!(fired & HEALTH_BIT(d)));
		if (!(fired & HEALTH_BIT(d)))
			continue;
		health_describe(hs, &t->policy->health, d, why, sizeof(why));
		sg_warn("tenant %s%s%s: score stream %s: %s", t->name, per_run ? " run " : "",
			per_run ? o->run_id : "", health_detector_name(d), why);
		if (per_run)
			agent_metrics_run_detector(a, t->name, health_detector_name(d));
		fields = json_pack("{s:s, s:s}", "why", why, "scope", per_run ? "run" : "tenant");
		if (event_health_json(&ev, clock_ns(CLOCK_REALTIME), health_detector_name(d),
				      fields, line, sizeof(line)) > 0)
			agent_emit_line(a, t->name, line);
		json_decref(fields);
	}
}

void agent_health_observe(void *ctx, const struct sg_outcome *o)
{
	struct agent *a = ctx;
	struct sg_tenant *t = o->final ? registry_tenant(&a->reg, o->tenant, true) : NULL;
	struct health_state *hs;

	agent_artifact_observe(a, o); /* the fold's one observer: this one's too */
	if (!t || !t->policy)
		return;
	if (o->canary_probes || o->nondeterministic)
		agent_metrics_canary(a, t->name, o->canary_probes, o->canary_failed,
				     o->nondeterministic);
	if ((hs = tenant_state(a, t->idx)))
		report(a, t, o, hs, health_observe(hs, &t->policy->health, o), false);
	if ((hs = run_state(a, t->idx, o->run_id)))
		report(a, t, o, hs, health_observe(hs, &t->policy->health, o), true);
}

void agent_health_free(struct agent *a)
{
	for (int i = 0; i < SG_MAX_TENANTS; i++) {
		if (a->health[i])
			health_free(a->health[i]);
		free(a->health[i]);
		a->health[i] = NULL;
	}
	for (size_t i = 0; a->run_health && i < RUNS_WATCHED; i++)
		health_free(&a->run_health->runs[i].hs);
	free(a->run_health);
	a->run_health = NULL;
}
