/* The warm pool (see src/warm/warm_pool.h). One lock guards the kinds,
 * the lent and the retired lists; no sandbox is prepared or destroyed
 * under it. Two threads: the keeper (prepares, lets idle kinds go, reaps
 * orphans) and the retirer (tears down). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "exec/node_cpu.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/priority.h"
#include "warm_agent.h"
#include "warm_pool.h"
#include "warm_quiet.h"
#include "warm_stack.h"

#define WINDOW_MS     10000 /* demand: the peak of this window and the last */
#define TICK_MS       500
#define REAP_EVERY_MS 1000
#define READY_WAIT_MS 10000 /* a preparation that takes longer failed */
#define BACKOFF_MS    1000  /* after a failed preparation, for that kind */
#define IDLE_MS       60000
#define MAX_READY_CAP 64
#define QUIET_MAX_MS  250 /* the longest the pool's work waits for quiet (warm_quiet.h) */
#define QUIET_BACKLOG 8   /* more retired than this: no waiting */

/* Sandboxes of one (tenant, policy, exec in scratch). */
struct kind {
	struct sg_policy policy;
	char tenant[SG_TENANT_MAX];
	bool exec_in_scratch;
	struct sandbox **ready;
	size_t n_ready, cap_ready;
	/* Reset after a call, their warm interpreters kept for the next call
	 * of the same script (docs/sandbox.md, "Warm interpreters"). */
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

struct warm_pool {
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
	struct warm_pool_stats stats;
	struct warm_agent *agent;
	unsigned max_ready;
	uint64_t idle_ms, last_reap;
	bool stopping;
	struct warm_quiet quiet;
	pthread_t keeper, retirer;
	struct exec_sandboxes src;
};

/* Grow an array of `size`-byte items to hold one more. */
static bool room(void **items, size_t n, size_t *cap, size_t size)
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
static void retire_locked(struct warm_pool *p, struct sandbox *sb, struct sandbox **now)
{
	if (room((void **)&p->retired, p->n_retired, &p->cap_retired, sizeof(*p->retired))) {
		p->retired[p->n_retired++] = sb;
		pthread_cond_signal(&p->gone);
	} else {
		*now = sb;
	}
}

static void retire_ready(struct warm_pool *p, struct kind *k, struct sandbox **now)
{
	while (k->n_ready)
		retire_locked(p, k->ready[--k->n_ready], now);
	while (k->n_warm)
		retire_locked(p, k->warm[--k->n_warm], now);
}

/* A kept warm sandbox whose interpreter runs spec's script. Under the lock.
 * k->warm stays in the order they were kept, the oldest first. */
static struct sandbox *take_warm(struct kind *k, const struct sandbox_spec *spec)
{
	for (size_t i = k->n_warm; i-- > 0;) {
		struct sandbox *sb = k->warm[i];

		if (sandbox_warm_for(sb, spec)) {
			memmove(&k->warm[i], &k->warm[i + 1],
				(k->n_warm - i - 1) * sizeof(*k->warm));
			k->n_warm--;
			return sb;
		}
	}
	return NULL;
}

/* Room for one more kept warm sandbox of k: each holds a uid slot and an
 * interpreter, and each runs one script, so a tenant calling many
 * scripts one after the other would keep one per script and take the
 * node's slots from other tenants. At most the policy's concurrency are
 * kept; the one kept longest ago goes. Under the lock. */
static void bound_warm(struct warm_pool *p, struct kind *k, struct sandbox **now)
{
	while (k->n_warm && k->n_warm >= k->policy.limits.concurrency) {
		retire_locked(p, k->warm[0], now);
		memmove(&k->warm[0], &k->warm[1], (k->n_warm - 1) * sizeof(*k->warm));
		k->n_warm--;
	}
}

static bool same_kind(const struct kind *k, const struct sandbox_spec *spec)
{
	return !strcmp(k->tenant, spec->tenant) &&
	       k->exec_in_scratch == spec->allow_exec_in_scratch &&
	       sandbox_policy_same(&k->policy, spec->policy);
}

/* The kind of spec, made if new; a tenant's other policies go stale (a
 * reload). Under the lock; NULL when out of memory. */
static struct kind *kind_of(struct warm_pool *p, const struct sandbox_spec *spec,
			    struct sandbox **now)
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
		retire_ready(p, old, now);
	}
	k->next = p->kinds;
	p->kinds = k;
	return k;
}

