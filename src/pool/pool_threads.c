/* The warm pool's two threads (see src/pool/pool.h): the keeper
 * prepares sandboxes ahead of demand, lets idle kinds go and reaps
 * orphans; the retirer resets warm sandboxes for their next call and
 * tears down the rest. Both do the pool's own work off the callers' path,
 * and both wait for a quiet moment first (pool_quiet.h). Kept apart from
 * pool.c, the callers' side, which only queues work for them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "control/enforcer.h"
#include "interp/interp.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/priority.h"
#include "control/agent_shared.h"
#include "pool_state.h"

/* ---- the keeper ------------------------------------------------------ */

/* The most in use at once lately, and one spare: a take leaves one ready,
 * so that its refill can wait for a quiet moment (pool_keeper()). */
static unsigned wanted(const struct kind *k)
{
	unsigned peak = k->peak_now > k->peak_before ? k->peak_now : k->peak_before;
	unsigned cap = k->policy.limits.concurrency;

	if (k->stale || !peak)
		return 0;
	return peak + 1 < cap ? peak + 1 : cap;
}

/* Not urgent, and a caller on its path: wait for a quiet moment first
 * (src/pool/pool_quiet.h). Called and returns with the lock held. */
static void wait_quiet(struct pool *p)
{
	pthread_mutex_unlock(&p->lock);
	pool_quiet_wait(&p->quiet, QUIET_MAX_MS);
	pthread_mutex_lock(&p->lock);
}

/* Windows roll, idle kinds go stale, stale ones are let go. Under the lock. */
static void age(struct pool *p, uint64_t now, struct sandbox **later)
{
	for (struct kind **kp = &p->kinds; *kp;) {
		struct kind *k = *kp;

		if (now - k->window_start >= WINDOW_MS) {
			k->peak_before = k->peak_now;
			k->peak_now = k->in_use;
			k->window_start = now;
		}
		/* A kept warm interpreter past max_age_s goes now, not at its
		 * next call (which would then start a new one on its path). */
		for (size_t i = k->n_warm; i-- > 0;) {
			if (interp_expired(k->warm[i])) {
				sg_debug("warm pool: tenant %s: a warm interpreter is past "
					 "max_age_s (%u): retired",
					 k->tenant, k->policy.warm.max_age_s);
				pool_retire_locked(p, k->warm[i], later);
				k->warm[i] = k->warm[--k->n_warm];
			}
		}
		if (!k->in_use && now - k->last_take >= p->idle_ms && !k->stale) {
			k->stale = true;
			pool_retire_ready(p, k, later);
		}
		if (k->stale && !k->n_ready && !k->n_warm && !k->preparing && !k->in_use) {
			*kp = k->next;
			free(k->ready);
			free(k->warm);
			free(k);
			continue;
		}
		kp = &k->next;
	}
}

/* At the pool's bound, a ready sandbox of the kind used longest ago makes
 * room for one used since. Under the lock; false when there is none. */
static bool make_room(struct pool *p, const struct kind *for_k, struct sandbox **later)
{
	struct kind *victim = NULL;

	for (struct kind *k = p->kinds; k; k = k->next)
		if (k != for_k && k->n_ready && k->last_take < for_k->last_take &&
		    (!victim || k->last_take < victim->last_take))
			victim = k;
	if (!victim)
		return false;
	pool_retire_locked(p, victim->ready[--victim->n_ready], later);
	return true;
}

/* The kind used last of those short of ready sandboxes, with room made for
 * it within the pool's bound. Under the lock; NULL: none. */
static struct kind *short_kind(struct pool *p, uint64_t now, struct sandbox **later)
{
	struct kind *best = NULL;
	size_t total = 0;

	for (struct kind *k = p->kinds; k; k = k->next) {
		total += k->n_ready + k->preparing;
		if (k->n_ready + k->preparing < wanted(k) && now >= k->backoff_until &&
		    (!best || k->last_take > best->last_take))
			best = k;
	}
	if (best && total >= p->max_ready && !make_room(p, best, later))
		return NULL;
	return best;
}

/* One sandbox for k, prepared with the lock released. */
static void prepare_one(struct pool *p, struct kind *k)
{
	struct sandbox_spec spec = { .policy = &k->policy,
				     .tenant = k->tenant,
				     .allow_exec_in_scratch = k->exec_in_scratch,
				     .enforcer = sg_kernel_enforcer(agent_shared_get(p->agent)) };
	struct sandbox *sb = NULL, *now = NULL;
	char detail[256];
	int err;

	k->preparing++;
	pthread_mutex_unlock(&p->lock);
	err = sandbox_prepare(&spec, &sb, detail, sizeof(detail));
	if (!err)
		sandbox_may_keep(sb); /* this thread lives as long as the pool */
	if (!err && (err = sandbox_wait_ready(sb, READY_WAIT_MS, detail, sizeof(detail)))) {
		sandbox_destroy(sb);
		sb = NULL;
	}
	if (err)
		sg_warn("warm pool: cannot prepare a sandbox for tenant %s: %s", k->tenant, detail);
	pthread_mutex_lock(&p->lock);
	k->preparing--;
	if (err) {
		p->stats.prepare_failures++;
		k->backoff_until = clock_ms(CLOCK_MONOTONIC) + BACKOFF_MS;
	} else if (k->stale || p->stopping ||
		   !pool_room((void **)&k->ready, k->n_ready, &k->cap_ready, sizeof(*k->ready))) {
		pool_retire_locked(p, sb, &now);
	} else {
		k->ready[k->n_ready++] = sb;
	}
	if (now) {
		pthread_mutex_unlock(&p->lock);
		sandbox_destroy(now);
		pthread_mutex_lock(&p->lock);
	}
}

