/* Reading what `sandguard explain` merges: outcome records from the journal
 * (every retained segment) and enforcement events from the event stream
 * (the current file and its rotated predecessors PATH.1 .. PATH.N). Both
 * are read-only and cheap on a big file: a line is parsed only when its
 * text names what is looked for. */
#ifndef SG_TIMELINE_READ_H
#define SG_TIMELINE_READ_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which records: those whose `key` ("batch_id", "sandbox" or "run_id")
 * is `value`, and, when tenant is set, of that tenant. */
struct record_match {
	const char *key;
	const char *value;
	const char *tenant;
};

/* What a scan saw, for the "sources" part of the document and for errors. */
struct scan_stats {
	uint64_t lines;    /* lines read */
	uint64_t bad;      /* journal lines that named the value but were not records */
	uint64_t segments; /* journal segments / event files read */
	uint64_t gaps;     /* journal segments gone while reading */
};

/* Append every matching record (a parsed JSON object, in journal order) to
 * `out`. 0, or -errno with `err` (a missing or unreadable journal). */
int timeline_read_records(const char *journal_dir, const struct record_match *m, json_t *out,
			  struct scan_stats *st, char *err, size_t err_len);

/* Which events: of one of the sandboxes (sorted, for bsearch), or carrying
 * the batch_id and run_id of the batch (the agent tags every event with
 * its sandbox's), within [from_ms, to_ms]. */
struct event_match {
	const char *const *sandboxes; /* sorted with strcmp */
	size_t n_sandboxes;
	const char *batch_id; /* NULL: by sandbox only */
	const char *run_id;   /* with batch_id: the batch's run (NULL: none) */
	bool any_run;         /* with batch_id: of whichever run (run_id unused) */
	const char *tenant;
	int64_t from_ms, to_ms;
};

/* Append each matching event (its JSON object, plus "summary": the
 * one-line summary `sandguard events` prints) to `out`, oldest file first,
 * each file once while the agent rotates them (event_stream_each()); the
 * names of the files read to `files`. 0, or -errno with `err` when the
 * stream cannot be read. When files were rotated away (deleted) before
 * they could be read, 0 with `err` saying how many. */
int timeline_read_events(const char *events_file, const struct event_match *m, json_t *out,
			 json_t *files, struct scan_stats *st, char *err, size_t err_len);

/* `value` as JSON text ("b-1" -> "\"b-1\""), the form it has in a line;
 * malloc'd, or NULL. */
char *timeline_json_text(const char *value);

#endif
