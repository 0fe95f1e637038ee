/* Canaries in a batch's runs (src/exec/canary.h has what they are). */
#ifndef SG_CANARY_RUN_H
#define SG_CANARY_RUN_H
#include "canary.h"
#include "exec_internal.h"

#define CANARY_ERR_MAX 200

struct canary_batch {
	bool on; /* the tenant's code reads mix.json, of mix.n_total items */
	struct canary_rng rng;
	struct canary_mix mix;
	struct canary_report rep;
};

/* The tenant's document for the batch, when its policy names a probe set.
 * Never fails the batch: a probe set that cannot be read leaves the batch
 * without probes (re-serialised all the same), said in rep.detail. */
void canary_batch_start(const struct exec_ctx *ctx, const struct exec_batch *batch,
			struct canary_batch *cb);

/* An ok attempt's scores (mix.n_total of them) become the trainer's n, in
 * order (*scores replaced); the probes are judged, and the determinism
 * probe's second sandbox runs when sampled. 0 or -ENOMEM. */
int canary_batch_scores(const struct exec_ctx *ctx, struct canary_batch *cb,
			const struct sandbox_spec *spec, double **scores);

void canary_batch_end(struct canary_batch *cb);

#endif
