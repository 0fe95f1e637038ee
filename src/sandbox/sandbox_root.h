/* The sandbox's minimal root: what the tenant's mount namespace contains.
 *
 *   /                 a small tmpfs, read-only once built
 *   /tmp              bind of <scratch>/.tmp     } the scratch tmpfs: one
 *   /dev/shm          bind of <scratch>/.shm     } superblock for everything
 *   /mnt              bind of <scratch>/.mnt     }
 *   <scratch>         bind of the scratch tmpfs  } the sandbox may write
 *   /dev              a tmpfs with null, zero, urandom, random (binds of the
 *                     host's nodes) and the fd, stdin, stdout, stderr links
 *   /proc             a procfs of the sandbox's own PID namespace
 *   <read_only>       each policy path bound read-only, nosuid, nodev, at
 *                     its canonical host path; the symlinks met on the way
 *                     (/lib -> usr/lib, /etc/localtime -> ...) recreated
 *
 * Nothing else of the host exists inside: no pathname socket, no /run, no
 * /home. Bind mounts keep the files' (dev, ino) identities, so the agent's
 * rules and Landlock's, both keyed by inode, mean the same thing inside.
 *
 * The parent plans (it may allocate and stat host paths); the child runs
 * the plan with async-signal-safe calls only: sb_root_plan() builds a list
 * of operations, sb_root_enter() performs them and pivots into the result. */
#ifndef SG_SANDBOX_ROOT_H
#define SG_SANDBOX_ROOT_H
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/policy.h"

/* The empty directory the child mounts the root on (only inside its own
 * mount namespace: on the host it stays empty). */
#define SB_ROOT_BASE "/run/sandguard/sandbox-root"

enum sb_root_op_kind {
	SB_OP_DIR = 1,     /* mkdir path (0755) */
	SB_OP_FILE,        /* an empty file to bind a file onto */
	SB_OP_SYMLINK,     /* symlink src at path */
	SB_OP_BIND,        /* bind host src at path, then remount with `flags` */
	SB_OP_TMPFS,       /* mount a tmpfs at path with options src and `flags` */
	SB_OP_PROC,        /* mount the PID namespace's procfs at path */
	SB_OP_REMOUNT_RO,  /* make the mount at path read-only */
	SB_OP_LANDLOCK_RD, /* allow reading path in the Landlock ruleset (procfs) */
};

struct sb_root_op {
	int kind;
	unsigned long flags; /* MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC */
	size_t path, src;    /* offsets into the plan's string arena; 0: none */
};

struct sb_root_plan {
	struct sb_root_op *ops;
	size_t n_ops, cap_ops;
	char *arena; /* NUL-separated strings; offset 0 is the empty string */
	size_t len, cap;
	char base[4096]; /* where the root tmpfs goes before the pivot */
};

/* Plan the root for policy `p` and a scratch tmpfs mounted at `scratch`
 * (a canonical host path). `base` is an existing empty directory that the
 * child mounts the root on (it is only ever used inside the child's mount
 * namespace). exec_in_scratch drops noexec from the scratch and its /tmp.
 * The policy's paths under /proc become Landlock read rules on the
 * sandbox's own procfs (SB_OP_LANDLOCK_RD), since the host's are other
 * inodes. Returns 0 or -errno with `detail` set. */
int sb_root_plan(struct sb_root_plan *rp, const struct sg_policy *p, const char *scratch,
		 const char *base, bool exec_in_scratch, char *detail, size_t dlen);
void sb_root_plan_free(struct sb_root_plan *rp);

/* What building the root makes inside the scratch: the directories,
 * files and links the plan puts below /tmp or /dev/shm (mount points of
 * policy paths there, or of the scratch itself when it lies there), as
 * paths relative to the scratch (".tmp/...", ".shm/..."). Fills at most
 * `max` (rel may be NULL when max is 0: a count); returns how many there
 * are. */
size_t sb_root_in_scratch(const struct sb_root_plan *rp, char (*rel)[PATH_MAX], size_t max);

/* The string at an arena offset. */
const char *sb_root_str(const struct sb_root_plan *rp, size_t off);

/* Child side, as root in a fresh mount namespace: make every mount
 * private, build the root on rp->base, pivot into it and drop the old
 * root. landlock_fd (-1: none) takes the SB_OP_LANDLOCK_RD rules with
 * `landlock_read` rights. Async-signal-safe. Returns 0, or -errno with
 * *failed_op set to the index of the operation that failed. */
int sb_root_enter(const struct sb_root_plan *rp, int landlock_fd, uint64_t landlock_read,
		  size_t *failed_op);

#endif
