/* The life of a batch from the journal and the event stream (see
 * timeline.h). Records are grouped into executions of a batch: the
 * records of one executor process for one (tenant, run, batch), up to and
 * including the final one (a batch is booked final exactly once), so a
 * trainer that sends the same batch id twice gets two timelines. Events
 * join them by the sandbox of each attempt and its time, never by the
 * batch id alone, which both share (place_of()). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "event_json.h"
#include "timeline.h"
#include "timeline_evidence.h"
#include "timeline_read.h"

#define EVENT_MARGIN_MS (60 * 1000) /* events this far around a batch's records */

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static int64_t ts_of(json_t *o, const char *key)
{
	int64_t ms = 0;

	return str(o, key) && !event_parse_ts(str(o, key), &ms) ? ms : 0;
}

/* Two records belong to the same execution: one executor, one batch. */
static bool same_execution(json_t *a, json_t *b)
{
	static const char *const keys[] = { "tenant", "run_id", "batch_id" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *x = str(a, keys[i]), *y = str(b, keys[i]);
		if ((x == NULL) != (y == NULL) || (x && strcmp(x, y)))
			return false;
	}
	return json_integer_value(json_object_get(a, "pid")) ==
	       json_integer_value(json_object_get(b, "pid"));
}

/* Records (journal order) into executions: [[record, ...], ...]. */
static json_t *executions(json_t *records)
{
	json_t *groups = json_array(), *open = json_array(), *rec;
	size_t i, j;

	json_array_foreach(records, i, rec)
	{
		json_t *g = NULL, *o;
		json_array_foreach(open, j, o)
		{
			if (same_execution(json_array_get(o, 0), rec)) {
				g = o;
				break;
			}
		}
		if (!g) {
			g = json_array();
			json_array_append_new(groups, g);
			json_array_append(open, g);
			j = json_array_size(open) - 1;
		}
		json_array_append(g, rec);
		if (json_is_true(json_object_get(rec, "final")))
			json_array_remove(open, j);
	}
	json_decref(open);
	return groups;
}

static json_t *attempt_of(json_t *rec)
{
	json_t *a = json_object();
	static const char *const keys[] = { "attempt",       "test",     "sandbox",  "cgroup_id",
					    "uid",           "init_pid", "limits",   "started",
					    "wall_ms",       "cause",    "class",    "rule",
					    "detail",        "reason",   "decision", "cpu_us",
					    "mem_peak_bytes" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(rec, keys[i]);
		json_object_set(a, keys[i], v ? v : json_null());
	}
	json_object_set(a, "ended", json_object_get(rec, "ts"));
	json_object_set(a, "final", json_object_get(rec, "final"));
	json_object_set(a, "policy_file", json_object_get(rec, "policy") ?: json_null());
	json_object_set_new(a, "events", json_array());
	return a;
}

/* A batch document without events yet. */
static json_t *batch_of(json_t *group)
{
	json_t *b = json_object(), *attempts = json_array(), *rec, *end = NULL;
	size_t i;

	json_array_foreach(group, i, rec)
	{
		/* A record with no sandbox after admission is the request's
		 * own (a verifier request's summary). */
		if (!str(rec, "sandbox") && json_integer_value(json_object_get(rec, "attempt")) > 0)
			json_object_set(b, "summary", rec);
		else
			json_array_append_new(attempts, attempt_of(rec));
		if (json_is_true(json_object_get(rec, "final")))
			end = rec;
	}
	rec = end ? end : json_array_get(group, json_array_size(group) - 1);
	json_object_set(b, "batch_id", json_object_get(rec, "batch_id"));
	json_object_set(b, "tenant", json_object_get(rec, "tenant"));
	json_object_set(b, "run_id", json_object_get(rec, "run_id"));
	json_object_set(b, "mode", json_object_get(rec, "mode"));
	json_object_set(b, "executor_pid", json_object_get(rec, "pid"));
	json_object_set_new(b, "booked", json_boolean(end != NULL));
	json_object_set(b, "cause", end ? json_object_get(end, "cause") : json_null());
	json_object_set(b, "class", end ? json_object_get(end, "class") : json_null());
	json_object_set(b, "rule", end ? json_object_get(end, "rule") : json_null());
	json_object_set(b, "detail", end ? json_object_get(end, "detail") : json_null());
	json_object_set(b, "score_mean", end ? json_object_get(end, "score_mean") : json_null());
	json_object_set(b, "constant", end ? json_object_get(end, "constant") : json_null());
	json_object_set(b, "canary",
			end && json_object_get(end, "canary") ? json_object_get(end, "canary")
							      : json_null());
	json_object_set_new(b, "attempts", attempts);
	json_object_set_new(b, "other_events", json_array());
	if (!json_object_get(b, "summary"))
		json_object_set_new(b, "summary", json_null());
	return b;
}

