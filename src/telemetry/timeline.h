/* The life of a batch, for on-call (`sandguard explain`): its outcome
 * records from the journal and its kernel events from the event stream,
 * merged per attempt; each enforcement event with the policy line that
 * decided it; the cause booked and why; and a one-line verdict.
 *
 * The document (what `explain --json` prints):
 *   {"query": {"batch_id"|"sandbox"|"run_id": ..., "tenant": ...},
 *    "sources": {"journal", "journal_segments", "records_searched", "events_file" (the
 *                stream's path), "events_files" (each file read, named as when read),
 *                "events", "events_error"},
 *    "batches": [{ (one per execution, oldest first: a batch id repeats
 *                   across a trainer's runs and restarts)
 *      "batch_id", "tenant", "run_id", "mode", "executor_pid",
 *      "cause", "class", "rule", "detail", "booked" (false: no final record),
 *      "score_mean", "constant" (of the final record: null without scores),
 *      "canary" (the final record's: probes, failed, nondeterministic,
 *                detail; null without canaries),
 *      "policy": {"file", "changed_after", "error"},
 *      "attempts": [{"attempt", "test" (verifier mode), "sandbox", "cgroup_id",
 *                    "uid", "init_pid", "limits",
 *                    "started", "ended", "wall_ms", "cause", "class", "rule",
 *                    "detail", "reason", "decision", "final", "policy_file",
 *                    "events": [{...the event's own fields..., "summary",
 *                                "policy": finding, "sandbox_init": true
 *                                (only on the events of the sandbox's init)}],
 *                    "policy": finding (the limit or action behind the cause)}],
 *      "summary": the request's own record (verifier mode) or null,
 *      "other_events": events of the batch in no attempt's sandbox
 *                      (an event is the attempt's whose sandbox it names;
 *                      where a batch id repeats or a sandbox served
 *                      several attempts, the one nearest it in time),
 *      "verdict": "batch b-17 of tenant acme ..."}]}
 * A finding: {"says", "matched", "entry": line (the entry that matched, or
 * the list none did), "listed": [line] (then: the list's first entries),
 * "action": line}, a line: {"key", "value", "file", "line" (null: not in
 * the file, the default), "text"}. */
#ifndef SG_TIMELINE_H
#define SG_TIMELINE_H
#include <jansson.h>
#include <stddef.h>

/* One of batch_id, sandbox or run_id; tenant and run_id narrow. */
struct timeline_query {
	const char *batch_id;
	const char *sandbox;
	const char *run_id;
	const char *tenant;
};

struct timeline_sources {
	const char *journal_dir; /* <state>/journal */
	const char *events_file; /* the current event file; PATH.N .. PATH.1 too */
	const char *policy_dir;  /* for records that do not name their policy file */
};

/* 0 with *doc (the caller json_decref()s it); -ESRCH when no record
 * matches, -errno when the journal cannot be read; `err` says which. A
 * batch id no record names yet (its executor is still running, or died
 * before booking) is looked up in the events the agent tagged with it:
 * "booked": false, each sandbox an attempt whose record keys are null. An
 * unreadable event stream or policy file is not an error: the document
 * says so and the timeline shows what the journal has. */
int timeline_build(const struct timeline_query *q, const struct timeline_sources *s, json_t **doc,
		   char *err, size_t err_len);

#endif
