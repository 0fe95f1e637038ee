/* The agent's per-tenant ledger: every attempt's outcome, every enforcement
 * event and every kill, counted per tenant, persisted across restarts. It is
 * the source of the failure, batch and kill metrics and of `sandguard top`.
 *
 * What is counted, per tenant:
 *   attempts            every outcome booked (each attempt of a batch)
 *   failures[cause]     attempts that failed, by cause (failures[SG_CAUSE_OK]
 *                       stays 0)
 *   failures_by_class   the same split by cause_class(): a platform_error is
 *                       a platform fault, never the tenant's
 *   violations[rule]    tenant_policy_violation failures by the rule broken
 *   batches_ok/_failed  outcomes with final = true: the batch's last attempt
 *   degenerate, invalid final outcomes flagged constant / invalid
 *   duration            final outcomes' wall_ms, as a histogram in seconds
 *                       over ledger_duration_bounds (+Inf last)
 *   kills[rule]         sandboxes the agent emptied, by rule
 *   events[type][action] enforcement events (enum sg_event_type x action)
 *
 * Tenants are bounded: at most LEDGER_MAX_TENANTS named tenants; bookings for
 * any further tenant go to the reserved tenant LEDGER_OVERFLOW (a name no
 * policy can have), each one counted in ledger_overflowed() and the first
 * one logged.
 *
 * Persistence: ledger_save() writes JSON to a temporary file in the same
 * directory, fsyncs it, renames it over the path and fsyncs the directory,
 * so a crash leaves the old file or the new one, never a mix. ledger_load()
 * replaces the ledger's content with the file's: a missing file is an empty
 * ledger; an unreadable or corrupt file is an error (logged, with the
 * offending field), and a corrupt file is moved aside to
 * <path>.corrupt-<unix seconds> so it is kept for inspection and the next
 * save does not overwrite it. The file format (version 1):
 *   {"version": 1, "overflowed": N, "tenants": {"<name>": {
 *      "attempts": N, "batches": {"ok": N, "failed": N},
 *      "degenerate": N, "invalid": N,
 *      "failures": {"<cause>": N, ...}, "violations": {"<rule>": N, ...},
 *      "kills": {"<rule>": N, ...},
 *      "events": {"<type>": {"<action>": N, ...}, ...},
 *      "duration": {"buckets": [N x 14], "sum_seconds": X}}}}
 * Zero entries are left out of the name-keyed maps.
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
#include "abi/events.h"
#include "outcome.h"
#include "policy/policy.h"

#define LEDGER_MAX_TENANTS 1024
#define LEDGER_OVERFLOW    "_overflow"
#define LEDGER_N_BOUNDS    13
#define LEDGER_N_ACTIONS   (SG_ACTION_LOGGED + 1)  /* index 0 unused */
#define LEDGER_N_CLASSES   (SG_CLASS_PLATFORM + 1) /* SG_CLASS_NONE unused */
#define LEDGER_VERSION     1

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
	uint64_t failures_by_class[LEDGER_N_CLASSES];
	uint64_t violations[SG_RULE__COUNT];
	uint64_t batches_ok, batches_failed;
	uint64_t degenerate, invalid;
	struct ledger_duration duration;
	uint64_t kills[SG_RULE__COUNT];
	uint64_t events[SG_EV__COUNT][LEDGER_N_ACTIONS];
};

struct ledger;

struct ledger *ledger_new(void);
void ledger_free(struct ledger *l);

int ledger_book_outcome(struct ledger *l, const struct sg_outcome *o);
int ledger_book_event(struct ledger *l, const char *tenant, enum sg_event_type type,
		      enum sg_event_action action);
int ledger_book_kill(struct ledger *l, const char *tenant, enum sg_rule rule);

/* Visit every tenant in the order first booked (LEDGER_OVERFLOW last). */
typedef void (*ledger_visit_fn)(const struct ledger_tenant *t, void *ctx);
void ledger_foreach(struct ledger *l, ledger_visit_fn fn, void *ctx);

/* Copy one tenant's counts. -ENOENT if it was never booked. */
int ledger_get(struct ledger *l, const char *tenant, struct ledger_tenant *out);
size_t ledger_tenant_count(struct ledger *l); /* LEDGER_OVERFLOW included */
uint64_t ledger_overflowed(struct ledger *l);

int ledger_save(struct ledger *l, const char *path);
/* Meant for startup, on a new ledger. Returns 0 when the file was read (its
 * content replaces the ledger's) or does not exist (the ledger is left as it
 * is), -EBADMSG for a corrupt file (moved aside), or -errno when it cannot
 * be read (left in place). On any error the ledger is left as it is. */
int ledger_load(struct ledger *l, const char *path);

#endif
