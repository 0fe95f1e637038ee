/* Canaries in a batch's runs (src/exec/canary.h): the probe set read at
 * the batch's start, the tenant's document, the probes taken out of an ok
 * attempt's scores, and the determinism probe's second sandbox. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "canary_run.h"
#include "lib/log.h"
#include "judge/scores.h"

void canary_batch_start(const struct exec_ctx *ctx, const struct exec_batch *batch,
			struct canary_batch *cb)
{
	const struct sg_canary *cfg = &ctx->policy->canary;
	struct canary_set set = { 0 };
	char err[CANARY_ERR_MAX];
	int ret;

	memset(cb, 0, sizeof(*cb));
	if (!cfg->probes[0])
		return;
	if ((ret = canary_rng_seed(&cb->rng))) {
		snprintf(cb->rep.detail, sizeof(cb->rep.detail),
			 "canaries off for this batch: getrandom: %s", strerror(-ret));
		return;
	}
	/* Read per batch: a probe file changes with the policy, and is small. */
	if ((ret = canary_set_load(cfg->probes, &set, err, sizeof(err)))) {
		/* The platform's configuration, never the tenant's fault: the
		 * batch runs without probes, and its record says why. */
		sg_warn("tenant %s: canary set unusable: %s", ctx->tenant, err);
		snprintf(cb->rep.detail, sizeof(cb->rep.detail), "canary set unusable: %s", err);
	}
	ret = canary_mix_build(batch->json, batch->json_len, set.n ? &set : NULL, cfg, &cb->rng,
			       &cb->mix);
	canary_set_free(&set);
	if (ret) {
		snprintf(cb->rep.detail, sizeof(cb->rep.detail),
			 "canaries off for this batch: mixing: %s", strerror(-ret));
		return;
	}
	cb->on = true;
}

/* The determinism probe: the same items, re-shuffled, in a second sandbox;
 * one sampled trainer item's two scores compared. Its run is not an
 * attempt of the batch: nothing of it reaches the trainer, and a failure
 * of it is said in the record's canary detail, never booked as a cause. */
static void rescore(const struct exec_ctx *ctx, struct canary_batch *cb,
		    const struct sandbox_spec *spec, const double *trainer)
{
	const struct sg_canary *cfg = &ctx->policy->canary;
	struct sandbox_spec again = *spec;
	struct exec_box box = { 0 };
	struct sandbox_result r = { 0 };
	size_t item = (size_t)(canary_rand(&cb->rng) % cb->mix.n_trainer), pos = 0, len = 0;
	char *doc = NULL, detail[EXEC_DETAIL_MAX];
	double *scores = NULL;
	int rule, rc;

	if (canary_rescore_doc(&cb->mix, &cb->rng, item, &doc, &len, &pos)) {
		sg_warn("tenant %s: determinism probe: out of memory", ctx->tenant);
		return;
	}
	again.stdin_data = doc;
	again.stdin_len = len;
	rc = exec_box_run(ctx, &box, &again, &r);
	exec_box_over(ctx, &box);
	if (exec_classify(rc, &r, &again, &rule, detail, sizeof(detail)) != SG_CAUSE_OK ||
	    scores_parse(r.out ? r.out : "", r.out ? r.out_len : 0, cb->mix.n_total, &scores,
			 detail, sizeof(detail)))
		snprintf(cb->rep.detail + strlen(cb->rep.detail),
			 sizeof(cb->rep.detail) - strlen(cb->rep.detail),
			 "%sdeterminism probe: the re-score in sandbox %s failed (%s): not judged",
			 cb->rep.detail[0] ? "; " : "", r.sandbox_id, detail);
	else
		canary_rescore_judge(trainer[item], scores[pos], item, cfg->determinism_tolerance,
				     r.sandbox_id, &cb->rep);
	free(scores);
	free(doc);
	sandbox_result_free(&r);
	exec_box_done(ctx, &box);
}

int canary_batch_scores(const struct exec_ctx *ctx, struct canary_batch *cb,
			const struct sandbox_spec *spec, double **scores)
{
	double *trainer = NULL;
	int ret;

	if (!cb->on)
		return 0;
	ret = canary_strip(&cb->mix, *scores, &trainer, &cb->rep);
	if (ret)
		return ret;
	if (cb->rep.failed)
		sg_warn("tenant %s: canary: %s", ctx->tenant, cb->rep.detail);
	if (ctx->policy->canary.determinism_rate > 0 &&
	    (double)(canary_rand(&cb->rng) >> 11) * (1.0 / 9007199254740992.0) <
		    ctx->policy->canary.determinism_rate)
		rescore(ctx, cb, spec, trainer);
	free(*scores);
	*scores = trainer;
	return 0;
}

void canary_batch_end(struct canary_batch *cb)
{
	canary_mix_free(&cb->mix);
}
