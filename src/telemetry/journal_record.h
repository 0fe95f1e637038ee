/* One journal record: an outcome as one JSON line (see journal.h for the
 * journal). Version 1, the keys always in this order:
 *
 *   {"v": 1,
 *    "id": "3f2a9c01-4242",            the outcome id: the attempt's sandbox id,
 *                                      or "o-<16 hex>" for an outcome without
 *                                      a sandbox (a refusal, a verifier
 *                                      request's summary); the fold books the
 *                                      first record of an id, never a later one
 *    "ts": "2026-11-21T20:14:06.959Z", when it was booked (UTC, ms)
 *    "started": "...Z",                when the attempt started (ts - wall_ms)
 *    "pid": 28446,                     the executor that booked it
 *    "mode": "batch"|"verify"|"run",
 *    "tenant", "run_id" (or null), "batch_id", "sandbox" (or null), "cgroup_id",
 *    "attempt": 1-based; 0 for a refusal before any sandbox ran,
 *    "final": true on the attempt that ended the batch (counts as a batch),
 *    "cause", "class" ("tenant_code", "platform", "verdict" or "none"),
 *    "rule" (or null), "wall_ms",
 *    "cpu_us", "mem_peak_bytes" (or null: never ran, or a record from
 *    before metering): the run's CPU time from its cgroup's usage_usec,
 *    and the sandbox's peak memory over the run (src/sandbox/sandbox.h),
 *    "n_scores", "score_mean", "score_var"
 *    (null without scores), "constant", "invalid",
 *    "canary" (or null): the batch's probes {probes, failed,
 *                        nondeterministic, detail}
 *    "artifact_refused" (or null): a pinned artifact refused, what and
 *                        why (src/exec/artifact.h); a tenant_policy_violation
 *                        with it names no rule
 *    "detail" (or null): the human-readable reason, as in the result,
 *    and then what the fold never reads, for people and `sandguard explain`
 *    (added later in version 1: a reader takes a missing key as null):
 *    "reason" (or null): why this cause, the evidence the classifier saw
 *                        ("the deadline of 2000 ms passed while ...")
 *    "decision" (or null): "retried: ..." or "final: ...", and why
 *    "uid" (or null): the slot uid the attempt ran as
 *    "init_pid" (or null): the host pid of the sandbox's init, which is
 *                        sandguard's (it never runs tenant code), so that
 *                        its events are told from the tenant's
 *    "limits" (or null): {"timeout_ms", "memory_mb", "max_tasks", "max_forks",
 *                        "cpu", "output_bytes"}, as the attempt ran under them
 *    "policy" (or null): the policy file it ran under ("<embedded>" for the
 *                        built-in default)
 *    "test" (or null): verifier mode, the index of the test this run was
 *    "step" (or null): session mode, the step's number (1-based); null on
 *                      the session's final record
 *    "session_end" (or null): the session's final record: how it ended
 *                      ("closed", "idle", "lifetime", "cpu", "policy",
 *                      "oom", "platform")
 *    "cpu_ms" (or null): session mode, the CPU time the step used}
 *
 * A reader takes "class" from mode and cause (outcome_class()), so that an
 * old record is judged by today's rule; the stored one is for people. */
#ifndef SG_JOURNAL_RECORD_H
#define SG_JOURNAL_RECORD_H
#include <stddef.h>
#include <stdint.h>
#include "outcome.h"

#define JOURNAL_RECORD_VERSION 1

/* What a record says beyond the outcome; every field may be NULL / 0. */
struct journal_notes {
	const char *detail;             /* the result's detail */
	const char *reason;             /* why this cause */
	const char *decision;           /* "retried: ..." / "final: ..." */
	const char *policy;             /* the policy file */
	uint32_t uid;                   /* the slot uid; 0 = not known */
	int32_t init_pid;               /* the sandbox's init; 0 = not known */
	const struct sg_limits *limits; /* NULL = not known */
	uint64_t timeout_ms;            /* the deadline it ran under; 0 = limits' own */
	uint32_t test;                  /* verifier mode: 1 + the test's index; 0 = none */
	uint32_t step;                  /* session mode: the step, 1-based; 0 = none */
	const char *session_end;        /* a session's final record: how it ended */
	int64_t cpu_ms;                 /* a session step's CPU time; -1 = not known */
};

/* The line (malloc'd, NUL-terminated, no newline) for `o` and `notes`
 * (may be NULL). 0, -EINVAL for an outcome without an id or tenant, or
 * -ENOMEM. */
int journal_record_encode_notes(const struct sg_outcome *o, const struct journal_notes *notes,
				char **line, size_t *len);
/* The same with a detail alone. */
int journal_record_encode(const struct sg_outcome *o, const char *detail, char **line, size_t *len);

/* Parse one line. 0 with *o filled (detail is not kept), or -EBADMSG with
 * `why` saying what is wrong. */
int journal_record_decode(const char *line, size_t len, struct sg_outcome *o, char *why,
			  size_t why_len);

/* Only the id, cheaply: 0, or -EBADMSG when the line does not start the
 * way journal_record_encode() starts one (then decode it). */
int journal_record_id(const char *line, size_t len, char *id, size_t id_len);

/* A fresh random outcome id, "o-<16 hex digits>". 0 or -errno. */
int journal_new_id(char *buf, size_t len);

#endif
