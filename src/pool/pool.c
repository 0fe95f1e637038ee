/* The warm pool (see src/pool/pool.h). One lock guards the kinds,
 * the lent and the retired lists; no sandbox is prepared or destroyed
 * under it. Two threads: the keeper (prepares, lets idle kinds go, reaps
 * orphans) and the retirer (tears down), in pool_threads.c; this
 * file is the callers' side (take, retire) and the pool's start and stop. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "interp/interp.h"
#include "node/node_cpu.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "control/agent_shared.h"
#include "pool.h"
#include "pool_state.h"
#include "pool_quiet.h"
#include "pool_stack.h"

/* Grow an array of `size`-byte items to hold one more. */
bool pool_room(void **items, size_t n, size_t *cap, size_t size)
{
	size_t want = *cap ? *cap * 2 : 16;
	void *grown;

	if (n < *cap)
		return true;
	grown = realloc(*items, want * size);
	if (!grown)
		return false;
	*items = grown;
	*cap = want;
	return true;
}

/* Under the lock. Out of memory: torn down at once, on this thread. */
void pool_retire_locked(struct pool *p, struct sandbox *sb, struct sandbox **now)
{
	if (pool_room((void **)&p->retired, p->n_retired, &p->cap_retired, sizeof(*p->retired))) {
		p->retired[p->n_retired++] = sb;
		pthread_cond_signal(&p->gone);
	} else {
		*now = sb;
	}
}

void pool_retire_ready(struct pool *p, struct kind *k, struct sandbox **now)
{
	while (k->n_ready)
		pool_retire_locked(p, k->ready[--k->n_ready], now);
	while (k->n_warm)
		pool_retire_locked(p, k->warm[--k->n_warm], now);
}

/* A kept warm sandbox whose interpreter runs spec's script. Under the lock.
 * k->warm stays in the order they were kept, the oldest first. */
static struct sandbox *take_warm(struct kind *k, const struct sandbox_spec *spec)
{
	for (size_t i = k->n_warm; i-- > 0;) {
		struct sandbox *sb = k->warm[i];

		if (interp_for(sb, spec)) {
			memmove(&k->warm[i], &k->warm[i + 1],
				(k->n_warm - i - 1) * sizeof(*k->warm));
			k->n_warm--;
			return sb;
		}
	}
	return NULL;
}

static bool same_kind(const struct kind *k, const struct sandbox_spec *spec)
{
	return !strcmp(k->tenant, spec->tenant) &&
	       k->exec_in_scratch == spec->allow_exec_in_scratch &&
	       sandbox_policy_same(&k->policy, spec->policy);
}

/* The kind of spec, made if new; a tenant's other policies go stale (a
 * reload). Under the lock; NULL when out of memory. */
static struct kind *kind_of(struct pool *p, const struct sandbox_spec *spec, struct sandbox **now)
{
	struct kind *k;

	for (k = p->kinds; k; k = k->next)
		if (!k->stale && same_kind(k, spec))
			return k;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	memcpy(&k->policy, spec->policy, sizeof(k->policy));
	snprintf(k->tenant, sizeof(k->tenant), "%s", spec->tenant);
	k->exec_in_scratch = spec->allow_exec_in_scratch;
	k->window_start = clock_ms(CLOCK_MONOTONIC);
	for (struct kind *old = p->kinds; old; old = old->next) {
		if (strcmp(old->tenant, k->tenant) || old->exec_in_scratch != k->exec_in_scratch)
			continue;
		old->stale = true;
		pool_retire_ready(p, old, now);
	}
	k->next = p->kinds;
	p->kinds = k;
	return k;
}

static void lend(struct pool *p, struct sandbox *sb, struct kind *k, struct sandbox **now)
{
	if (pool_room((void **)&p->lent, p->n_lent, &p->cap_lent, sizeof(*p->lent))) {
		p->lent[p->n_lent++] = (struct lent){ .sb = sb, .k = k };
		return;
	}
	/* Out of memory: the sandbox is the taker's alone; it is destroyed
	 * when retired, the kind's count taken back now. */
	k->in_use--;
	(void)now;
}

