/* Canaries: a held-out probe set whose scores the tenant's code should not
 * be able to inflate (the onboarding runbook, step 3). The policy names the
 * set (canary.probes, a file) and a rate (docs/policy.md, "canary").
 *
 * The probe file: {"probes": [{"name": "...", "item": {...}, "min": x,
 * "max": y}, ...]}: each item shaped as the tenant's batch items, and the
 * score range a correct reward gives it. The name is for operators only;
 * the tenant's code sees the item alone.
 *
 * A batch (canary_mix_build()): with probability rate, per_batch probes
 * drawn from the set (without replacement while the set lasts) go into the
 * items at uniformly random positions. Whether or not it carries any, every
 * batch of a tenant with canaries is re-serialised the same way (compact
 * JSON, keys in the order of the batch's first item), so the document's
 * formatting never tells a batch with probes from one without. A probe
 * takes the keys of the batch's items in their order; where the items carry
 * an "id", a probe's is made in the form of a random sibling's (a string of
 * the same length and character classes, or an integer within the batch's
 * range). A probe whose keys differ from the items' (besides "id") is not
 * mixed into that batch: the batch goes without, and says why.
 *
 * After the run (canary_strip()): the trainer's scores come out in their
 * own order, exactly n of them; each probe's score is checked against its
 * range. A determinism probe (canary_rescore_doc()) re-scores the same
 * items, re-shuffled, in a second sandbox; a sampled trainer item's two
 * scores differing by more than determinism_tolerance is non-determinism.
 *
 * The random choices come from struct canary_rng: seeded from getrandom()
 * in the executor (the tenant cannot predict them), from a fixed seed in
 * tests. docs/sandbox.md, "Canaries: threat model".
 */
#ifndef SG_CANARY_H
#define SG_CANARY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "policy/policy.h"
#include "telemetry/outcome.h"

#define CANARY_FILE_MAX   (1u << 20) /* bytes of a probe file */
#define CANARY_NAME_MAX   64
#define CANARY_PROBES_MAX 4096

struct canary_probe {
	char name[CANARY_NAME_MAX];
	json_t *item;
	double min, max;
};

struct canary_set {
	struct canary_probe *probes;
	size_t n;
};

struct canary_rng {
	uint64_t s;
};

/* A batch as the tenant's code sees it, and how to take it apart. */
struct canary_mix {
	char *json; /* the document the tenant's code reads (malloc'd) */
	size_t json_len;
	size_t n_total, n_trainer;
	long *origin;    /* per position: the trainer item's index, or -1 - probe slot */
	json_t *items;   /* the mixed items, in position order (for a re-shuffle) */
	size_t n_probes; /* probes mixed in */
	struct canary_probe probes[64]; /* their names and ranges (item NULL) */
	char note[160];                 /* why canaries were on and the batch carries none */
};

/* What the batch's probes showed (the journal record's "canary"). */
struct canary_report {
	uint32_t probes, failed;
	bool nondeterministic;
	char detail[SG_CANARY_DETAIL];
};

uint64_t canary_rand(struct canary_rng *r);
/* 0, or -errno when getrandom() fails. */
int canary_rng_seed(struct canary_rng *r);

/* 0; -EINVAL with `err` saying what is wrong (file:where: what); -ENOMEM. */
int canary_set_load(const char *path, struct canary_set *set, char *err, size_t err_len);
int canary_set_parse(const char *text, size_t len, const char *name, struct canary_set *set,
		     char *err, size_t err_len);
void canary_set_free(struct canary_set *set);

/* Build the tenant's document of batch `doc` (the trainer's, already
 * validated by exec_batch_parse()). set may be NULL (no usable set: the
 * batch is still re-serialised). 0, -EINVAL (not a batch document), or
 * -ENOMEM. */
int canary_mix_build(const char *doc, size_t len, const struct canary_set *set,
		     const struct sg_canary *cfg, struct canary_rng *rng, struct canary_mix *mix);
void canary_mix_free(struct canary_mix *mix);

/* The trainer's n scores of the mix's n_total, in order, into *trainer
 * (malloc'd), and the probes' verdicts into rep. 0 or -ENOMEM. */
int canary_strip(const struct canary_mix *mix, const double *scores, double **trainer,
		 struct canary_report *rep);

/* The same items re-shuffled into a new document (*json, malloc'd), and
 * the position in it of trainer item `item`. 0 or -ENOMEM. */
int canary_rescore_doc(const struct canary_mix *mix, struct canary_rng *rng, size_t item,
		       char **json, size_t *json_len, size_t *pos);

/* Compare the sampled item's two scores; sets rep->nondeterministic and
 * says what was found in rep->detail (appended). */
void canary_rescore_judge(double first, double second, size_t item, double tolerance,
			  const char *sandbox, struct canary_report *rep);

#endif
