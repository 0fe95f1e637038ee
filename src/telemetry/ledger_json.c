/* The ledger's checkpoint document: encoding, and a strict reading that
 * drops a bad tenant row alone (see src/telemetry/ledger.h for the format). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "event_json.h"
#include "ledger.h"
#include "ledger_internal.h"
#include "lib/array_len.h"
#include "lib/rule_names.h"

/* ---- names for the file ---- */

static const char *cause_key(int i)
{
	return i > 0 && i < SG_CAUSE__COUNT ? cause_name(i) : NULL;
}
static const char *rule_key(int i)
{
	return i >= 0 && i < SG_RULE__COUNT ? rule_name(i) : NULL;
}
static const char *type_key(int i)
{
	return i > 0 && i < SG_EV__COUNT ? event_type_name(i) : NULL;
}
static const char *action_key(int i)
{
	return i > 0 && i < LEDGER_N_ACTIONS ? event_action_name(i) : NULL;
}

static int key_index(const char *(*key)(int), int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (key(i) && !strcmp(key(i), name))
			return i;
	return -1;
}

/* ---- encoding ---- */

static json_t *tenant_counts_to_json(const struct ledger_tenant *t);

/* {"name": n, ...} with the non-zero counts of one array. */
static json_t *named_counts(const uint64_t *v, int n, const char *(*key)(int))
{
	json_t *o = json_object();

	for (int i = 0; o && i < n; i++)
		if (v[i] && key(i))
			json_object_set_new(o, key(i), json_integer((json_int_t)v[i]));
	return o;
}

static json_t *tenant_to_json(const struct ledger_tenant *t)
{
	json_t *row = tenant_counts_to_json(t), *cost;
	bool oom;

	cost = ledger_cost_to_json(t->cost, &oom);
	if (oom || (row && cost && json_object_set_new(row, "cost", cost))) {
		json_decref(row);
		return NULL;
	}
	return row;
}

static json_t *tenant_counts_to_json(const struct ledger_tenant *t)
{
	json_t *events = json_object(), *buckets = json_array();

	for (int e = 0; events && e < SG_EV__COUNT; e++) {
		json_t *by_action = named_counts(t->events[e], LEDGER_N_ACTIONS, action_key);
		if (by_action && json_object_size(by_action) && type_key(e))
			json_object_set_new(events, type_key(e), by_action);
		else
			json_decref(by_action);
	}
	for (int b = 0; buckets && b <= LEDGER_N_BOUNDS; b++)
		json_array_append_new(buckets, json_integer((json_int_t)t->duration.buckets[b]));
	return json_pack(
		"{s:I, s:{s:I, s:I}, s:{s:I, s:I, s:I}, s:I, s:I, s:o, s:o, s:o, s:o, s:o, "
		"s:{s:o, s:f}}",
		"attempts", (json_int_t)t->attempts, "batches", "ok", (json_int_t)t->batches_ok,
		"failed", (json_int_t)t->batches_failed, "confirmations", "ran",
		(json_int_t)t->confirmations, "overturned", (json_int_t)t->confirmations_overturned,
		"unadmitted", (json_int_t)t->confirmations_unadmitted, "degenerate",
		(json_int_t)t->degenerate, "invalid", (json_int_t)t->invalid, "failures",
		named_counts(t->failures, SG_CAUSE__COUNT, cause_key), "verdicts",
		named_counts(t->verdicts, SG_CAUSE__COUNT, cause_key), "violations",
		named_counts(t->violations, SG_RULE__COUNT, rule_key), "kills",
		named_counts(t->kills, SG_RULE__COUNT, rule_key), "events", events, "duration",
		"buckets", buckets, "sum_seconds", t->duration.sum_seconds);
}

/* The sessions' counts, kept only by a tenant that had sessions (a
 * checkpoint written before sessions existed has none). */
static json_t *tenant_json(const struct ledger_tenant *t)
{
	json_t *j = tenant_to_json(t), *steps, *ended;

	steps = named_counts(t->session_steps, SG_CAUSE__COUNT, cause_key);
	ended = named_counts(t->sessions_ended, SG_CAUSE__COUNT, cause_key);
	if (j && steps && ended && (json_object_size(steps) || json_object_size(ended))) {
		json_object_set(j, "session_steps", steps);
		json_object_set(j, "sessions_ended", ended);
	}
	json_decref(steps);
	json_decref(ended);
	return j;
}

struct encode {
	json_t *tenants;
	bool ok;
};

static void encode_tenant(const struct ledger_tenant *t, void *ctx)
{
	struct encode *e = ctx;

	if (e->ok)
		e->ok = !json_object_set_new(e->tenants, t->name, tenant_json(t));
}

