/* The warm pool's state, shared by its callers' side (pool.c: take,
 * retire, start, stop) and its two threads (pool_threads.c: the
 * keeper and the retirer). Private to src/pool; the pool's API is
 * pool.h. One lock (pool.lock) guards all of it. */
#ifndef SG_WARM_POOL_STATE_H
#define SG_WARM_POOL_STATE_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "pool.h"
#include "pool_quiet.h"

#define WINDOW_MS     10000 /* demand: the peak of this window and the last */
#define TICK_MS       500
#define REAP_EVERY_MS 1000
#define READY_WAIT_MS 10000 /* a preparation that takes longer failed */
#define BACKOFF_MS    1000  /* after a failed preparation, for that kind */
#define IDLE_MS       60000
#define MAX_READY_CAP 64
#define QUIET_MAX_MS  250 /* the longest the pool's work waits for quiet (pool_quiet.h) */
#define QUIET_BACKLOG 8   /* more retired than this: no waiting */

/* Sandboxes of one (tenant, policy, exec in scratch). */
struct kind {
	struct sg_policy policy;
	char tenant[SG_TENANT_MAX];
	bool exec_in_scratch;
	struct sandbox **ready;
	size_t n_ready, cap_ready;
	/* Reset after a call, their warm interpreters kept for the next call
	 * of the same script (docs/warm-interpreters.md). */
	struct sandbox **warm;
	size_t n_warm, cap_warm;
	unsigned preparing, in_use;
	unsigned peak_now, peak_before; /* most in use at once: this window, the last */
	uint64_t window_start, last_take, backoff_until;
	bool stale; /* unused too long, or a newer policy: no more of it */
	struct kind *next;
};

struct lent {
	struct sandbox *sb;
	struct kind *k;
};

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* the keeper: demand changed, or stop */
	pthread_cond_t gone; /* the retirer: something to tear down, or stop */
	struct kind *kinds;
	struct lent *lent;
	size_t n_lent, cap_lent;
	struct sandbox **retired;
	size_t n_retired, cap_retired;
	struct lent *recycled; /* warm sandboxes to reset, their kind's in_use kept */
	size_t n_recycled, cap_recycled;
	unsigned destroying;
	struct pool_stats stats;
	struct agent_shared *agent;
	unsigned max_ready;
	uint64_t idle_ms, last_reap;
	bool stopping;
	struct pool_quiet quiet;
	pthread_t keeper, retirer;
	struct exec_sandboxes src;
};

/* Grow an array of `size`-byte items to hold one more. */
bool pool_room(void **items, size_t n, size_t *cap, size_t size);
/* Queue sb for the retirer. Under the lock; out of memory: *now is set,
 * for the caller to destroy once the lock is released. */
void pool_retire_locked(struct pool *p, struct sandbox *sb, struct sandbox **now);
/* Retire every ready and kept warm sandbox of k. Under the lock. */
void pool_retire_ready(struct pool *p, struct kind *k, struct sandbox **now);

/* The threads' bodies (pthread_create() by pool_start()). */
void *pool_keeper(void *arg);
void *pool_retirer(void *arg);

#endif
