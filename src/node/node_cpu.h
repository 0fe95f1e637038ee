/* Node-wide CPU commitments: admission keeps the CPU shares (policy
 * limits.cpu) of the sandboxes running on a node within its CPUs, across
 * every executor process (CLI runs and serve alike), so that a deadline is
 * rarely missed for want of a CPU (see docs/oncall.md).
 *
 * A commitment is a file <run>/cpu/c-<millicores>-<pid>-<mark>-<random>, flock'd
 * by its holder for as long as it holds it (<run> = $SANDGUARD_RUN_DIR or
 * /run/sandguard). The kernel drops the lock when the holder dies, so a
 * killed executor never leaks CPU: the next admission finds the file
 * unlocked and removes it. Admission scans the directory under
 * <run>/cpu/.lock, so two admissions never both take the last core; the
 * files bearing its own process's mark (random, per process) it counts
 * without opening them, as it holds them.
 *
 * Capacity: $SANDGUARD_NODE_CPUS (cores, may be fractional, may exceed the
 * real count to overcommit on purpose), else the CPUs this process may run
 * on. A commitment is min(limits.cpu, node CPUs): a policy asking for
 * more than the node has gets the whole node, alone. */
#ifndef SG_NODE_CPU_H
#define SG_NODE_CPU_H
#include <limits.h>
#include <stdint.h>

struct node_cpu_commit {
	int fd; /* -1: none held */
	char path[PATH_MAX];
	uint32_t milli;
};

/* The CPUs this process may run on (at least 1). */
unsigned node_cpu_count(void);

/* What admission may commit, in millicores. 0 or -EINVAL (a bad
 * $SANDGUARD_NODE_CPUS). */
int node_cpu_capacity(uint32_t *milli);

/* Commit `cpu` cores. wait_ms 0: do not wait. Returns 0 (held), -EBUSY
 * (full, not waiting), -ETIMEDOUT (still full after wait_ms) with *used and
 * *cap (millicores) set for the message, or -errno. */
int node_cpu_commit(double cpu, uint64_t wait_ms, struct node_cpu_commit *c, uint32_t *used,
		    uint32_t *cap);
void node_cpu_release(struct node_cpu_commit *c);

/* The same mechanism for any amount (src/node/node_mem.c's MiB): commit
 * `amount` in the line <run>/<sub> of capacity `cap`, first come first
 * served. Same returns; node_cpu_release() gives it back. */
int node_line_commit(const char *sub, uint32_t amount, uint32_t cap, uint64_t wait_ms,
		     struct node_cpu_commit *c, uint32_t *used);

/* A timeout's confirmation run (src/exec/exec_confirm.c) also commits its
 * CPU in a line of its own, <run>/cpu-confirm/, whose capacity is the
 * CPUs this process may run on, whatever $SANDGUARD_NODE_CPUS
 * overcommits: confirmation runs together never need more CPU than the
 * node has, so each can get what it is owed. Same returns as above. */
int node_cpu_commit_confirmation(double cpu, uint64_t wait_ms, struct node_cpu_commit *c,
				 uint32_t *used, uint32_t *cap);

#endif
