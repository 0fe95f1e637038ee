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

/* Open addressing over the rows (never removed one by one, only all at
 * once), twice as many slots as rows: a booking finds its row in about one
 * probe with thousands of tenants. */
#define INDEX_SLOTS (2 * LEDGER_MAX_TENANTS)

struct ledger {
	pthread_mutex_t lock;
	struct ledger_tenant **tenants; /* LEDGER_MAX_TENANTS, in the order first booked */
	uint32_t *index;                /* INDEX_SLOTS: row position + 1, 0 = free */
	size_t n_tenants;
	size_t n_invented;              /* rows of tenants without a policy file */
	struct ledger_tenant *overflow; /* LEDGER_OVERFLOW, made on first use */
	uint64_t overflowed;
	ledger_policy_fn has_policy; /* NULL: every name counts as invented */
	void *policy_ctx;
};

struct ledger *ledger_new(void)
{
	struct ledger *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->tenants = calloc(LEDGER_MAX_TENANTS, sizeof(*l->tenants));
	l->index = calloc(INDEX_SLOTS, sizeof(*l->index));
	if (!l->tenants || !l->index) {
		free(l->tenants);
		free(l->index);
		free(l);
		return NULL;
	}
	pthread_mutex_init(&l->lock, NULL);
	return l;
}

void ledger_set_policy_check(struct ledger *l, ledger_policy_fn fn, void *ctx)
{
	pthread_mutex_lock(&l->lock);
	l->has_policy = fn;
	l->policy_ctx = ctx;
	pthread_mutex_unlock(&l->lock);
}

static void ledger_clear(struct ledger *l)
{
	for (size_t i = 0; i < l->n_tenants; i++)
		free(l->tenants[i]);
	free(l->overflow);
	memset(l->index, 0, INDEX_SLOTS * sizeof(*l->index));
	l->n_tenants = 0;
	l->n_invented = 0;
	l->overflow = NULL;
	l->overflowed = 0;
}

void ledger_free(struct ledger *l)
{
	if (!l)
		return;
	ledger_clear(l);
	pthread_mutex_destroy(&l->lock);
	free(l->tenants);
	free(l->index);
	free(l);
}

/* FNV-1a of a name: where its probe starts. */
static size_t name_slot(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h % INDEX_SLOTS;
}

/* The index slot holding `name`, or the free one where it would go. */
static uint32_t *index_probe(struct ledger *l, const char *name)
{
	size_t i = name_slot(name);

	while (l->index[i] && strcmp(l->tenants[l->index[i] - 1]->name, name))
		i = (i + 1) % INDEX_SLOTS;
	return &l->index[i];
}

/* Add a row (room checked by the caller). */
static void row_add(struct ledger *l, struct ledger_tenant *t)
{
	uint32_t *slot = index_probe(l, t->name);

	l->tenants[l->n_tenants++] = t;
	*slot = (uint32_t)l->n_tenants;
	l->n_invented += t->invented;
}

/* Whether a name has no policy file: asked once, when its row is made. */
static bool invented(struct ledger *l, const char *name)
{
	return !l->has_policy || !l->has_policy(name, l->policy_ctx);
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
	uint32_t at;

	if (!strcmp(name, LEDGER_OVERFLOW))
		return l->overflow;
	at = *index_probe(l, name);
	return at ? l->tenants[at - 1] : NULL;
}

/* The tenant's row, created on first booking. A tenant with a policy file
 * always gets one (up to LEDGER_MAX_TENANTS rows in all); a name without
 * one (invented by a client, run under the default policy) only while
 * fewer than LEDGER_MAX_INVENTED such rows exist. Past either cap: the
 * overflow row. */
static struct ledger_tenant *tenant_row(struct ledger *l, const char *name)
{
	struct ledger_tenant *t = tenant_find(l, name);
	bool inv;

	if (t)
		return t;
	inv = invented(l, name);
	if (l->n_tenants < LEDGER_MAX_TENANTS && (!inv || l->n_invented < LEDGER_MAX_INVENTED)) {
		t = tenant_new(name);
		if (t) {
			t->invented = inv;
			row_add(l, t);
		}
		return t;
	}
	if (!l->overflow && !(l->overflow = tenant_new(LEDGER_OVERFLOW)))
		return NULL;
	if (l->overflowed++ == 0)
		sg_warn("ledger: more than %d tenants%s: booking '%s' and every further new such "
			"tenant under '%s'",
			inv ? LEDGER_MAX_INVENTED : LEDGER_MAX_TENANTS,
			inv ? " without a policy file" : "", name, LEDGER_OVERFLOW);
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
	    (violation && !o->artifact_refused[0] && (o->rule < 0 || o->rule >= SG_RULE__COUNT))) {
		sg_warn("ledger: refusing an outcome for '%s' with cause %d rule %d", tenant,
			(int)o->cause, o->rule);
		return -EINVAL;
	}
	class = outcome_class(o->mode, o->cause);
	pthread_mutex_lock(&l->lock);
	t = tenant_row(l, tenant);
	if (t) {
		t->attempts++;
		ledger_cost_book(t->cost, o);
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
		if (violation && o->rule >= 0 && o->rule < SG_RULE__COUNT)
			t->violations[o->rule]++; /* an artifact refused names none */
		if (o->confirm == SG_CONFIRM_RUN) {
			t->confirmations++;
			t->confirmations_overturned += o->cause != SG_CAUSE_TENANT_TIMEOUT;
		}
		t->confirmations_unadmitted += o->confirm == SG_CONFIRM_UNADMITTED;
		if (o->mode == SG_MODE_SESSION && o->final)
			t->sessions_ended[o->cause]++;
		else if (o->mode == SG_MODE_SESSION)
			t->session_steps[o->cause]++;
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

enum count { COUNT_ROWS, COUNT_INVENTED, COUNT_OVERFLOWED };

static uint64_t count_of(struct ledger *l, enum count what)
{
	uint64_t n;

	pthread_mutex_lock(&l->lock);
	n = what == COUNT_ROWS       ? l->n_tenants + (l->overflow != NULL)
	    : what == COUNT_INVENTED ? l->n_invented
				     : l->overflowed;
	pthread_mutex_unlock(&l->lock);
	return n;
}

size_t ledger_tenant_count(struct ledger *l)
{
	return count_of(l, COUNT_ROWS);
}

size_t ledger_invented_count(struct ledger *l)
{
	return count_of(l, COUNT_INVENTED);
}

uint64_t ledger_overflowed(struct ledger *l)
{
	return count_of(l, COUNT_OVERFLOWED);
}

/* ---- for ledger_file.c ---- */

void ledger_adopt(struct ledger *l, struct ledger_tenant **rows, size_t n, uint64_t overflowed)
{
	pthread_mutex_lock(&l->lock);
	ledger_clear(l);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(rows[i]->name, LEDGER_OVERFLOW)) {
			l->overflow = rows[i];
			continue;
		}
		/* Asked again: a file added or removed since the save. */
		rows[i]->invented = invented(l, rows[i]->name);
		row_add(l, rows[i]);
	}
	l->overflowed = overflowed;
	pthread_mutex_unlock(&l->lock);
}
