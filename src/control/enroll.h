/* Enrolling a sandbox with the kernel before any of its code runs: the
 * executor (root) writes the sandbox's sg_sandbox_ids (its tenant, run and
 * batch ids, for the agent's event lines), sg_state and sg_sandboxes
 * entries into the agent's pinned maps itself, then tells the agent (best
 * effort). A slow, absent or overloaded agent therefore never
 * opens a gap: either the kernel enforces the tenant's policy from the
 * first instruction, or the run is refused. */
#ifndef SG_CONTROL_ENROLL_H
#define SG_CONTROL_ENROLL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "abi/maps.h"
#include "sandbox/sandbox_enforcer.h"

struct agent_conn;

struct sg_enroll_request {
	struct sb_enrollment who; /* the sandbox (src/sandbox/sandbox_enforcer.h) */
	struct agent_conn *agent; /* NULL: no agent answered */
	int compile_timeout_ms;   /* to ask the agent to compile a new tenant's policy */
	int notify_timeout_ms;    /* for the (best-effort) notification */
};

struct sg_enroll_result {
	bool enforced;    /* the kernel enforces the policy on the sandbox */
	bool notified;    /* and the agent knows it (run and batch ids) */
	uint32_t slot;    /* the policy slot used */
	char detail[256]; /* why it was refused, or why it is not enforced */
};

/* Enroll the sandbox. Returns 0 with res->enforced when its entries are in
 * the pinned maps; 0 with !res->enforced when this node never had an agent
 * (no pins) and the policy does not require one (the executor's own layers
 * hold alone); or -errno when the run must be refused (a platform error
 * whose cause res->detail names):
 *  - pins present but the tenant's policy is not compiled and no agent
 *    compiled it within compile_timeout_ms;
 *  - no pins and policy->require_agent;
 *  - the agent resolves policy paths in another root than this executor's
 *    (-EXDEV);
 *  - the maps refused the entries (full, ...). */
int sg_enroll_sandbox(const struct sg_enroll_request *req, struct sg_enroll_result *res);

/* A prepared sandbox's next run: its run and batch ids (req's tenant,
 * sandbox, cgroup_id, run_id, batch_id) replace those written at
 * enrollment, for the agent's event lines. 0 (also when no agent's map is
 * pinned), or -errno with `detail`. */
int sg_enroll_ids(const struct sg_enroll_request *req, char *detail, size_t len);

/* Take a sandbox's entries out of the pinned maps (after its verdict was
 * read). The agent does it too when it sees the cgroup go. */
void sg_enroll_release(uint64_t cgroup_id);

/* A scratch's identity for sg_sandbox, its path resolved beneath root_fd:
 * a mount point (the tmpfs an executor mounts for each sandbox) is judged
 * by its filesystem (SG_SB_SCRATCH_FS), a plain directory by (dev, ino).
 * 0, or -errno when there is no such directory. */
int sg_scratch_identity(int root_fd, const char *path, struct sg_sandbox *sb);

#endif
