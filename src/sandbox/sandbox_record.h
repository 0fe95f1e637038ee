/* In-flight records: what a killed executor leaves for the next one.
 *
 * Two kinds, in <run>/inflight (<run> = $SANDGUARD_RUN_DIR or
 * /run/sandguard), each flock'd by the executor that wrote it:
 *
 *  - a sandbox's record, <sandbox-id>.json: where its cgroups and scratch
 *    live. Held from before the first resource of the sandbox exists
 *    until the last is gone, however many runs it served (a pooled
 *    sandbox waits with it before its first run).
 *  - a run's record, <attempt-id>.run.json: the attempt to book (tenant,
 *    run, batch, mode, attempt, outcome id). Held from before the run
 *    starts until the attempt is booked (sandbox_result_free()).
 *
 * The kernel drops a lock when its holder dies, however it dies: a record
 * nobody locks is an orphan. sb_records_reap() empties and removes an
 * orphaned sandbox's cgroups (v2 and v1) and scratch, and hands an
 * orphaned run to a callback (the executor books it once, as
 * platform_error "executor died"); then the record is deleted. A record
 * of the first version (no kind) is both.
 *
 * A record is made under a temporary name, locked, filled, and only then
 * renamed into place, so a reaper never sees an unlocked live one. */
#ifndef SG_SANDBOX_RECORD_H
#define SG_SANDBOX_RECORD_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/ids.h"
#include "policy/policy.h"

#define SB_RECORD_MODE_MAX 16

enum sb_record_kind {
	SB_RECORD_BOTH = 0, /* version 1: a sandbox and its one run */
	SB_RECORD_SANDBOX,
	SB_RECORD_RUN,
};

struct sb_record {
	enum sb_record_kind kind;
	char tenant[SG_TENANT_MAX];
	char run_id[SG_ID_BUF];
	char batch_id[SG_ID_BUF];
	char mode[SB_RECORD_MODE_MAX]; /* "batch", "verify", "run", or "" */
	char sandbox[SG_ID_BUF];
	char outcome[SG_ID_BUF]; /* a run: its outcome id (the sandbox's id, or <id>.<n>) */
	uint32_t attempt;
	char cgroup_root[PATH_MAX];  /* the sandguard cgroup2 root */
	char scratch_root[PATH_MAX]; /* as the policy names it */
	pid_t executor;
	uint64_t started_ms; /* CLOCK_REALTIME */
};

struct sb_record_lock {
	int fd; /* the locked record; meaningful only when path[0] */
	char path[PATH_MAX];
	bool abandon; /* the sandbox could not be torn down: leave the record
		       * (unlocked) for a reaper to finish the job */
};

/* Write and lock a record: of a sandbox about to be made, or of a run
 * about to start. 0 or -errno with `detail` set. */
int sb_record_open(const struct sb_record *rec, struct sb_record_lock *lk, char *detail,
		   size_t dlen);

/* The attempt is booked: delete the record and drop the lock (or only
 * drop the lock, when lk->abandon). */
void sb_record_release(struct sb_record_lock *lk);

/* Called for each orphaned run (after its sandbox's resources are gone,
 * for a record of both kinds); the record is deleted after it returns.
 * Books the orphan; 0, or -errno to keep its record for a later reap (the
 * booking could not be written: nothing is lost). */
typedef int (*sb_orphan_fn)(const struct sb_record *rec, void *arg);

/* Reclaim every orphan in <run>/inflight. Returns how many records were
 * reaped, or -errno when the directory cannot be read. An orphan whose
 * cgroup cannot be emptied stays for the next pass (it is not booked yet). */
int sb_records_reap(sb_orphan_fn fn, void *arg);

#endif
