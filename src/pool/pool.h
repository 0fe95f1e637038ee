/* The warm pool: sandboxes prepared ahead of demand, per tenant, for a
 * long-lived executor (docs/sandbox.md, "The warm pool").
 *
 * Sandboxes are kept per kind: (tenant, policy, exec in scratch). take()
 * hands out a prepared one (its init already waiting in its namespaces
 * with the root built, the cgroups limited, the agent's enrollment done),
 * or prepares one on the caller's thread when none is ready (with its
 * stack copyable by that fork, src/pool/pool_stack.h). A sandbox is
 * handed out once: retire() queues it for teardown, off the caller's path,
 * on the pool's own thread; it never comes back.
 *
 * The pool's own work (a refill while one is still ready, a teardown)
 * waits for a moment when no caller is between its first take() and its
 * answer (pool_answered()), at most QUIET_MAX_MS: on a node with few
 * CPUs it would otherwise slow the very runs it prepares for
 * (src/pool/pool_quiet.h).
 *
 * How many are kept ready follows demand: for each kind, the most in use
 * at once over the last 10 to 20 seconds plus one spare, at most the policy's
 * concurrency, and at most `max_ready` over all kinds. A kind unused for
 * `idle_ms` is let go. A request under another policy for the same tenant
 * (a policy reload) retires every ready sandbox of the old one.
 *
 * Node CPU: a ready sandbox holds no CPU commitment (admission commits CPU
 * to running requests only, src/node/node_cpu.h) and uses none (its init
 * sleeps). Preparing one takes CPU: the pool's thread runs at nice
 * POOL_NICE, so that on a node whose CPUs are all committed it takes
 * little from the running sandboxes (their inits reset to nice 0 before
 * any run starts). The pool's thread also reaps orphans of killed
 * executors, once a second. */
#ifndef SG_WARM_POOL_H
#define SG_WARM_POOL_H
#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"

#define POOL_NICE 10

struct agent_shared;

struct pool_opts {
	struct agent_shared *agent; /* the executor's connection to the agent */
	unsigned max_ready;         /* ready sandboxes over all kinds; 0: 4 per CPU, 4..64 */
	uint64_t idle_ms;           /* 0: 60 s */
};

struct pool_stats {
	unsigned ready, preparing, in_use, retiring;
	uint64_t taken_ready; /* handed out prepared */
	uint64_t taken_fresh; /* prepared for the taker, none being ready */
	uint64_t prepare_failures;
};

struct pool;

/* Start the pool's threads. 0, or -errno with `detail`. */
int pool_start(const struct pool_opts *o, struct pool **out, char *detail, size_t len);

/* The pool as the exec modes take sandboxes (ctx->sandboxes). */
const struct exec_sandboxes *pool_source(struct pool *p);

/* Retire every ready sandbox (SIGHUP: the node's policies may have
 * changed); the pool fills again as requests come. */
void pool_drain(struct pool *p);

void pool_stats(struct pool *p, struct pool_stats *st);

/* The calling thread's caller has its answer: the pool's own work, which
 * waits (a while) for no caller to be between its first take() and its
 * answer, may go on (src/pool/pool_quiet.h). Every thread that took a
 * sandbox calls it once its answer is out (or given up on). */
void pool_answered(struct pool *p);

/* Retire everything, wait until it is torn down, stop. Every sandbox
 * taken must have been retired. */
void pool_stop(struct pool *p);

#endif
