/* Per-tenant state on a node that outlives one executor process:
 *  - paused tenants: a file <state>/paused/<tenant> (JSON: tenant,
 *    paused_at, reason), <state> = $SANDGUARD_STATE_DIR or
 *    /var/lib/sandguard. It survives reboots; only `sandguard tenant
 *    resume` removes it.
 *  - the concurrency cap: slot files <run>/tenants/<tenant>/slot-<i>.lock,
 *    i < limits.concurrency, <run> = $SANDGUARD_RUN_DIR or /run/sandguard.
 *    A sandbox holds an exclusive flock on one slot for its life; the
 *    kernel drops the lock when the holder dies, so a crashed executor
 *    never leaks a slot. Works across processes and across threads (each
 *    slot is its own open file description). A process skips the slots
 *    it holds itself without opening their files. */
#ifndef SG_TENANT_STATE_H
#define SG_TENANT_STATE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "node_cpu.h"
#include "policy/policy.h"

#define SG_STATE_DIR_DEFAULT "/var/lib/sandguard"

int tenant_state_dir(char *buf, size_t len); /* <state> */
int tenant_run_dir(char *buf, size_t len);   /* <run> */

/* Pause `tenant` (idempotent: a second pause keeps the first reason).
 * Returns 0 or -errno. */
int tenant_pause(const char *tenant, const char *reason);
/* Returns 0 when it was paused, -ENOENT when it was not, or -errno. */
int tenant_resume(const char *tenant);
/* Returns 1 paused (info = the stored JSON, may be NULL), 0 not, -errno
 * when the state cannot be read (a platform error, not "not paused"). */
int tenant_paused(const char *tenant, char *info, size_t info_len);
/* Calls fn for each paused tenant in name order; stops at fn's first
 * non-zero return and returns it. 0, or -errno. */
int tenant_list_paused(int (*fn)(const char *tenant, const char *info, void *arg), void *arg);

struct own_slots;

struct tenant_slot {
	int fd; /* -1 when not held */
	int index;
	struct own_slots *noted;    /* this process's note of it (tenant_state.c) */
	char tenant[SG_TENANT_MAX]; /* whose: its release wakes that line */
	struct node_cpu_commit cpu; /* the node CPU it commits (node_cpu.h) */
	struct node_cpu_commit mem; /* and the node memory (node_mem.h) */
};

/* Take one of `cap` slots, first come first served (lib/ticket_queue.h:
 * <run>/tenants/<tenant>/queue). wait_ms = 0: do not wait (-EBUSY when all
 * are held or others wait); else wait in line until one frees, at most
 * wait_ms (-ETIMEDOUT, having left the line).
 * Other failures: -errno (a platform error). */
int tenant_slot_acquire(const char *tenant, uint32_t cap, uint64_t wait_ms,
			struct tenant_slot *slot);
/* Releases the slot and its CPU commitment. */
void tenant_slot_release(struct tenant_slot *slot);

#endif
