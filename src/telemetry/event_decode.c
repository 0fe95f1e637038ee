/* Decoding event JSON lines for `sandguard events` (the format is in
 * src/telemetry/event_json.h), RFC 3339 timestamps, and the one-line summary of
 * each type's detail that the table shows. Input is untrusted: anything
 * that is not a well-formed event is an error, never a crash. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "event_json.h"

/* Exactly n decimal digits at s. */
static int digits(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int days_in_month(int year, int month)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return month == 2 && leap ? 29 : days[month - 1];
}

int event_parse_ts(const char *s, int64_t *epoch_ms)
{
	int year, mon, day, hour, min, sec, ms = 0, off_h = 0, off_m = 0, sign = 0;
	struct tm tm = { 0 };
	const char *p;

	/* YYYY-MM-DDTHH:MM:SS */
	if (!s || strlen(s) < 20 || digits(s, 4, &year) || s[4] != '-' || digits(s + 5, 2, &mon) ||
	    s[7] != '-' || digits(s + 8, 2, &day) ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || digits(s + 11, 2, &hour) ||
	    s[13] != ':' || digits(s + 14, 2, &min) || s[16] != ':' || digits(s + 17, 2, &sec))
		return -EINVAL;
	if (mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) || hour > 23 ||
	    min > 59 || sec > 60)
		return -EINVAL;
	p = s + 19;
	if (*p == '.') {
		int scale = 100, n = 0;
		for (p++; isdigit((unsigned char)*p); p++, n++) {
			ms += (*p - '0') * scale;
			scale /= 10;
		}
		if (n == 0)
			return -EINVAL;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		if (digits(p + 1, 2, &off_h) || p[3] != ':' || digits(p + 4, 2, &off_m) ||
		    off_h > 23 || off_m > 59)
			return -EINVAL;
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p != '\0')
		return -EINVAL;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	int64_t secs = (int64_t)timegm(&tm) - sign * (off_h * 3600 + off_m * 60);
	*epoch_ms = secs * 1000 + ms;
	return 0;
}

/* A bounded string builder for summaries: appends what fits. */
struct sbuf {
	char buf[512];
	size_t len;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->len >= sizeof(b->buf) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->buf + b->len, sizeof(b->buf) - b->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len += (size_t)n < sizeof(b->buf) - b->len ? (size_t)n
							      : sizeof(b->buf) - 1 - b->len;
}

/* Detail fields, tolerant of whatever a line holds. */
static const char *str_of(json_t *d, const char *key)
{
	const char *s = json_string_value(json_object_get(d, key));
	return s ? s : "?";
}

static long long int_of(json_t *d, const char *key)
{
	return json_integer_value(json_object_get(d, key));
}

static void summarize_egress(struct sbuf *b, json_t *d)
{
	json_t *proto = json_object_get(d, "proto");
	sb_add(b, "%s %s", json_is_string(proto) ? json_string_value(proto) : str_of(d, "family"),
	       str_of(d, "dst"));
	if (json_is_string(json_object_get(d, "hook")))
		sb_add(b, " (%s)", str_of(d, "hook"));
}

static void summarize_fork(struct sbuf *b, json_t *d)
{
	sb_add(b, "%s %lld: tasks %lld, forks %lld", str_of(d, "which"), int_of(d, "limit"),
	       int_of(d, "tasks"), int_of(d, "forks"));
}

static void summarize_exec(struct sbuf *b, json_t *d)
{
	json_t *argv = json_object_get(d, "argv"), *mode = json_object_get(d, "mode");
	size_t i;
	json_t *a;

	sb_add(b, "%s", str_of(d, "filename"));
	/* argv[0] mostly repeats the filename. */
	json_array_foreach(argv, i, a) if (i > 0)
		sb_add(b, " %s", json_is_string(a) ? json_string_value(a) : "?");
	if (json_is_true(json_object_get(d, "truncated")))
		sb_add(b, " ...");
	if (json_is_string(mode))
		sb_add(b, " [%s]", json_string_value(mode));
}

static void summarize_file(struct sbuf *b, json_t *d)
{
	json_t *mode = json_object_get(d, "mode");
	sb_add(b, "%s (%s", str_of(d, "path"),
	       json_is_true(json_object_get(d, "write")) ? "write" : "read");
	if (json_is_string(mode))
		sb_add(b, ", %s", json_string_value(mode));
	sb_add(b, ")");
}

static void summarize_exit(struct sbuf *b, json_t *d)
{
	long long sig = int_of(d, "signal");
	const char *abbrev = sig > 0 && sig < 65 ? sigabbrev_np((int)sig) : NULL;

	if (sig)
		sb_add(b, "signal %lld%s%s", sig, abbrev ? " SIG" : "", abbrev ? abbrev : "");
	else
		sb_add(b, "exit %lld", int_of(d, "exit_code"));
	if (json_is_true(json_object_get(d, "core")))
		sb_add(b, ", core dumped");
	if (json_is_true(json_object_get(d, "oom_killed")))
		sb_add(b, ", oom-killed");
}

