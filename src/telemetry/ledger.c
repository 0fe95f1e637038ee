/* The per-tenant ledger: booking and reading. See src/telemetry/ledger.h; the
 * checkpoint document is in ledger_json.c, its file in ledger_file.c. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "event_json.h"
#include "ledger.h"
#include "ledger_internal.h"
#include "lib/log.h"

const double ledger_duration_bounds[LEDGER_N_BOUNDS] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

struct ledger {
	pthread_mutex_t lock;
	struct ledger_tenant *tenants[LEDGER_MAX_TENANTS];
	size_t n_tenants;
	struct ledger_tenant *overflow; /* LEDGER_OVERFLOW, made on first use */
	uint64_t overflowed;
};

struct ledger *ledger_new(void)
{
	struct ledger *l = calloc(1, sizeof(*l));

	if (l)
		pthread_mutex_init(&l->lock, NULL);
	return l;
}

static void ledger_clear(struct ledger *l)
{
	for (size_t i = 0; i < l->n_tenants; i++)
		free(l->tenants[i]);
	free(l->overflow);
	l->n_tenants = 0;
	l->overflow = NULL;
	l->overflowed = 0;
}

void ledger_free(struct ledger *l)
{
	if (!l)
		return;
	ledger_clear(l);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* ---- booking (lock held) ---- */

static struct ledger_tenant *tenant_new(const char *name)
{
	struct ledger_tenant *t = calloc(1, sizeof(*t));

	if (t)
		snprintf(t->name, sizeof(t->name), "%s", name);
	return t;
}

static struct ledger_tenant *tenant_find(struct ledger *l, const char *name)
{
	for (size_t i = 0; i < l->n_tenants; i++)
		if (!strcmp(l->tenants[i]->name, name))
			return l->tenants[i];
	if (l->overflow && !strcmp(name, LEDGER_OVERFLOW))
		return l->overflow;
	return NULL;
}

/* The tenant's row, created on first booking; past the cap, the overflow row. */
static struct ledger_tenant *tenant_row(struct ledger *l, const char *name)
{
	struct ledger_tenant *t = tenant_find(l, name);

	if (t)
		return t;
	if (l->n_tenants < LEDGER_MAX_TENANTS) {
		t = tenant_new(name);
		if (t)
			l->tenants[l->n_tenants++] = t;
		return t;
	}
	if (!l->overflow && !(l->overflow = tenant_new(LEDGER_OVERFLOW)))
		return NULL;
	if (l->overflowed++ == 0)
		sg_warn("ledger: more than %d tenants: booking '%s' and every further new "
			"tenant under '%s'",
			LEDGER_MAX_TENANTS, name, LEDGER_OVERFLOW);
	return l->overflow;
}

static int tenant_check(const char *tenant)
{
	if (tenant && tenant_name_valid(tenant))
		return 0;
	sg_warn("ledger: refusing a booking for invalid tenant name '%.64s'",
		tenant ? tenant : "(null)");
	return -EINVAL;
}

static void duration_observe(struct ledger_duration *d, double seconds)
{
	size_t b = 0;

	while (b < LEDGER_N_BOUNDS && seconds > ledger_duration_bounds[b])
		b++;
	d->buckets[b]++;
	d->sum_seconds += seconds;
	d->count++;
}

int ledger_book_outcome(struct ledger *l, const struct sg_outcome *o)
{
	struct ledger_tenant *t;
	bool violation = o->cause == SG_CAUSE_TENANT_POLICY_VIOLATION;
	enum sg_fault_class class;
	char tenant[SG_TENANT_MAX];

	if (!memchr(o->tenant, '\0', sizeof(o->tenant)))
		return tenant_check(NULL); /* unterminated */
	snprintf(tenant, sizeof(tenant), "%s", o->tenant);
	if (tenant_check(tenant))
		return -EINVAL;
	if ((unsigned)o->cause >= SG_CAUSE__COUNT || (unsigned)o->mode >= SG_MODE__COUNT ||
	    (violation && (o->rule < 0 || o->rule >= SG_RULE__COUNT))) {
		sg_warn("ledger: refusing an outcome for '%s' with cause %d rule %d", tenant,
			(int)o->cause, o->rule);
		return -EINVAL;
	}
	class = outcome_class(o->mode, o->cause);
	pthread_mutex_lock(&l->lock);
	t = tenant_row(l, tenant);
	if (t) {
		t->attempts++;
		/* A timeout its confirmation run follows is nobody's yet: the
		 * confirmation's own record says whose it is (overturned, it
		 * was the node's, and no tenant fault may count it). */
		if (o->confirm == SG_CONFIRM_NEXT)
			;
		else if (class == SG_CLASS_VERDICT)
			t->verdicts[o->cause]++;
		else if (o->cause != SG_CAUSE_OK)
			t->failures[o->cause]++;
		if (o->cause != SG_CAUSE_OK && o->confirm != SG_CONFIRM_NEXT)
			t->failures_by_class[class]++;
		if (violation)
			t->violations[o->rule]++;
		if (o->confirm == SG_CONFIRM_RUN) {
			t->confirmations++;
			t->confirmations_overturned += o->cause != SG_CAUSE_TENANT_TIMEOUT;
		}
		t->confirmations_unadmitted += o->confirm == SG_CONFIRM_UNADMITTED;
		if (o->final) {
			if (o->cause == SG_CAUSE_OK || class == SG_CLASS_VERDICT)
				t->batches_ok++;
			else
				t->batches_failed++;
			t->degenerate += o->constant;
			t->invalid += o->invalid;
			duration_observe(&t->duration, o->wall_ms / 1000.0);
		}
	}
	pthread_mutex_unlock(&l->lock);
	return t ? 0 : -ENOMEM;
}

int ledger_book_event(struct ledger *l, const char *tenant, enum sg_event_type type,
		      enum sg_event_action action)
{
	struct ledger_tenant *t;

	if (tenant_check(tenant))
		return -EINVAL;
	if (!event_type_name(type) || !event_action_name(action) ||
	    (unsigned)type >= SG_EV__COUNT || (unsigned)action >= LEDGER_N_ACTIONS) {
		sg_warn("ledger: refusing an event for '%s' with type %d action %d", tenant,
			(int)type, (int)action);
		return -EINVAL;
	}
	pthread_mutex_lock(&l->lock);
	t = tenant_row(l, tenant);
	if (t)
		t->events[type][action]++;
	pthread_mutex_unlock(&l->lock);
	return t ? 0 : -ENOMEM;
}

int ledger_book_kill(struct ledger *l, const char *tenant, enum sg_rule rule)
{
	struct ledger_tenant *t;

	if (tenant_check(tenant))
		return -EINVAL;
	if ((unsigned)rule >= SG_RULE__COUNT) {
		sg_warn("ledger: refusing a kill for '%s' with rule %d", tenant, (int)rule);
		return -EINVAL;
	}
	pthread_mutex_lock(&l->lock);
	t = tenant_row(l, tenant);
	if (t)
		t->kills[rule]++;
	pthread_mutex_unlock(&l->lock);
	return t ? 0 : -ENOMEM;
}

/* ---- reading ---- */

void ledger_foreach(struct ledger *l, ledger_visit_fn fn, void *ctx)
{
	pthread_mutex_lock(&l->lock);
	for (size_t i = 0; i < l->n_tenants; i++)
		fn(l->tenants[i], ctx);
	if (l->overflow)
		fn(l->overflow, ctx);
	pthread_mutex_unlock(&l->lock);
}

int ledger_get(struct ledger *l, const char *tenant, struct ledger_tenant *out)
{
	struct ledger_tenant *t;

	pthread_mutex_lock(&l->lock);
	t = tenant ? tenant_find(l, tenant) : NULL;
	if (t)
		*out = *t;
	pthread_mutex_unlock(&l->lock);
	return t ? 0 : -ENOENT;
}

size_t ledger_tenant_count(struct ledger *l)
{
	size_t n;

	pthread_mutex_lock(&l->lock);
	n = l->n_tenants + (l->overflow != NULL);
	pthread_mutex_unlock(&l->lock);
	return n;
}

uint64_t ledger_overflowed(struct ledger *l)
{
	uint64_t n;

	pthread_mutex_lock(&l->lock);
	n = l->overflowed;
	pthread_mutex_unlock(&l->lock);
	return n;
}

/* ---- for ledger_file.c ---- */

void ledger_adopt(struct ledger *l, struct ledger_tenant **rows, size_t n, uint64_t overflowed)
{
	pthread_mutex_lock(&l->lock);
	ledger_clear(l);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(rows[i]->name, LEDGER_OVERFLOW))
			l->overflow = rows[i];
		else
			l->tenants[l->n_tenants++] = rows[i];
	}
	l->overflowed = overflowed;
	pthread_mutex_unlock(&l->lock);
}
