/* Reading the journal and the event stream for `sandguard explain` (see
 * timeline_read.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "event_json.h"
#include "event_stream.h"
#include "journal_read.h"
#include "timeline_read.h"


char *timeline_json_text(const char *value)
{
	json_t *s = json_string(value);
	char *text = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

	json_decref(s);
	return text;
}

/* `"key":<value as JSON>`, the way the encoders write it (compact). */
static char *needle_of(const char *key, const char *value)
{
	char *v = timeline_json_text(value), *n = NULL;

	if (v && asprintf(&n, "\"%s\":%s", key, v) < 0)
		n = NULL;
	free(v);
	return n;
}

static bool string_is(json_t *o, const char *key, const char *value)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && !strcmp(s, value);
}

int timeline_read_records(const char *journal_dir, const struct record_match *m, json_t *out,
			  struct scan_stats *st, char *err, size_t err_len)
{
	struct journal_cursor c;
	struct stat sb;
	char *needle, *line;
	size_t len;
	struct journal_pos at;
	uint64_t *seqs = NULL;
	size_t n_seqs = 0;
	int ret;

	ret = stat(journal_dir, &sb) ? -errno : S_ISDIR(sb.st_mode) ? 0 : -ENOTDIR;
	if (ret) {
		snprintf(err, err_len, "cannot read the outcome journal %s: %s", journal_dir,
			 strerror(-ret));
		return ret;
	}
	needle = needle_of(m->key, m->value);
	if (!needle)
		return -ENOMEM;
	journal_cursor_init(&c, journal_dir, &(struct journal_pos){ 0, 0 });
	while ((ret = journal_next(&c, &line, &len, &at)) > 0) {
		json_t *rec;

		st->lines++;
		if (!strstr(line, needle))
			continue;
		rec = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(rec) || !json_string_value(json_object_get(rec, "tenant"))) {
			st->bad++;
			json_decref(rec);
			continue;
		}
		if (string_is(rec, m->key, m->value) &&
		    (!m->tenant || string_is(rec, "tenant", m->tenant)))
			json_array_append(out, rec);
		json_decref(rec);
	}
	st->gaps += c.gap_segments;
	journal_cursor_close(&c);
	if (journal_segments(journal_dir, &seqs, &n_seqs) == 0)
		st->segments += n_seqs;
	free(seqs);
	free(needle);
	if (ret < 0)
		snprintf(err, err_len, "reading the outcome journal %s: %s", journal_dir,
			 strerror(-ret));
	return ret < 0 ? ret : 0;
}

/* bsearch: a key string against an element of a sorted array of strings. */
static int cmp_key(const void *key, const void *elem)
{
	return strcmp((const char *)key, *(const char *const *)elem);
}

/* Whether the line is one of ours before it is parsed: its "sandbox" is
 * one of the set, or it names the batch. */
static bool may_match(const struct event_match *m, const char *line, const char *batch_needle)
{
	const char *s = strstr(line, "\"sandbox\":\""), *end;
	char id[160];

	if (batch_needle && strstr(line, batch_needle))
		return true;
	if (!s || !m->n_sandboxes) /* bsearch() takes no NULL array */
		return false;
	s += strlen("\"sandbox\":\"");
	end = strchr(s, '"');
	if (!end || (size_t)(end - s) >= sizeof(id))
		return false;
	memcpy(id, s, (size_t)(end - s));
	id[end - s] = '\0';
	return bsearch(id, m->sandboxes, m->n_sandboxes, sizeof(char *), cmp_key) != NULL;
}

static bool in_set(const struct event_match *m, const char *sandbox)
{
	return sandbox && m->n_sandboxes &&
	       bsearch(sandbox, m->sandboxes, m->n_sandboxes, sizeof(char *), cmp_key) != NULL;
}

/* An event's run_id (null when unknown) against the batch's. */
static bool same_run(json_t *event, const char *run_id)
{
	const char *r = json_string_value(json_object_get(event, "run_id"));

	return run_id ? r && !strcmp(r, run_id) : !r;
}

/* The event as the document keeps it, or NULL when it is not ours. */
static json_t *event_entry(const struct event_match *m, const char *line)
{
	struct event_record r;
	json_t *e;
	bool ours;

	if (event_parse_line(line, &r))
		return NULL;
	ours = r.ts_ms >= m->from_ms && r.ts_ms <= m->to_ms &&
	       (!m->tenant || (r.tenant && !strcmp(r.tenant, m->tenant))) &&
	       (in_set(m, r.sandbox) ||
		(m->batch_id && string_is(r.root, "batch_id", m->batch_id) &&
		 (m->any_run || same_run(r.root, m->run_id))));
	e = ours ? json_copy(r.root) : NULL;
	if (e) {
		json_object_set_new(e, "summary", json_string(r.summary));
		json_object_set_new(e, "ts_ms", json_integer(r.ts_ms));
	}
	event_record_free(&r);
	return e;
}

/* One file's events: a line is parsed only when its text may match. */
static int read_event_file(int fd, const struct event_match *m, const char *batch_needle,
			   json_t *out, struct scan_stats *st)
{
	struct event_reader r;
	char *line;
	int ret;

	ret = event_reader_open_fd(&r, fd);
	if (ret)
		return ret;
	for (;;) {
		json_t *e;

		ret = event_reader_next(&r, &line);
		if (ret == 0)
			ret = event_reader_tail(&r, &line); /* the file is over */
		if (ret <= 0)
			break; /* (a read error ends the file, as its end would) */
		st->lines++;
		if (ret == 2 || !may_match(m, line, batch_needle))
			continue;
		e = event_entry(m, line);
		if (e)
			json_array_append_new(out, e);
	}
	event_reader_close(&r);
	st->segments++;
	return 0;
}

struct event_scan {
	const struct event_match *m;
	const char *batch_needle;
	json_t *out, *files;
	struct scan_stats *st;
};

static int read_stream_file(const char *name, int fd, bool live, void *ctx)
{
	struct event_scan *sc = ctx;
	int ret = read_event_file(fd, sc->m, sc->batch_needle, sc->out, sc->st);

	(void)live;
	if (!ret)
		json_array_append_new(sc->files, json_string(name));
	return ret;
}

int timeline_read_events(const char *events_file, const struct event_match *m, json_t *out,
			 json_t *files, struct scan_stats *st, char *err, size_t err_len)
{
	char *batch_needle = m->batch_id ? needle_of("batch_id", m->batch_id) : NULL;
	struct event_scan sc = { m, batch_needle, out, files, st };
	unsigned lost;
	int ret;

	/* Oldest first; a rotated file last written before the batch began
	 * holds none of its events. */
	ret = event_stream_each(events_file, m->from_ms, read_stream_file, &sc, &lost);
	if (ret)
		snprintf(err, err_len, "cannot read the event stream %s: %s", events_file,
			 event_stream_strerror(ret));
	else if (lost)
		snprintf(err, err_len,
			 "%u of the event stream's files were rotated away while %s was read", lost,
			 events_file);
	free(batch_needle);
	return ret;
}
