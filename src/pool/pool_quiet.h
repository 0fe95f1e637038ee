/* Quiet moments for the warm pool's own work (docs/performance.md,
 * section 9).
 *
 * Preparing a sandbox and tearing one down are the pool's work, off every
 * caller's path, but on a node with few CPUs they still compete with the
 * callers for the CPUs and for the kernel's cgroup locks: a new sandbox's
 * init joins its v1 cgroups (a task migration, which takes the global
 * cgroup_threadgroup_rwsem for writing and holds every fork on the node,
 * the running sandbox's main process included, for an RCU grace period),
 * and a teardown removes cgroups and namespaces. Measured on the 2-CPU
 * bench VM, a warm launch of /usr/bin/true took 32.5 ms median with that
 * work starting as its sandbox was taken and 21.6 ms without.
 *
 * So the pool's threads wait, before work that is not urgent, for a
 * moment when no caller is on its path: from a caller thread's first
 * take() of a sandbox until it says its caller has the answer. They wait
 * at most a bound, so that a node that is never quiet still gets its
 * work done, only later. */
#ifndef SG_WARM_QUIET_H
#define SG_WARM_QUIET_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct pool_quiet {
	pthread_mutex_t lock;
	pthread_cond_t changed; /* on CLOCK_MONOTONIC */
	unsigned on_path;       /* caller threads between take and answer */
	bool stopping;
};

void pool_quiet_init(struct pool_quiet *q);
void pool_quiet_destroy(struct pool_quiet *q);

/* The calling thread's caller is on its path (once per thread until
 * pool_quiet_leave(); calling it again changes nothing). */
void pool_quiet_enter(struct pool_quiet *q);

/* The calling thread's caller has its answer (nothing if it never
 * entered). */
void pool_quiet_leave(struct pool_quiet *q);

/* Wait until no caller is on its path, at most max_ms, or until stopped.
 * True when it is quiet. */
bool pool_quiet_wait(struct pool_quiet *q, uint64_t max_ms);

/* Wake every waiter now, and wait no more from now on. */
void pool_quiet_stop(struct pool_quiet *q);

#endif