static void summarize_killed(struct sbuf *b, json_t *d, const char *rule)
{
	json_t *lat = json_object_get(d, "kill_latency_ms");
	json_t *method = json_object_get(d, "method");

	sb_add(b, "rule %s after %s", rule ? rule : "?", str_of(d, "trigger"));
	if (json_is_number(lat))
		sb_add(b, ", empty in %.3f ms", json_number_value(lat));
	if (json_is_string(method))
		sb_add(b, " (%s)", json_string_value(method));
}

/* Any other detail (health and unknown types): key=value for scalars. */
static void summarize_fields(struct sbuf *b, json_t *d)
{
	const char *key;
	json_t *v;

	json_object_foreach(d, key, v)
	{
		sb_add(b, "%s%s=", b->len ? " " : "", key);
		if (json_is_string(v))
			sb_add(b, "%s", json_string_value(v));
		else if (json_is_integer(v))
			sb_add(b, "%lld", (long long)json_integer_value(v));
		else if (json_is_real(v))
			sb_add(b, "%g", json_real_value(v));
		else if (json_is_boolean(v))
			sb_add(b, "%s", json_is_true(v) ? "true" : "false");
		else
			sb_add(b, "%s", json_is_null(v) ? "null" : "...");
	}
}

static void summarize(struct sbuf *b, const char *type, const char *rule, json_t *d)
{
	switch (event_type_from_name(type)) {
	case SG_EV_EGRESS_DENIED:
		summarize_egress(b, d);
		break;
	case SG_EV_FORK_LIMIT:
		summarize_fork(b, d);
		break;
	case SG_EV_EXEC:
	case SG_EV_EXEC_DENIED:
		summarize_exec(b, d);
		break;
	case SG_EV_FILE_DENIED:
	case SG_EV_FILE_TRIPPED:
		summarize_file(b, d);
		break;
	case SG_EV_EXIT:
		summarize_exit(b, d);
		break;
	case SG_EV_SANDBOX_KILLED:
		summarize_killed(b, d, rule);
		break;
	default:
		summarize_fields(b, d);
		break;
	}
}

/* A string-or-null field; absent counts as null. */
static int opt_string(json_t *root, const char *key, const char **out)
{
	json_t *v = json_object_get(root, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return -1;
	*out = json_string_value(v);
	return 0;
}

/* A non-negative integer or null; absent counts as null (-1). */
static int opt_id(json_t *root, const char *key, int64_t *out)
{
	json_t *v = json_object_get(root, key);

	*out = -1;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

static int fail(struct event_record *out, const char *why)
{
	event_record_free(out);
	out->error = why;
	return -EINVAL;
}

int event_parse_line(const char *line, struct event_record *out)
{
	json_error_t jerr;
	json_t *detail;
	struct sbuf sb = { .len = 0 };

	memset(out, 0, sizeof(*out));
	out->error = "not a JSON object";
	out->root = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
	if (!out->root || !json_is_object(out->root))
		return fail(out, "not a JSON object");
	if (event_parse_ts(json_string_value(json_object_get(out->root, "ts")), &out->ts_ms))
		return fail(out, "ts is missing or not an RFC 3339 time");
	if (opt_string(out->root, "type", &out->type) || !out->type || !*out->type)
		return fail(out, "type is missing or not a string");
	if (opt_string(out->root, "action", &out->action) || !out->action || !*out->action)
		return fail(out, "action is missing or not a string");
	if (opt_string(out->root, "node", &out->node) ||
	    opt_string(out->root, "tenant", &out->tenant) ||
	    opt_string(out->root, "sandbox", &out->sandbox) ||
	    opt_string(out->root, "rule", &out->rule) ||
	    opt_string(out->root, "comm", &out->comm) ||
	    opt_string(out->root, "batch_id", &out->batch_id) ||
	    opt_string(out->root, "run_id", &out->run_id))
		return fail(
			out,
			"node, tenant, sandbox, batch_id, run_id, rule or comm is not a string");
	if (opt_id(out->root, "pid", &out->pid) || opt_id(out->root, "ppid", &out->ppid) ||
	    opt_id(out->root, "uid", &out->uid))
		return fail(out, "pid, ppid or uid is not a non-negative integer");

	detail = json_object_get(out->root, "detail");
	if (detail && !json_is_null(detail) && !json_is_object(detail))
		return fail(out, "detail is not an object");
	if (detail && json_is_object(detail)) {
		out->detail = json_dumps(detail, JSON_COMPACT | JSON_REAL_PRECISION(10));
		summarize(&sb, out->type, out->rule, detail);
	} else {
		out->detail = strdup("{}");
	}
	out->summary = strndup(sb.buf, sb.len);
	if (!out->detail || !out->summary) {
		event_record_free(out);
		out->error = "out of memory";
		return -ENOMEM;
	}
	out->error = NULL;
	return 0;
}

void event_record_free(struct event_record *r)
{
	free(r->detail);
	free(r->summary);
	json_decref(r->root);
	memset(r, 0, sizeof(*r));
}
