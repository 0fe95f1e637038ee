/* The agent's side of the outcome journal: it folds the journal into the
 * ledger as executors append to it (inotify on the journal directory, and
 * the 1 s tick), feeds each booked outcome to the score-stream detectors,
 * and saves a checkpoint (the ledger and the journal position it includes)
 * whenever either moved. A start loads the checkpoint and folds the rest;
 * without a usable checkpoint it rebuilds from the journal and says so
 * (status, /metrics, the log). It also watches the journal's disk: below
 * the reserve, /readyz and `status --check` go red.
 *
 * Everything runs on the loop's thread except agent_outcomes_ready() and
 * the metrics' reading of `shown`, which take a->lock. */
#ifndef SG_AGENT_OUTCOMES_H
#define SG_AGENT_OUTCOMES_H
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include "telemetry/journal.h"
#include "telemetry/outcome_fold.h"

struct agent;

/* Why the ledger was rebuilt from the journal rather than restored. */
enum ledger_rebuild {
	REBUILD_MISSING = 0, /* no checkpoint, and the journal has records */
	REBUILD_CORRUPT,     /* the checkpoint is not a ledger (moved aside) */
	REBUILD_UNREADABLE,  /* a directory, not a regular file, no permission */
	REBUILD_TENANTS,     /* some tenants' rows were unreadable: those alone */
	REBUILD_GAP,         /* journal segments were deleted before being folded */
	REBUILD__COUNT
};
const char *ledger_rebuild_name(enum ledger_rebuild r); /* the metric's reason */

/* What status and /metrics show; updated under a->lock. */
struct outcomes_shown {
	struct fold_stats fold;
	struct journal_pos pos;
	uint64_t rebuilds[REBUILD__COUNT];
	char last_rebuild[512]; /* "" when none */
	uint64_t last_rebuild_at;
	uint64_t checkpoint_saved_at; /* unix seconds, 0: not since start */
	uint64_t checkpoint_failures;
	char checkpoint_error[384]; /* "" when the last save worked */
};

struct agent_outcomes {
	struct journal journal;
	struct outcome_fold fold;
	char checkpoint[PATH_MAX];
	int inotify_fd;
	struct journal_pos saved; /* the position of the last checkpoint */
	bool pending;             /* the journal has more than the last chunk took */
	bool disk_low;            /* as last logged */
	uint64_t gaps_seen;
	struct outcomes_shown shown;
};

/* After the ledger exists: load the checkpoint, learn the ids before its
 * position, and open the journal for folding. 0 or -errno. */
int agent_outcomes_start(struct agent *a);
/* Fold what is left and save a last checkpoint; then free. */
void agent_outcomes_stop(struct agent *a);

int agent_outcomes_fd(struct agent *a); /* inotify: readable when the journal grew */
/* Fold a chunk after a wake-up (inotify) or when `pending`. */
void agent_outcomes_fold(struct agent *a, bool notified);
/* The 1 s tick: fold, save the checkpoint if anything moved, check the disk. */
void agent_outcomes_tick(struct agent *a);
bool agent_outcomes_pending(struct agent *a);

/* The journal's disk is above its reserve; else `why` says so. Any thread. */
bool agent_outcomes_ready(struct agent *a, char *why, size_t len);
/* {"ledger": {...}, "journal": {...}} members for the status reply. */
void agent_outcomes_status(struct agent *a, json_t *status);

#endif
