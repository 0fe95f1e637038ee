/* The fold: the outcome journal turned into ledger counts, each outcome id
 * booked once. The agent folds as the journal grows; `sandguard top`
 * without an agent folds it read-only into a ledger of its own.
 *
 * Exactly once: a record is booked when its id is new to the fold, and the
 * fold knows every id of the retained journal (outcome_ids.h): those before
 * its starting position are read by fold_prime() first, without counting.
 * A bad line (not a record, a torn write) is counted and skipped, never
 * guessed at. */
#ifndef SG_OUTCOME_FOLD_H
#define SG_OUTCOME_FOLD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "journal_read.h"
#include "ledger.h"
#include "outcome.h"
#include "outcome_ids.h"

struct fold_stats {
	uint64_t booked;       /* records counted in the ledger */
	uint64_t duplicates;   /* records of an id already booked: ignored */
	uint64_t bad;          /* lines that are not valid records: skipped */
	uint64_t gap_segments; /* segments deleted before they were folded */
};

/* Called for each outcome booked (the agent's score-stream detectors). */
typedef void (*fold_observe_fn)(void *ctx, const struct sg_outcome *o);

struct outcome_fold {
	struct ledger *ledger; /* not owned */
	struct outcome_ids *ids;
	struct journal_cursor cur;
	struct fold_stats stats;
	uint64_t segment; /* of the last record read, for forgetting ids */
	fold_observe_fn observe;
	void *observe_ctx;
};

/* Fold `journal_dir` into `ledger` from `from` on ({0, 0}: all of it). */
int fold_init(struct outcome_fold *f, const char *journal_dir, struct ledger *ledger,
	      const struct journal_pos *from);
void fold_free(struct outcome_fold *f);

/* Learn the ids of the records before the starting position (from the
 * oldest retained segment), so that none of them is booked again. The
 * outcomes of the `n_reset` tenants in `reset` (whose counts were lost)
 * are booked again from those records. Returns the records read, or
 * -errno. */
int fold_prime(struct outcome_fold *f, char *const *reset, size_t n_reset);

/* Fold up to `max` new records. Returns the number read (booked, duplicate
 * or bad), 0 when the journal has nothing new, or -errno. */
int fold_run(struct outcome_fold *f, size_t max);

/* The position after the last record folded: what a checkpoint stores. */
struct journal_pos fold_position(const struct outcome_fold *f);

#endif