/* ---- a batch no record names yet: from the events tagged with it ---- */

static bool same_string(json_t *a, json_t *b)
{
	return json_is_string(a) ? json_equal(a, b) : !json_is_string(b);
}

static json_t *unbooked_batch(json_t *e)
{
	static const char *const none[] = { "mode",    "executor_pid", "cause",      "class",
					    "rule",    "detail",       "score_mean", "constant",
					    "summary", "canary" };
	json_t *b = json_object();

	json_object_set(b, "batch_id", json_object_get(e, "batch_id"));
	json_object_set(b, "tenant", json_object_get(e, "tenant"));
	json_object_set(b, "run_id", json_object_get(e, "run_id") ?: json_null());
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		json_object_set_new(b, none[i], json_null());
	json_object_set_new(b, "booked", json_false());
	json_object_set_new(b, "attempts", json_array());
	json_object_set_new(b, "other_events", json_array());
	return b;
}

/* An attempt known from its sandbox's events alone (attempt_of(NULL): every
 * key of a record null). */
static json_t *unbooked_attempt(json_t *e)
{
	json_t *a = attempt_of(NULL);

	json_object_set(a, "sandbox", json_object_get(e, "sandbox"));
	json_object_set(a, "started", json_object_get(e, "ts"));
	json_object_set_new(a, "ended", json_null());
	json_object_set_new(a, "final", json_false());
	return a;
}

static json_t *find_unbooked(json_t *batches, json_t *e)
{
	json_t *b;
	size_t i;

	json_array_foreach(batches, i, b)
	{
		if (same_string(json_object_get(b, "tenant"), json_object_get(e, "tenant")) &&
		    same_string(json_object_get(b, "run_id"), json_object_get(e, "run_id")))
			return b;
	}
	b = unbooked_batch(e);
	json_array_append_new(batches, b);
	return b;
}

/* Events (oldest first) into batches, one per tenant and run, and their
 * attempts, one per sandbox in the order they appeared: the life of a
 * batch whose executor is still running, or died before it booked. */
static void unbooked_batches(json_t *events, json_t *batches)
{
	json_t *e, *a;
	size_t i, j;

	json_array_foreach(events, i, e)
	{
		json_t *attempts, *attempt = NULL;
		if (!str(e, "sandbox"))
			continue;
		attempts = json_object_get(find_unbooked(batches, e), "attempts");
		json_array_foreach(attempts, j, a)
		{
			if (!strcmp(str(a, "sandbox"), str(e, "sandbox")))
				attempt = a;
		}
		if (!attempt) {
			attempt = unbooked_attempt(e);
			json_array_append_new(attempts, attempt);
		}
		/* The uid the kernel saw it run as. */
		if (!json_is_integer(json_object_get(attempt, "uid")) &&
		    json_is_integer(json_object_get(e, "uid")))
			json_object_set(attempt, "uid", json_object_get(e, "uid"));
	}
}

/* The value of `key` all batches share; NULL when it is null, or when
 * they do not share one (then *differ, unless differ is NULL). */
static const char *shared(json_t *batches, const char *key, bool *differ)
{
	json_t *first = json_object_get(json_array_get(batches, 0), key), *b;
	bool d = false;
	size_t i;

	json_array_foreach(batches, i, b) d |= !same_string(first, json_object_get(b, key));
	if (differ)
		*differ = d;
	return d ? NULL : json_string_value(first);
}