static void reap_orphans(struct pool *p, uint64_t now)
{
	int n;

	if (now - p->last_reap < REAP_EVERY_MS)
		return;
	p->last_reap = now;
	pthread_mutex_unlock(&p->lock);
	n = exec_reap_orphans(agent_shared_get(p->agent));
	if (n < 0)
		sg_warn("warm pool: cannot look for orphaned sandboxes: %s", strerror(-n));
	pthread_mutex_lock(&p->lock);
}

void *pool_keeper(void *arg)
{
	struct pool *p = arg;
	bool waited = false;

	/* Preparing is the pool's own work: below the sandboxes that run;
	 * but only where its inits can return to the runs' priority (an init
	 * it clones inherits its thread's). */
	if (!sg_can_raise_priority())
		sg_debug("warm pool: no CAP_SYS_NICE: the keeper prepares at the runs' priority");
	else if (setpriority(PRIO_PROCESS, (id_t)gettid(), POOL_NICE))
		sg_debug("warm pool: cannot lower the keeper's priority: %s", strerror(errno));
	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		struct sandbox *later = NULL;
		struct kind *k;
		struct timespec until;

		age(p, now, &later);
		k = short_kind(p, now, &later);
		if (later) {
			pthread_mutex_unlock(&p->lock);
			sandbox_destroy(later);
			pthread_mutex_lock(&p->lock);
			continue; /* the kinds may have changed meanwhile */
		}
		reap_orphans(p, now);
		/* A kind with one ready still is a refill that can wait for
		 * the callers on their path; one with none is not. */
		if (k && !p->stopping && k->n_ready && !waited) {
			wait_quiet(p);
			waited = true;
			continue; /* the kinds may have changed meanwhile */
		}
		waited = false;
		if (k && !p->stopping) {
			prepare_one(p, k);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += TICK_MS * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&p->wake, &p->lock, &until);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* ---- the retirer ----------------------------------------------------- */

/* Room for one more kept warm sandbox of k: each holds a uid slot and an
 * interpreter, and each runs one script, so a tenant calling many
 * scripts one after the other would keep one per script and take the
 * node's slots from other tenants. At most the policy's concurrency are
 * kept; the one kept longest ago goes. Under the lock. */
static void bound_warm(struct pool *p, struct kind *k, struct sandbox **now)
{
	while (k->n_warm && k->n_warm >= k->policy.limits.concurrency) {
		pool_retire_locked(p, k->warm[0], now);
		memmove(&k->warm[0], &k->warm[1], (k->n_warm - 1) * sizeof(*k->warm));
		k->n_warm--;
	}
}

/* A warm sandbox after its call: reset, and kept for its kind's next call
 * unless the reset refused it (its interpreter is recycled) or the kind
 * went stale meanwhile. Called and returns with the lock held. */
static void recycle_one(struct pool *p, struct lent l)
{
	char detail[256];
	struct sandbox *now = NULL;
	int err;

	pthread_mutex_unlock(&p->lock);
	err = sandbox_reset(l.sb, detail, sizeof(detail));
	if (err)
		sg_debug("warm pool: %s", detail);
	pthread_mutex_lock(&p->lock);
	l.k->in_use--;
	if (err || l.k->stale || p->stopping ||
	    !pool_room((void **)&l.k->warm, l.k->n_warm, &l.k->cap_warm, sizeof(*l.k->warm))) {
		pool_retire_locked(p, l.sb, &now);
	} else {
		bound_warm(p, l.k, &now);
		l.k->warm[l.k->n_warm++] = l.sb;
	}
	if (now) {
		pthread_mutex_unlock(&p->lock);
		sandbox_destroy(now);
		pthread_mutex_lock(&p->lock);
	}
}

void *pool_retirer(void *arg)
{
	struct pool *p = arg;
	bool waited = false;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct sandbox *sb;

		while (!p->n_retired && !p->n_recycled && !p->stopping)
			pthread_cond_wait(&p->gone, &p->lock);
		if (p->n_recycled) {
			recycle_one(p, p->recycled[--p->n_recycled]);
			continue;
		}
		if (!p->n_retired)
			break; /* stopping, and nothing left */
		/* A teardown can wait for the callers on their path, unless
		 * too many wait. */
		if (!waited && !p->stopping && p->n_retired <= QUIET_BACKLOG) {
			wait_quiet(p);
			waited = true;
			continue;
		}
		waited = false;
		sb = p->retired[--p->n_retired];
		p->destroying++;
		pthread_mutex_unlock(&p->lock);
		sandbox_destroy(sb);
		pthread_mutex_lock(&p->lock);
		p->destroying--;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}
