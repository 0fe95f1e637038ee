/* In-flight records: what a killed executor leaves for the next one.
 *
 * Each sandbox attempt has a record <run>/inflight/<sandbox-id>.json
 * (<run> = $SANDGUARD_RUN_DIR or /run/sandguard) with its tenant, run,
 * batch, mode, attempt, and where its cgroups and scratch live. The
 * executor holds an exclusive flock on it from before the first resource
 * of the sandbox exists until the attempt is booked (sandbox_result_free()
 * removes it). The kernel drops the lock when the executor dies, however
 * it dies: a record nobody locks is an orphan. sb_records_reap() empties
 * and removes an orphan's cgroups (v2 and v1) and scratch, hands the
 * record to a callback (the executor books it once, as platform_error
 * "executor died"), then deletes it.
 *
 * The record is made under a temporary name, locked, filled, and only
 * then renamed into place, so a reaper never sees an unlocked live one. */
#ifndef SG_SANDBOX_RECORD_H
#define SG_SANDBOX_RECORD_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/ids.h"
#include "policy/policy.h"

#define SB_RECORD_MODE_MAX 16

struct sb_record {
	char tenant[SG_TENANT_MAX];
	char run_id[SG_ID_BUF];
	char batch_id[SG_ID_BUF];
	char mode[SB_RECORD_MODE_MAX]; /* "batch", "verify", "run", or "" */
	char sandbox[SG_ID_BUF];
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

/* Write and lock the record of a sandbox about to be made. 0 or -errno
 * with `detail` set. */
int sb_record_open(const struct sb_record *rec, struct sb_record_lock *lk, char *detail,
		   size_t dlen);

/* The attempt is booked: delete the record and drop the lock (or only
 * drop the lock, when lk->abandon). */
void sb_record_release(struct sb_record_lock *lk);

/* Called for each orphan once its resources are gone; the record is
 * deleted after it returns. */
/* Books the orphan; 0, or -errno to keep its record for a later reap
 * (the booking could not be written: nothing is lost). */
typedef int (*sb_orphan_fn)(const struct sb_record *rec, void *arg);

/* Reclaim every orphan in <run>/inflight. Returns how many were reaped, or
 * -errno when the directory cannot be read. An orphan whose cgroup cannot
 * be emptied stays for the next pass (it is not booked yet). */
int sb_records_reap(sb_orphan_fn fn, void *arg);

#endif