static int cmp_cstr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The sandboxes of every batch (sorted) and the time they span. */
static const char **sandboxes_of(json_t *batches, size_t *n, int64_t *from, int64_t *to)
{
	json_t *b, *a;
	size_t i, j, cap = 0;
	const char **v = NULL;

	*n = 0;
	*from = INT64_MAX;
	*to = 0;
	json_array_foreach(batches, i, b)
	{
		json_array_foreach(json_object_get(b, "attempts"), j, a)
		{
			int64_t s = ts_of(a, "started"), e = ts_of(a, "ended");
			if (s && s < *from)
				*from = s;
			if (e > *to)
				*to = e;
			if (!str(a, "sandbox"))
				continue;
			if (*n == cap) {
				const char **g =
					realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
				if (!g) {
					free(v);
					return NULL;
				}
				v = g;
			}
			v[(*n)++] = str(a, "sandbox");
		}
	}
	if (v)
		qsort(v, *n, sizeof(*v), cmp_cstr);
	*from = *from == INT64_MAX ? 0 : *from - EVENT_MARGIN_MS;
	*to += EVENT_MARGIN_MS;
	return v;
}

static int cmp_event_ts(const void *a, const void *b)
{
	int64_t x = json_integer_value(json_object_get(*(json_t *const *)a, "ts_ms"));
	int64_t y = json_integer_value(json_object_get(*(json_t *const *)b, "ts_ms"));

	return x < y ? -1 : x > y; /* equal: qsort may swap; see sort_events */
}

/* Oldest first; events of one millisecond keep the stream's order. */
static void sort_events(json_t *events)
{
	size_t n = json_array_size(events);
	json_t **v = n ? malloc(n * sizeof(*v)) : NULL;

	if (!v)
		return;
	for (size_t i = 0; i < n; i++) {
		v[i] = json_incref(json_array_get(events, i));
		json_object_set_new(v[i], "_order", json_integer((json_int_t)i));
	}
	/* Insertion sort: stable, and a batch has few events. */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && cmp_event_ts(&v[k - 1], &v[k]) > 0; k--) {
			json_t *t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	json_array_clear(events);
	for (size_t i = 0; i < n; i++) {
		json_object_del(v[i], "_order");
		json_array_append_new(events, v[i]);
	}
	free(v);
}

/* An event of the attempt's own init is sandguard's, not the tenant's:
 * marked "sandbox_init" (the record names the init's pid). */
static void attach_to_attempt(json_t *a, json_t *e)
{
	json_t *init = json_object_get(a, "init_pid");

	if (json_is_integer(init) && json_equal(init, json_object_get(e, "pid")))
		json_object_set_new(e, "sandbox_init", json_true());
	json_array_append(json_object_get(a, "events"), e);
}

/* When the attempt was booked: its record is written once its run is over,
 * so every event of its run is older. INT64_MAX: not booked (running). */
static int64_t booked_at(json_t *a)
{
	int64_t ms = ts_of(a, "ended");

	return ms ? ms : INT64_MAX;
}

/* Whether attempt a is a better home than b (NULL: none yet) for an event
 * at ts: attempts that share a sandbox run one after another, so the event
 * is the first's that was not yet booked when it happened, or after them
 * all (the teardown) the last's. Not by their start: "started" is the
 * program's, after its exec event. */
static bool better(json_t *a, json_t *b, int64_t ts)
{
	int64_t x = booked_at(a), y;

	if (!b)
		return true;
	y = booked_at(b);
	if ((x >= ts) != (y >= ts))
		return x >= ts;
	return x >= ts ? x < y : x > y;
}

/* Where an event goes: the attempt that ran in its sandbox (by_sandbox), or
 * else a batch of the batch and run it carries. Batch ids repeat (a
 * trainer's, across runs and restarts) and one sandbox serves several
 * attempts (a verifier's tests, a warm interpreter's calls), so of the
 * candidates better() picks by time. An event that names another batch is
 * not a candidate's: a warm sandbox serves calls of several batches.
 * *batch is NULL when nothing fits. */
static json_t *place_of(json_t *batches, json_t *e, bool by_sandbox, json_t **batch)
{
	json_t *b, *a, *best = NULL, *id = json_object_get(e, "batch_id");
	int64_t ts = json_integer_value(json_object_get(e, "ts_ms"));
	const char *sandbox = str(e, "sandbox");
	size_t i, k;

	*batch = NULL;
	json_array_foreach(batches, i, b)
	{
		if (json_is_string(id) ? !json_equal(id, json_object_get(b, "batch_id"))
				       : !by_sandbox)
			continue;
		if (!by_sandbox &&
		    !same_string(json_object_get(b, "run_id"), json_object_get(e, "run_id")))
			continue;
		json_array_foreach(json_object_get(b, "attempts"), k, a)
		{
			const char *sb = str(a, "sandbox");
			if (by_sandbox && (!sb || !sandbox || strcmp(sb, sandbox)))
				continue;
			if (better(a, best, ts)) {
				best = a;
				*batch = b;
			}
		}
		if (!by_sandbox && !*batch) /* a batch without attempts: the last resort */
			*batch = b;
	}
	return best;
}

