/* The agent's per-tenant ledger: every attempt's outcome, every enforcement
 * event and every kill, counted per tenant, persisted across restarts. It is
 * the source of the failure, batch and kill metrics and of `sandguard top`.
 *
 * What is counted, per tenant:
 *   attempts            every outcome booked (each attempt of a batch)
 *   failures[cause]     attempts that failed, by cause (failures[SG_CAUSE_OK]
 *                       stays 0), verdicts left out
 *   verdicts[cause]     failed runs of model-written programs (verifier mode,
 *                       run-once): the program's verdict, nobody's fault
 *   failures_by_class   both split by outcome_class(): a platform_error is a
 *                       platform fault, never the tenant's; a verdict is
 *                       class verdict, never the tenant's
 *   violations[rule]    tenant_policy_violation outcomes (failures and
 *                       verdicts) by the rule broken
 *   batches_ok/_failed  outcomes with final = true: the batch's last attempt;
 *                       a delivered verdict is an ok request
 *   degenerate, invalid final outcomes flagged constant / invalid
 *   duration            final outcomes' wall_ms, as a histogram in seconds
 *                       over ledger_duration_bounds (+Inf last)
 *   cost[class]         metered attempts' CPU, wall and memory time
 *                       (ledger_cost.h)
 *   kills[rule]         sandboxes the agent emptied, by rule
 *   events[type][action] enforcement events (enum sg_event_type x action)
 *
 * Tenants are bounded, but a fleet's are not folded together: a tenant with
 * a policy file of its own (ledger_set_policy_check) gets a row of its own,
 * whenever it first books, up to LEDGER_MAX_TENANTS rows in all. A name
 * without one (a client inventing tenants; they run under the default
 * policy) gets a row only while fewer than LEDGER_MAX_INVENTED such rows
 * exist. Bookings for any further tenant go to the reserved tenant
 * LEDGER_OVERFLOW (a name no policy can have), each one counted in
 * ledger_overflowed() and the first one logged. Whether a name has a
 * policy file is asked once, when its row is made (and again for each row
 * a checkpoint restores); without a check every name counts as invented.
 *
 * Persistence: the ledger is a view of the outcome journal (journal.h) plus
 * the agent's own enforcement counts (events, kills), saved as a checkpoint:
 * the counts and the journal position they include, in one file. A restart
 * loads it and folds the journal from that position (outcome_fold.h), so
 * no outcome is lost or counted twice; what the checkpoint cannot give back
 * is at most the events and kills of the last second.
 *
 * ledger_save() writes JSON to a temporary file in the same directory,
 * fsyncs it, renames it over the path and fsyncs the directory, so a crash
 * leaves the old file or the new one, never a mix. ledger_load() replaces
 * the ledger's content with the file's. The file format (version 2):
 *   {"version": 2, "journal": {"segment": N, "offset": N},
 *    "overflowed": N, "tenants": {"<name>": {
 *      "attempts": N, "batches": {"ok": N, "failed": N},
 *      "degenerate": N, "invalid": N,
 *      "failures": {"<cause>": N, ...}, "verdicts": {"<cause>": N, ...},
 *      "violations": {"<rule>": N, ...}, "kills": {"<rule>": N, ...},
 *      "events": {"<type>": {"<action>": N, ...}, ...},
 *      "duration": {"buckets": [N x 14], "sum_seconds": X},
 *      "cost": {...} (ledger_cost.h; optional)}}}
 * Zero entries are left out of the name-keyed maps. A version 1 file (no
 * "journal", no "verdicts") is read as a checkpoint from before the
 * journal: the whole journal is folded on top of it.
 *
 * What a bad file costs: a tenant whose row is unreadable (a bad field, an
 * unknown name, counts that disagree) is dropped alone, named in the load
 * report, and every other tenant is restored. A file that is not a ledger
 * at all (not JSON, a wrong version, a bad top level) is corrupt: nothing
 * is restored, and unless the load is read-only (LEDGER_LOAD_READ_ONLY,
 * `sandguard top`) it is moved aside to <path>.corrupt-<unix seconds> so it
 * is kept for inspection and the next save does not overwrite it. A path
 * that is a directory or not a regular file is left where it is.
 *
 * Thread safety: one mutex; ledger_foreach() runs its callback under it, so
 * the callback must not call back into the ledger.
 *
 * Errors: 0 or a negative errno; -EINVAL (logged) for an invalid tenant name,
 * cause, rule, type or action: nothing of that booking is counted.
 */
#ifndef SG_LEDGER_H
#define SG_LEDGER_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <limits.h>
#include "abi/events.h"
#include "journal.h"
#include "ledger_cost.h"
#include "outcome.h"
#include "policy/policy.h"

#define LEDGER_MAX_INVENTED 1024 /* rows of names without a policy file */
/* Rows in all: every policy slot (SG_MAX_TENANTS, 16384) twice over, for
 * tenants whose files were removed or rotated, plus the invented ones. A
 * row is about 1.7 KiB. */
