/* Node-wide memory commitments: admission keeps the memory limits (policy
 * limits.memory_mb) of the sandboxes on a node within its memory, across
 * every executor process, as node_cpu.h keeps their CPU shares. So the
 * sandboxes of sandguard, whoever's they are and however many, can never
 * together run the node out of memory: an OOM kill in a sandbox that did
 * not reach its own limit (the node's, docs/sandbox.md) is then never one
 * a tenant produced with its own concurrency.
 *
 * Commitments are files <run>/mem/c-<MiB>-<pid>-<mark>-<random>, held (flock)
 * as node_cpu.h describes. Capacity: $SANDGUARD_NODE_MEMORY_MB, else 90%
 * of the node's MemTotal (the rest is the system's, the agent's and the
 * executors' own). A commitment is min(limits.memory_mb, capacity). */
#ifndef SG_NODE_MEM_H
#define SG_NODE_MEM_H
#include <stdint.h>
#include "node_cpu.h"

/* What admission may commit, in MiB. 0 or -EINVAL (a bad
 * $SANDGUARD_NODE_MEMORY_MB), -errno (no /proc/meminfo). */
int node_mem_capacity(uint32_t *mb);

/* Commit `memory_mb`. Returns as node_cpu_commit() does, with *used and
 * *cap in MiB; node_cpu_release() gives it back. */
int node_mem_commit(uint64_t memory_mb, uint64_t wait_ms, struct node_cpu_commit *c, uint32_t *used,
		    uint32_t *cap);

#endif
