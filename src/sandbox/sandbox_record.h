/* In-flight records: what a killed executor leaves for the next one.
 *
 * Two kinds, in <run>/inflight (<run> = $SANDGUARD_RUN_DIR or
 * /run/sandguard), each flock'd by the executor that wrote it:
 *
 *  - a sandbox's record, <sandbox-id>.json: where its cgroups and scratch
 *    live. Held from before the first resource of the sandbox exists
 *    until the last is gone, however many runs it served (a pooled
 *    sandbox waits with it before its first run).
 *  - a run's record, <id>.run.json: what a reaper must book if the
 *    executor dies now. Two ids, each possibly booked already (the
 *    journal keeps the first record of an id, so booking again is
 *    harmless): the attempt in flight (`outcome`), and the id under which
 *    the batch's final outcome is booked (`final_id`), when this record
 *    owes it. The executor keeps one run record across a batch's
 *    attempts (struct sb_run_record) and rewrites it before each step
 *    that changes what is owed, so that at every instant exactly one
 *    final is owed by the record or already in the journal:
 *      attempt k running        outcome=k  final_id=k
 *      k booked, k+1 to follow  outcome=k  final_id=F (fresh), written
 *                               before k's non-final record is appended
 *      attempt k+1 running      outcome=k+1 final_id=k+1
 *    A verifier's tests own no final (final_id ""); its request holds a
 *    record with no run (outcome "") that owes the final. A verifier
 *    worker keeps one record for all its tests: between two of them it
 *    owes nothing (outcome "" final_id "", sb_run_record_idle()).
 *
 * The kernel drops a lock when its holder dies, however it dies: a record
 * nobody locks is an orphan. sb_records_reap() empties and removes an
 * orphaned sandbox's cgroups (v2 and v1) and scratch, and hands each id
 * an orphaned run owes to a callback (the executor books it as
 * platform_error "executor died"); then the record is deleted. A record
 * of the first version (no kind) is both; records before version 3 (no
 * final_id) owe their run's outcome as the final.
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
	char outcome[SG_ID_BUF]; /* a run: its outcome id (the sandbox's id, or <id>.<n>); "": none */
	char final_id[SG_ID_BUF]; /* a run: the batch's final outcome id it owes; "": none */
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

/* Replace a held record with `rec`, atomically (a new locked file renamed
 * over it: a reaper sees the old or the new one, never neither). 0 or
 * -errno with `detail` set; on error the old record stays held. */
int sb_record_replace(const struct sb_record *rec, struct sb_record_lock *lk, char *detail,
		      size_t dlen);

/* The attempt is booked: delete the record and drop the lock (or only
 * drop the lock, when lk->abandon). */
void sb_record_release(struct sb_record_lock *lk);

/* A batch's run record, kept by its executor across the batch's attempts
 * (see the top of this file). `rec` is what was last written (rec.kind is
 * SB_RECORD_RUN once written); the sandbox layer fills in a run's fields
 * when the run starts, the executor the ids before each booking. */
struct sb_run_record {
	struct sb_record rec;
	struct sb_record_lock lk; /* lk.path[0] once written */
	bool owes_final;          /* false: a verifier's test (the request owes it) */
};

/* Write `rec` (of kind SB_RECORD_RUN): the first time as a new record,
 * then in place (rewritten in its own file when it fits in a page, else
 * replaced by sb_record_replace()); r->rec becomes rec once it is written, and stays what
 * the file says when it could not be. 0 or -errno with `detail` set. */
int sb_run_record_write(struct sb_run_record *r, const struct sb_record *rec, char *detail,
			size_t dlen);

/* Called for each id an orphaned run owes (after its sandbox's resources
 * are gone, for a record of both kinds): its attempt (`id` is
 * rec->outcome; `final` when it is also the batch's final), then the
 * batch's final when that is another id (no run; `final`). The record is
 * deleted once every call returned 0. Books the id; 0, or -errno to keep
 * the record for a later reap (the booking could not be written: nothing
 * is lost, and what was booked is not booked twice: same ids). */
/* A held run record made to owe nothing, kept (and locked) for the next
 * run of the same worker, which rewrites it in place instead of making a
 * new file: a verifier worker's between two tests (its test is booked). A
 * reaper deletes a record that owes nothing and books nothing. 0, or
 * -errno when it could not be rewritten: it is then deleted (released). */
int sb_run_record_idle(struct sb_run_record *r);

typedef int (*sb_orphan_fn)(const struct sb_record *rec, const char *id, bool final, void *arg);

/* Reclaim every orphan in <run>/inflight. Returns how many records were
 * reaped, or -errno when the directory cannot be read. An orphan whose
 * cgroup cannot be emptied stays for the next pass (it is not booked yet). */
int sb_records_reap(sb_orphan_fn fn, void *arg);

/* Unlink the released records' files this process keeps for reuse: at an
 * orderly exit (registered with atexit when the first is kept; a caller
 * that leaves with _exit() calls it first). */
void sb_records_drop_kept(void);

#endif
