/* The agent's on-demand programs: the fallback's file programs (syscall
 * tracepoints), attached only while at least one sandbox is enrolled.
 * Attaching any syscall tracepoint puts every system call of every task
 * on the node on the kernel's slow path (docs/performance.md), so a node
 * with no sandbox pays nothing for them.
 *
 * The agent pins each program, not attached, as
 *   <pin root>/gen-N/ondemand/prog/<category>:<tracepoint>
 * and whoever enrolls a sandbox attaches them, pinning each link as
 *   <pin root>/gen-N/ondemand/link/<category>:<tracepoint>
 * (bpffs reserves dots in names).
 * The executor does it itself (src/control/enroll.c), so a sandbox is
 * watched before its first instruction even with the agent down; the
 * agent detaches them once no sandbox is left.
 *
 * Never a live sandbox unwatched: attach and detach take an exclusive
 * flock on the pin root. An enroller writes the sandbox's map entries
 * first and attaches under the lock after; the detacher checks under the
 * lock that sg_sandboxes is empty and unpins the links before releasing
 * it. So either the detacher saw the entry (and kept the links), or it
 * detached before the enroller took the lock (and the enroller attaches
 * again). */
#ifndef SG_CONTROL_ONDEMAND_H
#define SG_CONTROL_ONDEMAND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The exclusive lock on the pin root: an fd to pass to
 * sg_ondemand_unlock(), or -errno. */
int sg_ondemand_lock(void);
void sg_ondemand_unlock(int lock_fd);

/* Attach every on-demand program of generation `gen` (0: the active one)
 * that is not attached, under the lock (held by the caller when
 * lock_fd >= 0, taken here when -1). 0 when all are attached (or the
 * generation has none: LSM mode, an older agent); -errno with `why`
 * saying what failed. */
int sg_ondemand_attach(int lock_fd, uint32_t gen, char *why, size_t len);

struct sg_pinset;
struct sg_gen_facts;

/* The same for the active generation of an executor's kept set of maps
 * (pinset.h), taking the lock: its generation is read from the set's
 * sg_config, under the lock. `facts` (or NULL) are what the enrollment
 * read of that generation: when it is the one active, its program names
 * spare a read of the directory. */
int sg_ondemand_attach_set(const struct sg_pinset *set, const struct sg_gen_facts *facts, char *why,
			   size_t len);

/* Whether sg_sandboxes holds no sandbox (false when it cannot be read). */
bool sg_ondemand_no_sandbox(void);

/* Detach them all when sg_sandboxes is empty, under the lock. Returns 1
 * when it detached something, 0 when not (a sandbox is enrolled, or
 * nothing was attached), -errno. */
int sg_ondemand_detach_if_idle(void);

/* Whether the on-demand programs of the active generation are attached:
 * 1 all, 0 none or some, -ENOENT when it has none. */
int sg_ondemand_attached(void);

#endif
