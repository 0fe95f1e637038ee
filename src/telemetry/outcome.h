/* Batch outcomes: the causes every failure is booked to, and their class.
 * Shared by the executor (which decides them and journals them), the
 * agent's ledger (which folds the journal) and the metrics. */
#ifndef SG_OUTCOME_H
#define SG_OUTCOME_H
#include <stdbool.h>
#include <stdint.h>
#include "lib/ids.h"
#include "policy/policy.h"

#define SG_CANARY_DETAIL    256
#define SG_ARTIFACT_REFUSED 512

enum sg_cause {
	SG_CAUSE_OK = 0,
	SG_CAUSE_TENANT_TIMEOUT,
	SG_CAUSE_TENANT_BAD_OUTPUT,
	SG_CAUSE_TENANT_CRASH,
	SG_CAUSE_TENANT_OOM,
	SG_CAUSE_TENANT_POLICY_VIOLATION,
	SG_CAUSE_TENANT_PAUSED,
	SG_CAUSE_PLATFORM_ERROR,
	SG_CAUSE__COUNT
};

/* The runbook's classes: a tenant code fault is surfaced to the customer,
 * a platform fault spends the platform's error budget. A verdict is
 * nobody's fault: a model-written program (verifier mode, run-once) that
 * failed its run; the failure is the reward (0), the runbook's "no fault"
 * class. */
enum sg_fault_class {
	SG_CLASS_NONE = 0,
	SG_CLASS_TENANT_CODE,
	SG_CLASS_PLATFORM,
	SG_CLASS_VERDICT,
};

/* What ran: the tenant's reward program over a batch, a model-written
 * program against tests, one run of a model-written program, or a step
 * of an environment's session (src/session/; its final record is the
 * session's end). */
enum sg_mode { SG_MODE_BATCH = 0, SG_MODE_VERIFY, SG_MODE_RUN, SG_MODE_SESSION, SG_MODE__COUNT };

const char *cause_name(enum sg_cause c); /* "tenant_timeout", ... */
int cause_from_name(const char *name);   /* -1 if unknown */
/* The class of a cause in batch mode. */
enum sg_fault_class cause_class(enum sg_cause c);
/* The class of an outcome: in verifier and run-once mode, the tenant causes
 * of a run (timeout, bad output, crash, oom, policy violation) are the
 * program's verdict, never the tenant's fault; tenant_paused (an admission
 * refusal) and platform_error keep their class in every mode. */
enum sg_fault_class outcome_class(enum sg_mode mode, enum sg_cause cause);
/* "none", "tenant_code", "platform", "verdict" */
const char *fault_class_name(enum sg_fault_class c);
const char *mode_name(enum sg_mode m); /* "batch", "verify", "run", "session" */
int mode_from_name(const char *name);  /* -1 if unknown */

/* A timeout's confirmation (src/exec/exec_confirm.c): the attempt whose
 * timeout a confirmation run follows, and the confirmation run itself. */
enum sg_confirm {
	SG_CONFIRM_NONE = 0,
	SG_CONFIRM_NEXT,       /* a confirmation run follows this timeout */
	SG_CONFIRM_RUN,        /* this is the confirmation run */
	SG_CONFIRM_UNADMITTED, /* one was due but could not run in time: the timeout stands */
};

/* One attempt's outcome, as the executor journals it (telemetry/journal.h
 * has the record) and the agent's ledger folds it. */
struct sg_outcome {
	char id[SG_ID_BUF]; /* the outcome id: the attempt's sandbox id, or a fresh one */
	enum sg_mode mode;
	char tenant[SG_TENANT_MAX];
	char run_id[SG_ID_BUF];
	char batch_id[SG_ID_BUF];
	char sandbox[SG_ID_BUF];
	uint64_t cgroup_id;
	enum sg_cause cause;
	int rule;         /* enum sg_rule, or -1 */
	uint32_t attempt; /* 1-based */
	bool final;       /* the batch's last attempt: counts as a batch */
	enum sg_confirm confirm;
	uint64_t wall_ms;
	/* What the attempt cost, from its cgroup's own counters (unknown for
	 * an attempt that never ran, or one a reaper booked): CPU time, and
	 * the sandbox's peak memory over the run. */
	bool cpu_known, mem_peak_known;
	uint64_t cpu_us;
	uint64_t mem_peak_bytes;
	uint32_t n_scores; /* valid scores (cause ok) */
	double score_mean;
	double score_var;
	bool constant;       /* all scores equal (degenerate batch) */
	bool invalid;        /* failed the schema gate */
	uint64_t ts_ms;      /* wall clock (ms since the epoch) when booked */
	uint64_t started_ms; /* wall clock when the attempt started (ts_ms - wall_ms) */
	int pid;             /* the executor that booked it */
	/* Canaries (src/exec/canary.h): probes mixed into the batch, how many
	 * scored outside their range, whether the determinism probe's second
	 * sandbox scored its item differently, and what was found. */
	uint32_t canary_probes, canary_failed;
	bool nondeterministic;
	char canary_detail[SG_CANARY_DETAIL];
	/* A pinned artifact refused (src/exec/artifact.h): what and why, as
	 * the result's detail says it (truncated); "" otherwise. Such a
	 * refusal is a tenant_policy_violation that names no rule. */
	char artifact_refused[SG_ARTIFACT_REFUSED];
};

#endif
