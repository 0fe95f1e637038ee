/* Sandbox uid slots: one unprivileged uid/gid per concurrent sandbox on the
 * node, as isolate does, so that two sandboxes can neither signal nor read
 * each other. A slot is held by an flock'd lock file
 * /run/sandguard/slots/<uid>.lock for as long as its sandbox lives; the lock
 * dies with the process that holds it, so a crashed executor leaks nothing.
 *
 * The uids are SANDGUARD_UID_BASE (default 60000) .. base + SB_SLOTS - 1,
 * with gid = uid (60000 is also isolate's default). Pick a range no account
 * lives in: a uid that names an existing user or group is skipped anyway
 * (sb_slot_check()). */
#ifndef SG_SANDBOX_SLOTS_H
#define SG_SANDBOX_SLOTS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SB_UID_BASE_DEFAULT 60000
#define SB_SLOTS            256
#define SB_SLOT_DIR         "/run/sandguard/slots"

struct sb_slot {
	int lock_fd; /* -1 when no slot is held */
	uid_t uid;
	gid_t gid;
};

/* The first uid of the slot range ($SANDGUARD_UID_BASE or the default). */
int sb_uid_base(uid_t *base);

/* Take a free slot, waiting up to wait_ms for one while every slot is
 * taken. Returns 0, -EBUSY when every slot is still taken, or -errno, with
 * `detail` filled in on error. */
int sb_slot_acquire(struct sb_slot *slot, uint64_t wait_ms, char *detail, size_t dlen);

/* 0 when no account (NSS: user or group) has the slot's uid or gid, else
 * -EUSERS with `detail` filled in: running tenant code as it would hand
 * the tenant that account's files. No process may take the slot's
 * identity before this clears it (sandbox.c: the check overlaps init's
 * set-up, which does not need it, and the first main waits for it). */
int sb_slot_check(const struct sb_slot *slot, char *detail, size_t dlen);
void sb_slot_release(struct sb_slot *slot);

#endif