static void lend(struct warm_pool *p, struct sandbox *sb, struct kind *k, struct sandbox **now)
{
	if (room((void **)&p->lent, p->n_lent, &p->cap_lent, sizeof(*p->lent))) {
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
	struct warm_pool *p = self;
	struct sandbox *now = NULL;
	struct kind *k;
	int err;

	*sb = NULL;
	warm_quiet_enter(&p->quiet);
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
	 * end), with the stack copyable for that fork (warm_stack.h). */
	err = warm_stack_forkable(true);
	if (err)
		snprintf(detail, len, "cannot prepare a sandbox on this thread: %s",
			 strerror(-err));
	else
		err = sandbox_prepare(spec, sb, detail, len);
	warm_stack_forkable(false);
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
	struct warm_pool *p = self;
	struct sandbox *now = NULL;
	bool recycle = sandbox_warm_for(sb, NULL);

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_lent; i++) {
		if (p->lent[i].sb != sb)
			continue;
		/* A warm interpreter is reset on the retirer's thread and kept
		 * (its kind stays in use until then). */
		if (recycle && !p->lent[i].k->stale && !p->stopping &&
		    room((void **)&p->recycled, p->n_recycled, &p->cap_recycled,
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
	retire_locked(p, sb, &now);
	pthread_mutex_unlock(&p->lock);
	sandbox_destroy(now);
}

/* ---- the keeper ------------------------------------------------------ */

/* The most in use at once lately, and one spare: a take leaves one ready,
 * so that its refill can wait for a quiet moment (keeper()). */
static unsigned wanted(const struct kind *k)
{
	unsigned peak = k->peak_now > k->peak_before ? k->peak_now : k->peak_before;
	unsigned cap = k->policy.limits.concurrency;

	if (k->stale || !peak)
		return 0;
	return peak + 1 < cap ? peak + 1 : cap;
}

/* Not urgent, and a caller on its path: wait for a quiet moment first
 * (src/warm/warm_quiet.h). Called and returns with the lock held. */
static void wait_quiet(struct warm_pool *p)
{
	pthread_mutex_unlock(&p->lock);
	warm_quiet_wait(&p->quiet, QUIET_MAX_MS);
	pthread_mutex_lock(&p->lock);
}

/* Windows roll, idle kinds go stale, stale ones are let go. Under the lock. */
static void age(struct warm_pool *p, uint64_t now, struct sandbox **later)
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
			if (sandbox_warm_expired(k->warm[i])) {
				sg_debug("warm pool: tenant %s: a warm interpreter is past "
					 "max_age_s (%u): retired",
					 k->tenant, k->policy.warm.max_age_s);
				retire_locked(p, k->warm[i], later);
				k->warm[i] = k->warm[--k->n_warm];
			}
		}
		if (!k->in_use && now - k->last_take >= p->idle_ms && !k->stale) {
			k->stale = true;
			retire_ready(p, k, later);
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
static bool make_room(struct warm_pool *p, const struct kind *for_k, struct sandbox **later)
{
	struct kind *victim = NULL;

	for (struct kind *k = p->kinds; k; k = k->next)
		if (k != for_k && k->n_ready && k->last_take < for_k->last_take &&
		    (!victim || k->last_take < victim->last_take))
			victim = k;
	if (!victim)
		return false;
	retire_locked(p, victim->ready[--victim->n_ready], later);
	return true;
}

/* The kind used last of those short of ready sandboxes, with room made for
 * it within the pool's bound. Under the lock; NULL: none. */
static struct kind *short_kind(struct warm_pool *p, uint64_t now, struct sandbox **later)
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
static void prepare_one(struct warm_pool *p, struct kind *k)
{
	struct sandbox_spec spec = { .policy = &k->policy,
				     .tenant = k->tenant,
				     .allow_exec_in_scratch = k->exec_in_scratch,
				     .agent = warm_agent_get(p->agent) };
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
		   !room((void **)&k->ready, k->n_ready, &k->cap_ready, sizeof(*k->ready))) {
		retire_locked(p, sb, &now);
	} else {
		k->ready[k->n_ready++] = sb;
	}
	if (now) {
		pthread_mutex_unlock(&p->lock);
		sandbox_destroy(now);
		pthread_mutex_lock(&p->lock);
	}
}

static void reap_orphans(struct warm_pool *p, uint64_t now)
{
	int n;

	if (now - p->last_reap < REAP_EVERY_MS)
		return;
	p->last_reap = now;
	pthread_mutex_unlock(&p->lock);
	n = exec_reap_orphans(warm_agent_get(p->agent));
	if (n < 0)
		sg_warn("warm pool: cannot look for orphaned sandboxes: %s", strerror(-n));
	pthread_mutex_lock(&p->lock);
}

static void *keeper(void *arg)
{
	struct warm_pool *p = arg;
	bool waited = false;

	/* Preparing is the pool's own work: below the sandboxes that run;
	 * but only where its inits can return to the runs' priority (an init
	 * it clones inherits its thread's). */
	if (!sg_can_raise_priority())
		sg_debug("warm pool: no CAP_SYS_NICE: the keeper prepares at the runs' priority");
	else if (setpriority(PRIO_PROCESS, (id_t)gettid(), WARM_POOL_NICE))
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

/* A warm sandbox after its call: reset, and kept for its kind's next call
 * unless the reset refused it (its interpreter is recycled) or the kind
 * went stale meanwhile. Called and returns with the lock held. */
static void recycle_one(struct warm_pool *p, struct lent l)
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
	    !room((void **)&l.k->warm, l.k->n_warm, &l.k->cap_warm, sizeof(*l.k->warm))) {
		retire_locked(p, l.sb, &now);
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

static void *retirer(void *arg)
{
	struct warm_pool *p = arg;
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

/* ---- the pool -------------------------------------------------------- */

static unsigned default_max_ready(void)
{
	unsigned n = 4 * node_cpu_count();

	return n < 4 ? 4 : n > MAX_READY_CAP ? MAX_READY_CAP : n;
}

int warm_pool_start(const struct warm_pool_opts *o, struct warm_pool **out, char *detail,
		    size_t len)
{
	struct warm_pool *p = calloc(1, sizeof(*p));
	int err;

	*out = NULL;
	if (!p) {
		snprintf(detail, len, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->gone, NULL);
	warm_quiet_init(&p->quiet);
	p->agent = o->agent;
	p->max_ready = o->max_ready ? o->max_ready : default_max_ready();
	p->idle_ms = o->idle_ms ? o->idle_ms : IDLE_MS;
	p->src = (struct exec_sandboxes){ .take = take, .retire = retire, .self = p };
	err = -pthread_create(&p->retirer, NULL, retirer, p);
	if (!err) {
		err = -pthread_create(&p->keeper, NULL, keeper, p);
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
		warm_quiet_destroy(&p->quiet);
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

const struct exec_sandboxes *warm_pool_source(struct warm_pool *p)
{
	return &p->src;
}

void warm_pool_drain(struct warm_pool *p)
{
	struct sandbox *now = NULL;

	pthread_mutex_lock(&p->lock);
	for (struct kind *k = p->kinds; k; k = k->next) {
		k->stale = true;
		retire_ready(p, k, &now);
	}
	pthread_mutex_unlock(&p->lock);
	sandbox_destroy(now);
}

void warm_pool_stats(struct warm_pool *p, struct warm_pool_stats *st)
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

void warm_pool_stop(struct warm_pool *p)
{
	if (!p)
		return;
	warm_pool_drain(p);
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	if (p->n_lent)
		sg_error("warm pool: %zu sandboxes still lent at stop", p->n_lent);
	pthread_cond_broadcast(&p->wake);
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	warm_quiet_stop(&p->quiet);
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
	warm_quiet_destroy(&p->quiet);
	free(p);
}

void warm_pool_answered(struct warm_pool *p)
{
	if (p)
		warm_quiet_leave(&p->quiet);
}