static int take(void *self, const struct sandbox_spec *spec, struct sandbox **sb, char *detail,
		size_t len)
{
	struct pool *p = self;
	struct sandbox *now = NULL;
	struct kind *k;
	int err;

	*sb = NULL;
	pool_quiet_enter(&p->quiet);
	pthread_mutex_lock(&p->lock);
	k = kind_of(p, spec, &now);
	if (k) {
		k->in_use++;
		if (k->in_use > k->peak_now)
			k->peak_now = k->in_use;
		k->last_take = clock_ms(CLOCK_MONOTONIC);
		*sb = take_warm(k, spec);
		if (!*sb && k->n_ready)
			*sb = k->ready[--k->n_ready];
		if (*sb) {
			p->stats.taken_ready++;
			lend(p, *sb, k, &now);
		}
		pthread_cond_signal(&p->wake); /* one less ready: the keeper looks */
	}
	pthread_mutex_unlock(&p->lock);
	sandbox_destroy(now);
	if (*sb)
		return 0;
	/* None ready: prepared now, for this taker, on its thread (init is a
	 * fork of it, and init's parent-death signal comes with that thread's
	 * end), with the stack copyable for that fork (pool_stack.h). */
	err = pool_stack_forkable(true);
	if (err)
		snprintf(detail, len, "cannot prepare a sandbox on this thread: %s",
			 strerror(-err));
	else
		err = sandbox_prepare(spec, sb, detail, len);
	pool_stack_forkable(false);
	pthread_mutex_lock(&p->lock);
	if (k && err)
		k->in_use--;
	else if (k) {
		p->stats.taken_fresh++;
		lend(p, *sb, k, &now);
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}

static void retire(void *self, struct sandbox *sb)
{
	struct pool *p = self;
	struct sandbox *now = NULL;
	bool recycle = interp_for(sb, NULL);

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_lent; i++) {
		if (p->lent[i].sb != sb)
			continue;
		/* A warm interpreter is reset on the retirer's thread and kept
		 * (its kind stays in use until then). */
		if (recycle && !p->lent[i].k->stale && !p->stopping &&
		    pool_room((void **)&p->recycled, p->n_recycled, &p->cap_recycled,
			      sizeof(*p->recycled))) {
			p->recycled[p->n_recycled++] = p->lent[i];
			p->lent[i] = p->lent[--p->n_lent];
			pthread_cond_signal(&p->gone);
			pthread_mutex_unlock(&p->lock);
			return;
		}
		p->lent[i].k->in_use--;
		p->lent[i] = p->lent[--p->n_lent];
		break;
	}
	pool_retire_locked(p, sb, &now);
	pthread_mutex_unlock(&p->lock);
	sandbox_destroy(now);
}

/* ---- the pool -------------------------------------------------------- */

static unsigned default_max_ready(void)
{
	unsigned n = 4 * node_cpu_count();

	return n < 4 ? 4 : n > MAX_READY_CAP ? MAX_READY_CAP : n;
}

int pool_start(const struct pool_opts *o, struct pool **out, char *detail, size_t len)
{
	struct pool *p = calloc(1, sizeof(*p));
	int err;

	*out = NULL;
	if (!p) {
		snprintf(detail, len, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->gone, NULL);
	pool_quiet_init(&p->quiet);
	p->agent = o->agent;
	p->max_ready = o->max_ready ? o->max_ready : default_max_ready();
	p->idle_ms = o->idle_ms ? o->idle_ms : IDLE_MS;
	p->src = (struct exec_sandboxes){ .take = take, .retire = retire, .self = p };
	err = -pthread_create(&p->retirer, NULL, pool_retirer, p);
	if (!err) {
		err = -pthread_create(&p->keeper, NULL, pool_keeper, p);
		if (err) {
			pthread_mutex_lock(&p->lock);
			p->stopping = true;
			pthread_cond_signal(&p->gone);
			pthread_mutex_unlock(&p->lock);
			pthread_join(p->retirer, NULL);
		}
	}
	if (err) {
		snprintf(detail, len, "cannot start the warm pool's threads: %s", strerror(-err));
		pool_quiet_destroy(&p->quiet);
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

const struct exec_sandboxes *pool_source(struct pool *p)
{
	return &p->src;
}

void pool_drain(struct pool *p)
{
	struct sandbox *now = NULL;

	pthread_mutex_lock(&p->lock);
	for (struct kind *k = p->kinds; k; k = k->next) {
		k->stale = true;
		pool_retire_ready(p, k, &now);
	}
	pthread_mutex_unlock(&p->lock);
	sandbox_destroy(now);
}

void pool_stats(struct pool *p, struct pool_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->stats;
	st->ready = st->preparing = st->in_use = 0;
	for (struct kind *k = p->kinds; k; k = k->next) {
		st->ready += (unsigned)k->n_ready;
		st->preparing += k->preparing;
		st->in_use += k->in_use;
	}
	st->retiring = (unsigned)p->n_retired + p->destroying;
	pthread_mutex_unlock(&p->lock);
}

void pool_stop(struct pool *p)
{
	if (!p)
		return;
	pool_drain(p);
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	if (p->n_lent)
		sg_error("warm pool: %zu sandboxes still lent at stop", p->n_lent);
	pthread_cond_broadcast(&p->wake);
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	pool_quiet_stop(&p->quiet);
	pthread_join(p->keeper, NULL);
	pthread_join(p->retirer, NULL);
	/* The retirer may have ended before the keeper's last preparation
	 * was retired (its kind drained while it was being made). */
	while (p->n_retired)
		sandbox_destroy(p->retired[--p->n_retired]);
	for (struct kind *k = p->kinds, *next; k; k = next) {
		next = k->next;
		free(k->ready);
		free(k->warm);
		free(k);
	}
	free(p->lent);
	free(p->retired);
	free(p->recycled);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->gone);
	pool_quiet_destroy(&p->quiet);
	free(p);
}

void pool_answered(struct pool *p)
{
	if (p)
		pool_quiet_leave(&p->quiet);
}
