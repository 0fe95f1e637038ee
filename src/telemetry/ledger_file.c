/* The ledger's state file: atomic save, strict load. See src/telemetry/ledger.h
 * for the format and the failure behaviour. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "event_json.h"
#include "ledger.h"
#include "ledger_internal.h"
#include "lib/log.h"
#include "lib/rule_names.h"
#include "lib/array_len.h"

#define LEDGER_FILE_MAX (64u << 20) /* far above 1025 tenants' worth */

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

/* ---- saving ---- */

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
	return json_pack("{s:I, s:{s:I, s:I}, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:o, s:f}}",
			 "attempts", (json_int_t)t->attempts, "batches", "ok",
			 (json_int_t)t->batches_ok, "failed", (json_int_t)t->batches_failed,
			 "degenerate", (json_int_t)t->degenerate, "invalid", (json_int_t)t->invalid,
			 "failures", named_counts(t->failures, SG_CAUSE__COUNT, cause_key),
			 "violations", named_counts(t->violations, SG_RULE__COUNT, rule_key),
			 "kills", named_counts(t->kills, SG_RULE__COUNT, rule_key), "events",
			 events, "duration", "buckets", buckets, "sum_seconds",
			 t->duration.sum_seconds);
}

struct encode {
	json_t *tenants;
	bool ok;
};

static void encode_tenant(const struct ledger_tenant *t, void *ctx)
{
	struct encode *e = ctx;

	if (e->ok)
		e->ok = !json_object_set_new(e->tenants, t->name, tenant_to_json(t));
}

static json_t *ledger_to_json(struct ledger *l)
{
	struct encode e = { json_object(), true };
	json_t *root;

	if (!e.tenants)
		return NULL;
	ledger_foreach(l, encode_tenant, &e);
	root = json_pack("{s:i, s:I, s:o}", "version", LEDGER_VERSION, "overflowed",
			 (json_int_t)ledger_overflowed(l), "tenants", e.tenants);
	if (!e.ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= n;
	}
	return 0;
}

/* Make the rename itself durable. */
static int fsync_parent(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd, err = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	return err;
}

int ledger_save(struct ledger *l, const char *path)
{
	char tmp[4096];
	json_t *root = ledger_to_json(l);
	char *text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
	const char *step = "write";
	int fd = -1, err = 0;

	json_decref(root);
	if (!text) {
		sg_error("ledger: %s: out of memory encoding the ledger", path);
		return -ENOMEM;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
		free(text);
		sg_error("ledger: %s: path too long", path);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		step = "create";
	} else if ((err = write_all(fd, text, strlen(text))) || (err = write_all(fd, "\n", 1))) {
		step = "write";
	} else if (fsync(fd)) {
		err = -errno;
		step = "fsync";
	}
	if (fd >= 0 && close(fd) && !err) {
		err = -errno;
		step = "close";
	}
	if (!err && rename(tmp, path)) {
		err = -errno;
		step = "rename";
	}
	free(text);
	if (err) {
		sg_error("ledger: cannot save %s (%s of %s): %s", path, step, tmp, strerror(-err));
		unlink(tmp);
		return err;
	}
	err = fsync_parent(path);
	if (err)
		sg_warn("ledger: saved %s but could not fsync its directory: %s", path,
			strerror(-err));
	return 0;
}

/* ---- loading ---- */

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

static int load_tenant(const char *name, json_t *obj, struct ledger_tenant *t, struct why *w)
{
	static const char *const fields[] = { "attempts", "batches",  "degenerate",
					      "invalid",  "failures", "violations",
					      "kills",    "events",   "duration" };
	const char *key;
	json_t *v;
	int err = 0;

	if (!json_is_object(obj))
		return bad(w, "tenants.%s: expected an object", name);
	for (size_t i = 0; i < ARRAY_LEN(fields); i++)
		if (!json_object_get(obj, fields[i]))
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
		else if (!strcmp(key, "failures"))
			err = load_named(v, t->failures, SG_CAUSE__COUNT, cause_key, w, name, key);
		else if (!strcmp(key, "violations"))
			err = load_named(v, t->violations, SG_RULE__COUNT, rule_key, w, name, key);
		else if (!strcmp(key, "kills"))
			err = load_named(v, t->kills, SG_RULE__COUNT, rule_key, w, name, key);
		else if (!strcmp(key, "duration"))
			err = load_duration(v, &t->duration, w, name);
		else if (!strcmp(key, "events")) {
			const char *type;
			json_t *by_action;
			char field[64];
			if (!json_is_object(v))
				return bad(w, "tenants.%s.events: expected an object", name);
			json_object_foreach(v, type, by_action)
			{
				int e = key_index(type_key, SG_EV__COUNT, type);
				if (e < 0)
					return bad(w, "tenants.%s.events: unknown event type '%s'",
						   name, type);
				snprintf(field, sizeof(field), "events.%s", type);
				if (load_named(by_action, t->events[e], LEDGER_N_ACTIONS,
					       action_key, w, name, field))
					return -1;
			}
		} else
			return bad(w, "tenants.%s: unknown field '%s'", name, key);
		if (err)
			return -1;
	}

	/* The class split is derived, and the counts must agree with each other. */
	uint64_t violations = 0;
	for (int c = 1; c < SG_CAUSE__COUNT; c++)
		t->failures_by_class[cause_class(c)] += t->failures[c];
	for (int r = 0; r < SG_RULE__COUNT; r++)
		violations += t->violations[r];
	if (violations != t->failures[SG_CAUSE_TENANT_POLICY_VIOLATION])
		return bad(w,
			   "tenants.%s: violations by rule add up to %llu, not the %llu "
			   "tenant_policy_violation failures",
			   name, (unsigned long long)violations,
			   (unsigned long long)t->failures[SG_CAUSE_TENANT_POLICY_VIOLATION]);
	if (t->duration.count != t->batches_ok + t->batches_failed)
		return bad(w, "tenants.%s: %llu batch durations for %llu batches", name,
			   (unsigned long long)t->duration.count,
			   (unsigned long long)(t->batches_ok + t->batches_failed));
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