json_t *ledger_to_json(struct ledger *l, const struct journal_pos *pos)
{
	struct encode e = { json_object(), true };
	json_t *root;

	if (!e.tenants)
		return NULL;
	ledger_foreach(l, encode_tenant, &e);
	root = json_pack("{s:i, s:{s:I, s:I}, s:I, s:o}", "version", LEDGER_VERSION, "journal",
			 "segment", (json_int_t)pos->segment, "offset", (json_int_t)pos->offset,
			 "overflowed", (json_int_t)ledger_overflowed(l), "tenants", e.tenants);
	if (!e.ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}

/* ---- reading ---- */

/* What is wrong with the row being read: one message. */
struct why {
	char msg[300];
	bool oom;
};

static int bad(struct why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct why *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static int get_count(json_t *v, uint64_t *out, struct why *w, const char *tenant, const char *field)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(w, "tenants.%s.%s: expected a count (integer >= 0)", tenant, field);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int load_named(json_t *obj, uint64_t *v, int n, const char *(*key)(int), struct why *w,
		      const char *tenant, const char *field)
{
	const char *name;
	json_t *val;
	char where[128];

	if (!json_is_object(obj))
		return bad(w, "tenants.%s.%s: expected an object", tenant, field);
	json_object_foreach(obj, name, val)
	{
		int i = key_index(key, n, name);
		snprintf(where, sizeof(where), "%s.%s", field, name);
		if (i < 0)
			return bad(w, "tenants.%s.%s: unknown name '%s'", tenant, field, name);
		if (get_count(val, &v[i], w, tenant, where))
			return -1;
	}
	return 0;
}

static int load_duration(json_t *obj, struct ledger_duration *d, struct why *w, const char *tenant)
{
	json_t *buckets = json_object_get(obj, "buckets");
	json_t *sum = json_object_get(obj, "sum_seconds");

	if (!json_is_object(obj) || json_object_size(obj) != 2 || !json_is_array(buckets) ||
	    json_array_size(buckets) != LEDGER_N_BOUNDS + 1 || !json_is_number(sum) ||
	    !(json_number_value(sum) >= 0) || !isfinite(json_number_value(sum)))
		return bad(w,
			   "tenants.%s.duration: expected {\"buckets\": [%d counts], "
			   "\"sum_seconds\": x >= 0}",
			   tenant, LEDGER_N_BOUNDS + 1);
	for (size_t b = 0; b <= LEDGER_N_BOUNDS; b++) {
		if (get_count(json_array_get(buckets, b), &d->buckets[b], w, tenant,
			      "duration.buckets"))
			return -1;
		d->count += d->buckets[b];
	}
	d->sum_seconds = json_number_value(sum);
	return 0;
}

static int load_batches(json_t *obj, struct ledger_tenant *t, struct why *w, const char *tenant)
{
	if (!json_is_object(obj) || json_object_size(obj) != 2)
		return bad(w, "tenants.%s.batches: expected {\"ok\": n, \"failed\": n}", tenant);
	if (get_count(json_object_get(obj, "ok"), &t->batches_ok, w, tenant, "batches.ok") ||
	    get_count(json_object_get(obj, "failed"), &t->batches_failed, w, tenant,
		      "batches.failed"))
		return -1;
	return 0;
}

/* Absent in files written before confirmation runs existed: 0. */
static int load_confirmations(json_t *obj, struct ledger_tenant *t, struct why *w,
			      const char *tenant)
{
	if (!json_is_object(obj) || json_object_size(obj) != 3)
		return bad(w,
			   "tenants.%s.confirmations: expected {\"ran\": n, \"overturned\": n, "
			   "\"unadmitted\": n}",
			   tenant);
	if (get_count(json_object_get(obj, "ran"), &t->confirmations, w, tenant,
		      "confirmations.ran") ||
	    get_count(json_object_get(obj, "overturned"), &t->confirmations_overturned, w, tenant,
		      "confirmations.overturned") ||
	    get_count(json_object_get(obj, "unadmitted"), &t->confirmations_unadmitted, w, tenant,
		      "confirmations.unadmitted"))
		return -1;
	if (t->confirmations_overturned > t->confirmations)
		return bad(w, "tenants.%s.confirmations: more overturned than ran", tenant);
	return 0;
}

static int load_events(json_t *v, struct ledger_tenant *t, struct why *w, const char *name)
{
	const char *type;
	json_t *by_action;
	char field[64];

	if (!json_is_object(v))
		return bad(w, "tenants.%s.events: expected an object", name);
	json_object_foreach(v, type, by_action)
	{
		int e = key_index(type_key, SG_EV__COUNT, type);
		if (e < 0)
			return bad(w, "tenants.%s.events: unknown event type '%s'", name, type);
		snprintf(field, sizeof(field), "events.%s", type);
		if (load_named(by_action, t->events[e], LEDGER_N_ACTIONS, action_key, w, name,
			       field))
			return -1;
	}
	return 0;
}

static int load_cost(json_t *v, struct ledger_tenant *t, struct why *w, const char *name)
{
	char why[200];

	return ledger_cost_from_json(v, t->cost, why, sizeof(why))
		       ? bad(w, "tenants.%s.%s", name, why)
		       : 0;
}

/* The counts must agree with each other; the class split is derived. */
static int derive_and_check(struct ledger_tenant *t, struct why *w, const char *name)
{
	uint64_t violations = 0;

	for (int c = 1; c < SG_CAUSE__COUNT; c++) {
		t->failures_by_class[cause_class(c)] += t->failures[c];
		t->failures_by_class[SG_CLASS_VERDICT] += t->verdicts[c];
	}
	for (int r = 0; r < SG_RULE__COUNT; r++)
		violations += t->violations[r];
	if (violations != t->failures[SG_CAUSE_TENANT_POLICY_VIOLATION] +
				  t->verdicts[SG_CAUSE_TENANT_POLICY_VIOLATION])
		return bad(w,
			   "tenants.%s: violations by rule add up to %llu, not the %llu "
			   "tenant_policy_violation outcomes",
			   name, (unsigned long long)violations,
			   (unsigned long long)(t->failures[SG_CAUSE_TENANT_POLICY_VIOLATION] +
						t->verdicts[SG_CAUSE_TENANT_POLICY_VIOLATION]));
	if (t->duration.count != t->batches_ok + t->batches_failed)
		return bad(w, "tenants.%s: %llu batch durations for %llu batches", name,
			   (unsigned long long)t->duration.count,
			   (unsigned long long)(t->batches_ok + t->batches_failed));
	return 0;
}

static int load_tenant(const char *name, json_t *obj, struct ledger_tenant *t, int version,
		       struct why *w)
{
	static const char *const fields[] = { "attempts", "batches",  "degenerate", "invalid",
					      "failures", "verdicts", "violations", "kills",
					      "events",   "duration" };
	const char *key;
	json_t *v;
	int err = 0;

	if (!json_is_object(obj))
		return bad(w, "tenants.%s: expected an object", name);
	for (size_t i = 0; i < ARRAY_LEN(fields); i++)
		if (!json_object_get(obj, fields[i]) &&
		    (version > 1 || strcmp(fields[i], "verdicts")))
			return bad(w, "tenants.%s.%s: missing", name, fields[i]);
	json_object_foreach(obj, key, v)
	{
		if (!strcmp(key, "attempts"))
			err = get_count(v, &t->attempts, w, name, key);
		else if (!strcmp(key, "degenerate"))
			err = get_count(v, &t->degenerate, w, name, key);
		else if (!strcmp(key, "invalid"))
			err = get_count(v, &t->invalid, w, name, key);
		else if (!strcmp(key, "batches"))
			err = load_batches(v, t, w, name);
		else if (!strcmp(key, "confirmations"))
			err = load_confirmations(v, t, w, name);
		else if (!strcmp(key, "failures"))
			err = load_named(v, t->failures, SG_CAUSE__COUNT, cause_key, w, name, key);
		else if (!strcmp(key, "verdicts") && version > 1)
			err = load_named(v, t->verdicts, SG_CAUSE__COUNT, cause_key, w, name, key);
		else if (!strcmp(key, "violations"))
			err = load_named(v, t->violations, SG_RULE__COUNT, rule_key, w, name, key);
		else if (!strcmp(key, "kills"))
			err = load_named(v, t->kills, SG_RULE__COUNT, rule_key, w, name, key);
		else if (!strcmp(key, "session_steps"))
			err = load_named(v, t->session_steps, SG_CAUSE__COUNT, cause_key, w, name,
					 key);
		else if (!strcmp(key, "sessions_ended"))
			err = load_named(v, t->sessions_ended, SG_CAUSE__COUNT, cause_key, w, name,
					 key);
		else if (!strcmp(key, "duration"))
			err = load_duration(v, &t->duration, w, name);
		else if (!strcmp(key, "events"))
			err = load_events(v, t, w, name);
		else if (!strcmp(key, "cost"))
			err = load_cost(v, t, w, name);
		else
			return bad(w, "tenants.%s: unknown field '%s'", name, key);
		if (err)
			return -1;
	}
	if (derive_and_check(t, w, name))
		return -1;
	snprintf(t->name, sizeof(t->name), "%s", name);
	return 0;
}

struct rows {
	struct ledger_tenant *row[LEDGER_MAX_TENANTS + 1];
	size_t n, named;
	uint64_t overflowed;
};

static void rows_free(struct rows *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->row[i]);
	r->n = 0;
}

/* Note a dropped row in the report; the first problem is kept as `why`. */
static int drop(struct ledger_load_report *rep, const char *name, const struct why *w)
{
	char **grown = realloc(rep->dropped, (rep->n_dropped + 1) * sizeof(*grown));

	if (!grown || !(grown[rep->n_dropped] = strndup(name, SG_TENANT_MAX - 1))) {
		if (grown)
			rep->dropped = grown;
		return -ENOMEM;
	}
	rep->dropped = grown;
	rep->n_dropped++;
	if (!rep->why[0])
		snprintf(rep->why, sizeof(rep->why), "%s", w->msg);
	return 0;
}

/* The top level: anything wrong here makes the whole document corrupt. */
static int load_top(json_t *root, struct ledger_checkpoint *cp, int *version, uint64_t *overflowed,
		    struct why *w)
{
	json_t *v = json_object_get(root, "version"), *o = json_object_get(root, "overflowed");
	json_t *journal = json_object_get(root, "journal");
	json_int_t seg = -1, off = -1;

	*version = json_is_integer(v) ? (int)json_integer_value(v) : 0;
	if (!json_is_object(root))
		return bad(w, "expected a JSON object at the top");
	if (*version != 1 && *version != LEDGER_VERSION)
		return bad(w, "version: expected 1 or %d", LEDGER_VERSION);
	if (json_object_size(root) != (*version == 1 ? 3u : 4u) ||
	    !json_is_object(json_object_get(root, "tenants")))
		return bad(w, "expected {\"version\", %s\"overflowed\", \"tenants\"} at the top",
			   *version == 1 ? "" : "\"journal\", ");
	if (!json_is_integer(o) || json_integer_value(o) < 0)
		return bad(w, "overflowed: expected a count (integer >= 0)");
	*overflowed = (uint64_t)json_integer_value(o);
	cp->has_position = *version > 1;
	if (*version == 1)
		return 0;
	if (json_unpack(journal, "{s:I, s:I}", "segment", &seg, "offset", &off) || seg < 0 ||
	    off < 0 || json_object_size(journal) != 2)
		return bad(w, "journal: expected {\"segment\": n, \"offset\": n}");
	cp->pos = (struct journal_pos){ (uint64_t)seg, (uint64_t)off };
	return 0;
}

int ledger_from_json(struct ledger *l, json_t *root, struct ledger_checkpoint *cp,
		     struct ledger_load_report *rep)
{
	struct rows *rows = calloc(1, sizeof(*rows));
	struct why w = { .oom = false };
	struct ledger_checkpoint got = { 0 };
	const char *name;
	json_t *v;
	int version, err = 0;

	if (!rows)
		return -ENOMEM;
	if (load_top(root, &got, &version, &rows->overflowed, &w)) {
		snprintf(rep->why, sizeof(rep->why), "%s", w.msg);
		free(rows);
		return -EBADMSG;
	}
	json_object_foreach(json_object_get(root, "tenants"), name, v)
	{
		bool is_overflow = !strcmp(name, LEDGER_OVERFLOW);
		struct ledger_tenant *t = NULL;

		w.msg[0] = '\0';
		if (!is_overflow && !tenant_name_valid(name))
			bad(&w, "tenants: invalid tenant name '%.64s'", name);
		else if (!is_overflow && rows->named == LEDGER_MAX_TENANTS)
			bad(&w, "tenants: more than %d", LEDGER_MAX_TENANTS);
		else if (!(t = calloc(1, sizeof(*t))))
			err = -ENOMEM;
		else if (load_tenant(name, v, t, version, &w) == 0) {
			rows->row[rows->n++] = t;
			rows->named += !is_overflow;
			continue;
		}
		free(t);
		if (err || (err = drop(rep, name, &w)))
			break;
	}
	if (err) {
		rows_free(rows);
		free(rows);
		return err;
	}
	ledger_adopt(l, rows->row, rows->n, rows->overflowed);
	*cp = got;
	free(rows);
	return 0;
}

void ledger_load_report_free(struct ledger_load_report *r)
{
	for (size_t i = 0; i < r->n_dropped; i++)
		free(r->dropped[i]);
	free(r->dropped);
	r->dropped = NULL;
	r->n_dropped = 0;
}