#define LEDGER_MAX_TENANTS (32768 + LEDGER_MAX_INVENTED)
#define LEDGER_OVERFLOW    "_overflow"
#define LEDGER_N_BOUNDS    13
#define LEDGER_N_ACTIONS   (SG_ACTION_LOGGED + 1) /* index 0 unused */
#define LEDGER_N_CLASSES   (SG_CLASS_VERDICT + 1) /* SG_CLASS_NONE unused */
#define LEDGER_VERSION     2

/* Batch duration bucket bounds, seconds: 0.005 .. 60. */
extern const double ledger_duration_bounds[LEDGER_N_BOUNDS];

struct ledger_duration {
	uint64_t buckets[LEDGER_N_BOUNDS + 1]; /* per bucket, not cumulative */
	double sum_seconds;
	uint64_t count;
};

struct ledger_tenant {
	char name[SG_TENANT_MAX];
	uint64_t attempts;
	uint64_t failures[SG_CAUSE__COUNT];
	uint64_t verdicts[SG_CAUSE__COUNT];
	uint64_t failures_by_class[LEDGER_N_CLASSES];
	uint64_t violations[SG_RULE__COUNT];
	uint64_t batches_ok, batches_failed;
	uint64_t degenerate, invalid;
	/* Timeouts' confirmation runs (src/exec/exec_confirm.c): how many
	 * ran, and how many of them did not time out again (the first run's
	 * timeout was the node's). */
	uint64_t confirmations, confirmations_overturned;
	uint64_t confirmations_unadmitted; /* due, but no room or time to run */
	/* Environments' sessions (mode session): their steps by cause, and
	 * their ends (final records) by cause. */
	uint64_t session_steps[SG_CAUSE__COUNT];
	uint64_t sessions_ended[SG_CAUSE__COUNT];
	struct ledger_duration duration;
	/* What its runs cost, by class (src/telemetry/ledger_cost.h). */
	struct ledger_cost cost[LEDGER_COST_CLASSES];
	uint64_t kills[SG_RULE__COUNT];
	uint64_t events[SG_EV__COUNT][LEDGER_N_ACTIONS];
	bool invented; /* no policy file when the row was made (or restored) */
};

struct ledger;

struct ledger *ledger_new(void);
void ledger_free(struct ledger *l);

/* Whether a tenant has a policy file of its own. Called with the ledger's
 * lock held, once per new name: it must not call into the ledger. */
typedef bool (*ledger_policy_fn)(const char *tenant, void *ctx);
void ledger_set_policy_check(struct ledger *l, ledger_policy_fn fn, void *ctx);

int ledger_book_outcome(struct ledger *l, const struct sg_outcome *o);
int ledger_book_event(struct ledger *l, const char *tenant, enum sg_event_type type,
		      enum sg_event_action action);
int ledger_book_kill(struct ledger *l, const char *tenant, enum sg_rule rule);

/* Visit every tenant in the order first booked (LEDGER_OVERFLOW last). */
typedef void (*ledger_visit_fn)(const struct ledger_tenant *t, void *ctx);
void ledger_foreach(struct ledger *l, ledger_visit_fn fn, void *ctx);

/* Copy one tenant's counts. -ENOENT if it was never booked. */
int ledger_get(struct ledger *l, const char *tenant, struct ledger_tenant *out);
size_t ledger_tenant_count(struct ledger *l);   /* LEDGER_OVERFLOW included */
size_t ledger_invented_count(struct ledger *l); /* rows of names without a policy file */
uint64_t ledger_overflowed(struct ledger *l);

/* What a checkpoint holds beside the counts. */
struct ledger_checkpoint {
	bool has_position;      /* false: a version 1 file; fold the whole journal */
	struct journal_pos pos; /* the journal position the counts include */
};

/* What a load found wrong. */
struct ledger_load_report {
	char **dropped; /* tenants whose rows were unreadable: they start over */
	size_t n_dropped;
	char why[320];        /* the first problem, for the log and `status` */
	char aside[PATH_MAX]; /* where a corrupt file was moved, else "" */
};
void ledger_load_report_free(struct ledger_load_report *r);

#define LEDGER_LOAD_READ_ONLY 1u /* never move a corrupt file aside */

/* The checkpoint document (owned by the caller); NULL on ENOMEM. */
json_t *ledger_to_json(struct ledger *l, const struct journal_pos *pos);
/* Replace the ledger's content with a checkpoint document's. 0 (tenants
 * dropped are in the report), -EBADMSG (nothing restored, the ledger
 * untouched; rep->why says why) or -ENOMEM. */
int ledger_from_json(struct ledger *l, json_t *root, struct ledger_checkpoint *cp,
		     struct ledger_load_report *rep);

/* Save the counts and the journal position `pos` they include. */
int ledger_save(struct ledger *l, const char *path, const struct journal_pos *pos);
/* Load a checkpoint. 0 when it was read (tenants dropped are in the
 * report); -ENOENT when there is none; -EBADMSG for a corrupt file (moved
 * aside unless LEDGER_LOAD_READ_ONLY: rep->aside); -EISDIR, -EINVAL (not
 * a regular file) or another -errno when it cannot be read (left in place).
 * On any error the ledger is left as it is. `rep` is always filled in;
 * free it with ledger_load_report_free(). */
int ledger_load(struct ledger *l, const char *path, unsigned flags, struct ledger_checkpoint *cp,
		struct ledger_load_report *rep);

#endif