static int load_json(struct rows *into, json_t *root, struct why *w)
{
	json_t *version = json_object_get(root, "version");
	json_t *overflowed = json_object_get(root, "overflowed");
	json_t *tenants = json_object_get(root, "tenants"), *v;
	const char *name;

	if (!json_is_object(root) || json_object_size(root) != 3 || !json_is_object(tenants))
		return bad(w, "expected {\"version\", \"overflowed\", \"tenants\"} at the top");
	if (!json_is_integer(version) || json_integer_value(version) != LEDGER_VERSION)
		return bad(w, "version: expected %d", LEDGER_VERSION);
	if (!json_is_integer(overflowed) || json_integer_value(overflowed) < 0)
		return bad(w, "overflowed: expected a count (integer >= 0)");
	into->overflowed = (uint64_t)json_integer_value(overflowed);
	json_object_foreach(tenants, name, v)
	{
		bool is_overflow = !strcmp(name, LEDGER_OVERFLOW);
		struct ledger_tenant *t;

		if (!is_overflow && !tenant_name_valid(name))
			return bad(w, "tenants: invalid tenant name '%.64s'", name);
		if (!is_overflow && into->named++ == LEDGER_MAX_TENANTS)
			return bad(w, "tenants: more than %d", LEDGER_MAX_TENANTS);
		t = calloc(1, sizeof(*t));
		if (!t) {
			w->oom = true;
			return bad(w, "out of memory");
		}
		into->row[into->n++] = t;
		if (load_tenant(name, v, t, w))
			return -1;
	}
	return 0;
}

static int read_file(const char *path, char **text, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK),
	    err = 0; /* a FIFO must not hang us */
	ssize_t n = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		err = -errno;
	else if (S_ISDIR(st.st_mode))
		err = -EISDIR;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if (st.st_size > LEDGER_FILE_MAX)
		err = -EFBIG;
	else if (!(*text = malloc(st.st_size + 1)))
		err = -ENOMEM;
	else {
		for (*len = 0; *len < (size_t)st.st_size; *len += n) {
			n = read(fd, *text + *len, st.st_size - *len);
			if (n < 0 && errno == EINTR) {
				n = 0;
				continue;
			}
			if (n <= 0)
				break;
		}
		if (n < 0)
			err = -errno;
	}
	close(fd);
	if (err && *text) {
		free(*text);
		*text = NULL;
	}
	return err;
}

/* Keep a corrupt file for inspection, under a name no save will reuse. */
static void move_aside(const char *path, char *aside, size_t len)
{
	long ts = (long)time(NULL);

	for (int i = 0; i < 100; i++) {
		if (i == 0)
			snprintf(aside, len, "%s.corrupt-%ld", path, ts);
		else
			snprintf(aside, len, "%s.corrupt-%ld.%d", path, ts, i);
		if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) == 0)
			return;
		if (errno != EEXIST)
			break;
	}
	snprintf(aside, len, "(could not move it aside: %s)", strerror(errno));
}

int ledger_load(struct ledger *l, const char *path)
{
	struct rows *rows;
	struct why w = { .oom = false };
	char *text = NULL, aside[4200];
	size_t len = 0;
	json_error_t jerr;
	json_t *root;
	int err = read_file(path, &text, &len);

	if (err == -ENOENT) {
		sg_info("ledger: no state file at %s yet: starting with an empty ledger", path);
		return 0;
	}
	if (err) {
		sg_error("ledger: cannot read %s: %s%s", path, strerror(-err),
			 err == -EINVAL ? " (not a regular file)" : "");
		return err;
	}
	rows = calloc(1, sizeof(*rows));
	if (!rows) {
		free(text);
		return -ENOMEM;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!root) {
		bad(&w, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
		w.oom = json_error_code(&jerr) == json_error_out_of_memory;
	} else {
		load_json(rows, root, &w);
	}
	json_decref(root);
	if (w.oom) {
		rows_free(rows);
		free(rows);
		sg_error("ledger: out of memory loading %s", path);
		return -ENOMEM;
	}
	if (w.msg[0]) {
		rows_free(rows);
		free(rows);
		move_aside(path, aside, sizeof(aside));
		sg_error("ledger: %s is corrupt: %s; kept as %s; no counts were restored", path,
			 w.msg, aside);
		return -EBADMSG;
	}
	ledger_adopt(l, rows->row, rows->n, rows->overflowed);
	sg_info("ledger: restored %zu tenants from %s", rows->n, path);
	free(rows);
	return 0;
}