/* Each event into its attempt, or its batch's others. */
static void attach_events(json_t *batches, json_t *events)
{
	json_t *e, *b, *a;
	size_t i, j, k;

	json_array_foreach(events, i, e)
	{
		a = place_of(batches, e, true, &b);
		if (!a)
			place_of(batches, e, false, &b);
		if (a)
			attach_to_attempt(a, e);
		else if (b)
			json_array_append(json_object_get(b, "other_events"), e);
	}
	json_array_foreach(batches, j, b)
	{
		json_array_foreach(json_object_get(b, "attempts"), k, a)
			sort_events(json_object_get(a, "events"));
		sort_events(json_object_get(b, "other_events"));
	}
}

/* The policy lines behind each event and cause, and the policy file's
 * state: a file changed since the batch began may not be what decided. */
static void add_evidence(json_t *batch, struct policy_cache *cache)
{
	json_t *a, *e, *pol = json_object(), *summary = json_object_get(batch, "summary");
	const char *tenant = str(batch, "tenant");
	const struct policy_text *pt = NULL;
	const char *why = NULL;
	size_t i, k;
	struct stat st;

	json_array_foreach(json_object_get(batch, "attempts"), i, a)
	{
		pt = policy_cache_get(cache, str(a, "policy_file"), tenant, &why);
		json_array_foreach(json_object_get(a, "events"), k, e)
		{
			json_t *f = evidence_for_event(pt, e);
			if (f)
				json_object_set_new(e, "policy", f);
		}
		json_object_set_new(a, "policy", evidence_for_attempt(pt, a) ?: json_null());
	}
	if (!pt && !why) /* only a summary */
		pt = policy_cache_get(cache, str(summary, "policy"), tenant, &why);
	a = json_array_get(json_object_get(batch, "attempts"), 0);
	json_object_set_new(pol, "file", pt ? json_string(pt->file) : json_null());
	json_object_set_new(
		pol, "changed_after",
		json_boolean(pt && pt->file[0] == '/' && !stat(pt->file, &st) &&
			     (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000 >
				     ts_of(a, "started")));
	json_object_set_new(pol, "error", why ? json_string(why) : json_null());
	json_object_set_new(batch, "policy", pol);
}

/* The records the query names, grouped, narrowed. */
static int find_groups(const struct timeline_query *q, const struct timeline_sources *s,
		       json_t **groups, struct scan_stats *st, char *err, size_t err_len)
{
	struct record_match m = { .tenant = q->tenant };
	json_t *records = json_array(), *g, *kept = json_array();
	const char *batch = q->batch_id;
	size_t i;
	int ret = 0;

	if (q->sandbox) { /* first the sandbox's own record, for its batch */
		m.key = "sandbox";
		m.value = q->sandbox;
		ret = timeline_read_records(s->journal_dir, &m, records, st, err, err_len);
		batch = ret ? NULL : str(json_array_get(records, 0), "batch_id");
		if (!ret && !batch)
			ret = -ESRCH;
		m.tenant = ret ? NULL : str(json_array_get(records, 0), "tenant");
	}
	if (!ret && batch) {
		json_t *found = json_array();
		*st = (struct scan_stats){ 0 }; /* the sources are the batch's scan */
		m.key = "batch_id";
		m.value = batch;
		ret = timeline_read_records(s->journal_dir, &m, found, st, err, err_len);
		json_decref(records);
		records = found;
	} else if (!ret && q->run_id) {
		m.key = "run_id";
		m.value = q->run_id;
		ret = timeline_read_records(s->journal_dir, &m, records, st, err, err_len);
	}
	*groups = executions(records);
	json_array_foreach(*groups, i, g)
	{
		json_t *rec, *first = json_array_get(g, 0);
		size_t j;
		bool keep = !q->run_id ||
			    (str(first, "run_id") && !strcmp(str(first, "run_id"), q->run_id));
		if (q->sandbox) {
			keep = false;
			json_array_foreach(g, j, rec) keep |=
				str(rec, "sandbox") && !strcmp(str(rec, "sandbox"), q->sandbox);
		}
		if (keep)
			json_array_append(kept, g);
	}
	json_decref(*groups);
	*groups = kept;
	json_decref(records);
	if ((!ret || ret == -ESRCH) && !json_array_size(kept)) {
		ret = -ESRCH;
		snprintf(err, err_len,
			 "no outcome of %s %s%s%s in the outcome journal %s (%llu records in %llu "
			 "segment%s searched): it is older than the segments kept, or it ran on "
			 "another node",
			 q->sandbox    ? "sandbox"
			 : q->batch_id ? "batch"
				       : "run",
			 q->sandbox    ? q->sandbox
			 : q->batch_id ? q->batch_id
				       : q->run_id,
			 q->tenant ? " of tenant " : "", q->tenant ? q->tenant : "", s->journal_dir,
			 (unsigned long long)st->lines, (unsigned long long)st->segments,
			 st->segments == 1 ? "" : "s");
	}
	return ret;
}

static json_t *query_json(const struct timeline_query *q)
{
	json_t *o = json_object();

	if (q->batch_id)
		json_object_set_new(o, "batch_id", json_string(q->batch_id));
	if (q->sandbox)
		json_object_set_new(o, "sandbox", json_string(q->sandbox));
	if (q->run_id)
		json_object_set_new(o, "run_id", json_string(q->run_id));
	if (q->tenant)
		json_object_set_new(o, "tenant", json_string(q->tenant));
	return o;
}

int timeline_build(const struct timeline_query *q, const struct timeline_sources *s, json_t **doc,
		   char *err, size_t err_len)
{
	struct scan_stats js = { 0 }, es = { 0 };
	struct policy_cache cache = { .policy_dir = s->policy_dir };
	json_t *groups = NULL, *batches = json_array(), *events = json_array(),
	       *files = json_array();
	json_t *g, *b, *sources;
	struct event_match em = { 0 };
	char eerr[512] = "";
	size_t i;
	int ret;

	*doc = NULL;
	ret = find_groups(q, s, &groups, &js, err, err_len);
	if (ret == -ESRCH && q->batch_id && !q->sandbox) {
		/* No record yet: what the agent tagged with the batch id. */
		em = (struct event_match){ .batch_id = q->batch_id,
					   .run_id = q->run_id,
					   .any_run = !q->run_id,
					   .tenant = q->tenant,
					   .to_ms = INT64_MAX };
		if (!timeline_read_events(s->events_file, &em, events, files, &es, eerr,
					  sizeof(eerr)) &&
		    json_array_size(events)) {
			sort_events(events);
			unbooked_batches(events, batches);
			ret = 0;
		}
		eerr[0] = '\0';
	} else if (!ret) {
		json_array_foreach(groups, i, g) json_array_append_new(batches, batch_of(g));
		em.sandboxes = sandboxes_of(batches, &em.n_sandboxes, &em.from_ms, &em.to_ms);
		/* The events tagged with the batch (in no attempt's sandbox)
		 * when every batch has one id: of each batch's run. */
		em.batch_id = shared(batches, "batch_id", NULL);
		em.run_id = em.batch_id ? shared(batches, "run_id", &em.any_run) : NULL;
		em.tenant = shared(batches, "tenant", NULL);
		/* An unreadable event stream leaves the journal's side: eerr says why. */
		timeline_read_events(s->events_file, &em, events, files, &es, eerr, sizeof(eerr));
	}
	if (ret)
		goto out;
	attach_events(batches, events);
	json_array_foreach(batches, i, b)
	{
		char *verdict;
		add_evidence(b, &cache);
		verdict = verdict_of(b);
		json_object_set_new(b, "verdict", verdict ? json_string(verdict) : json_null());
		free(verdict);
	}
	sources = json_pack("{s:s, s:I, s:I, s:s, s:o, s:I, s:o}", "journal", s->journal_dir,
			    "journal_segments", (json_int_t)js.segments, "records_searched",
			    (json_int_t)js.lines, "events_file", s->events_file, "events_files",
			    json_incref(files), "events", (json_int_t)json_array_size(events),
			    "events_error", eerr[0] ? json_string(eerr) : json_null());
	*doc = json_pack("{s:o, s:o, s:O}", "query", query_json(q), "sources", sources, "batches",
			 batches);
	ret = *doc ? 0 : -ENOMEM;
out:
	free((void *)em.sandboxes);
	policy_cache_free(&cache);
	json_decref(groups);
	json_decref(batches);
	json_decref(events);
	json_decref(files);
	return ret;
}
