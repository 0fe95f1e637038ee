/* The reward executor on top of sandbox_run(): what an outcome means, the
 * failure semantics, admission (paused tenants, the concurrency cap, the
 * agent requirement) and booking. Three modes:
 *
 *  exec_batch()   a reward program scores a batch: the batch JSON on stdin,
 *                 one JSON array of len(items) finite numbers on stdout.
 *  exec_verify()  a program runs once per stdin/stdout test, compared
 *                 LiveCodeBench-style; reward 1 iff every test passes.
 *  exec_run()     one run, raw stdout/stderr back (the HTTP /run_code).
 *
 * Causes (enum sg_cause) from a sandbox run:
 *   sandbox_run() < 0                platform_error (never the tenant's)
 *   SB_TIMEOUT                       tenant_timeout
 *   SB_OUTPUT_OVERSIZE               tenant_bad_output "oversized: ..."
 *   SB_OOM                           tenant_oom (its own limit reached; an OOM
 *                                    kill without that, the node's, is a
 *                                    sandbox_run() platform_error)
 *   SB_KILLED_BY_AGENT               tenant_policy_violation + the agent's rule
 *   SB_RULE_TRIPPED                  tenant_policy_violation + the rule the
 *                                    kernel's record tripped (the agent's
 *                                    kill not on record)
 *   SB_FORK_LIMIT                    tenant_policy_violation, rule fork
 *   SB_POLICY_REFUSED                tenant_policy_violation, rule exec (the
 *                                    run's own command refused)
 *   SB_SIGNALED                      tenant_crash "killed by signal SIGABRT (6)"
 *   SB_EXITED, code != 0             tenant_crash "exited with code 3"
 *   SB_EXITED, code 0                batch: the schema gate (ok or
 *                                    tenant_bad_output); run/verify: ok
 *
 * Failure semantics, batch mode (the tenant's reward code):
 *  - Every attempt is a fresh sandbox, booked with its attempt number; the
 *    attempt that ends the batch is booked final, so each batch is booked
 *    final exactly once. Booking = one record appended to the outcome
 *    journal (telemetry/journal.h), on disk before the result is returned;
 *    the agent's ledger folds the journal. An attempt whose record cannot
 *    be written ends the request as platform_error: a result is never
 *    returned unbooked.
 *  - The attempt budget is 1 + policy.max_retries, in every mode.
 *  - retry: tenant_timeout, tenant_crash, tenant_oom and tenant_bad_output
 *    are retried (flaky code recovers). tenant_policy_violation is final at
 *    once: it is deliberate behaviour, and retrying hands hostile code more
 *    tries at the same escape.
 *  - skip: the first tenant cause is final.
 *  - pause: the first tenant cause is final and pauses the tenant
 *    (tenant_state.h) until `sandguard tenant resume`.
 *  - platform_error is retried in every mode (the tenant should not lose a
 *    batch to our fault) and never pauses anybody.
 *
 * Admission, before any sandbox runs (booked final with attempt 0):
 *  - the journal's disk is below its reserve -> platform_error naming the
 *    path (the reserve is kept for the runs already admitted).
 *  - tenant paused, or its policy has "enabled": false -> tenant_paused.
 *  - policy.require_agent and no agent connection -> platform_error.
 *  - the concurrency cap is full: on_excess "refuse" -> platform_error
 *    "concurrency cap reached ..."; "wait" -> wait up to queue_timeout_ms,
 *    then platform_error "... still full after N ms". A refusal is an
 *    admission decision of the node, never a tenant fault; the detail says
 *    to retry later (the HTTP server maps it to 429).
 *  - the node's CPUs are committed (node_cpu.h): the same, with
 *    EXEC_REFUSED_NODE_CPU(_TIMEOUT), in the time left of the same wait;
 *    then its memory (node_mem.h): EXEC_REFUSED_NODE_MEM(_TIMEOUT).
 *  - the caller hangs up while it waits in either line (a warm client's
 *    connection closes, ctx->caller_fd): it leaves the line at once, and
 *    the request is booked final, attempt 0, platform_error "the caller
 *    hung up ...; nothing ran" (EXEC_REFUSED_GONE). Like the other
 *    refusals it is the node's admission, never the tenant's fault: no
 *    tenant cause, no pause, no retry; its booking says that the request
 *    arrived and why nothing of it ran.
 *  - first of all, at most once a second per process, orphans of killed
 *    executors are reclaimed and booked (exec_reap_orphans()); a
 *    long-lived executor does it on its own thread instead
 *    (ctx->reap_elsewhere).
 *
 * A deadline missed is the tenant's timeout. Where evidence from outside
 * the sandbox (the node's idle CPU) says the node had no room for the
 * run's share, one confirmation run with guaranteed CPU decides instead
 * (src/exec/exec_confirm.c); its verdict is final. No timeout is ever a
 * platform error: the tenant cannot choose its own cause.
 *
 * Verifier mode and run-once run model-written code, whose failures are
 * the verdict (a reward of 0, a non-zero return code), not faults of the
 * tenant's reward code: they are never retried and never pause the tenant.
 * Only platform errors are retried (same budget; a verifier request's
 * retries come from one pool of max_retries for all its tests, so one
 * request costs at most n_tests + max_retries runs, plus one confirmation
 * run per timed-out test on a node without room). Every sandbox run is
 * booked (non-final), then the request once, final: ok or platform_error.
 *
 * Exit codes (exec_exit_code): ok 0; tenant causes, tenant_paused included, 1;
 * platform_error 2. */
#ifndef SG_EXEC_H
#define SG_EXEC_H
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "telemetry/outcome.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "judge/scores.h"
#include "lib/detail.h"
#include "lib/ids.h"

#define EXEC_DETAIL_MAX     512
#define EXEC_STDERR_EXCERPT 4096         /* bytes of stderr in a result */
#define EXEC_INPUT_MAX      (256u << 20) /* batch / tests file */

/* Why admission refused a request before any sandbox ran (attempt 0). */
enum exec_refusal {
	EXEC_ADMITTED = 0,
	EXEC_REFUSED_PAUSED,      /* tenant_paused: `sandguard tenant pause` */
	EXEC_REFUSED_DISABLED,    /* tenant_paused: "enabled": false */
	EXEC_REFUSED_NO_AGENT,    /* platform_error: require_agent, no agent */
	EXEC_REFUSED_CONCURRENCY, /* platform_error: the tenant's cap is full; retry later */
	EXEC_REFUSED_STATE,       /* platform_error: the node's state could not be read */
	EXEC_REFUSED_DISK,        /* platform_error: the journal's disk is below its reserve */
	/* platform_error: the node's CPUs are committed to running sandboxes
	 * (node_cpu.h, docs/oncall.md): refused at once (on_excess refuse),
	 * or still committed after queue_timeout_ms (on_excess wait). Retry
	 * later; the HTTP server answers 503 with Retry-After. */
	EXEC_REFUSED_NODE_CPU,
	EXEC_REFUSED_NODE_CPU_TIMEOUT,
	/* platform_error: the node's memory is committed likewise (node_mem.h). */
	EXEC_REFUSED_NODE_MEM,
	EXEC_REFUSED_NODE_MEM_TIMEOUT,
	/* platform_error: admitted only after ctx->start_by_ms, when the
	 * run could no longer start in time for its caller. */
	EXEC_REFUSED_LATE,
	/* platform_error: the caller hung up while it waited in an admission
	 * line (ctx->caller_fd); nothing ran, and no one gets the answer. */
	EXEC_REFUSED_GONE,
};

struct exec_build;
struct verify_compile_result;

typedef int (*sandbox_runner)(const struct sandbox_spec *spec, struct sandbox_result *result);

/* Where a mode's sandboxes come from. Without one (ctx->sandboxes NULL)
 * each is prepared when its run is due and destroyed once its last run is
 * booked. The warm executor's pool is one (src/pool/pool.h); so is
 * struct exec_later. Both functions may be called from several threads. */
struct exec_sandboxes {
	/* A sandbox prepared for spec's policy, tenant and exec-in-scratch,
	 * never run in. 0, or -errno with `detail` (a platform error). */
	int (*take)(void *self, const struct sandbox_spec *spec, struct sandbox **sb, char *detail,
		    size_t len);
	/* Its last run is booked: tear it down, now or later. */
	void (*retire)(void *self, struct sandbox *sb);
	void *self;
	/* A sandbox that serves one run is stopped (sandbox_stop()) as soon
	 * as the run is over, before it is booked: struct exec_later. */
	bool stop_after_run;
};

/* Sandboxes prepared on the spot and destroyed by exec_later_finish(),
 * once the result is out (`sandguard exec` prints first). */
struct exec_later {
	pthread_mutex_t lock;
	struct sandbox **list;
	size_t n, cap;
	struct exec_sandboxes src;
};
void exec_later_init(struct exec_later *l);
void exec_later_finish(struct exec_later *l);

/* Who runs what: shared by every mode. */
struct exec_ctx {
	const struct sg_policy *policy;
	const char *tenant;
	const char *run_id;  /* may be NULL */
	char *const *argv;   /* the command; NULL-terminated */
	uint64_t timeout_ms; /* per run; 0 = policy; callers keep it <= the policy's */
	/* CLOCK_MONOTONIC ms: a run whose code cannot start by then is not
	 * started (sandbox_spec.start_by_ms), nor retried; 0 = no bound. */
	uint64_t start_by_ms;
	/* CLOCK_MONOTONIC ms by which a run must end to be of any use to its
	 * caller (serve: what its client waits): a timeout's confirmation
	 * run that cannot end by then is not started. 0 = no bound. */
	uint64_t finish_by_ms;
	struct agent_conn *agent;               /* NULL: no agent */
	const struct exec_sandboxes *sandboxes; /* NULL: prepared on the spot */
	const char *path;    /* "warm" (a long-lived executor) or "cold"; NULL: not said */
	bool reap_elsewhere; /* orphans are reaped on another thread, not at admission */
	sandbox_runner run;  /* tests inject a fake: no sandbox at all */
	/* The caller's connection, watched for a hang-up while the request
	 * waits in an admission line (EXEC_REFUSED_GONE); 0: none (never a
	 * server's connection: fd 0 is its stdin). */
	int caller_fd;
	/* Verifier mode: build the program once first (verify_compile.h);
	 * argv then runs the built program for each test. NULL: none. */
	const struct exec_build *build;
};

/* A batch as the trainer sends it: {"batch_id": "...", "items":
 * [{"prompt": "...", "completion": "..."}, ...]}. Extra fields are kept:
 * the reward program gets the document exactly as given. */
struct exec_batch {
	char *batch_id;
	size_t n_items;
	const char *json; /* the document (not owned) */
	size_t json_len;
};

/* Verifier tests: [{"input": "...", "output": "...", "fn_name"?: "..."}, ...].
 * With fn_name the test is call-based (src/exec/verify_judge.h): input is
 * one JSON argument per line, output the JSON of the return value. */
struct verify_case {
	char *input;
	size_t input_len;
	char *output;
	size_t output_len;
	char *fn_name; /* NULL: a stdin/stdout test */
};

struct verify_cases {
	struct verify_case *v;
	size_t n;
	bool grader_set; /* the request chose a grader; else the policy's */
	uint8_t grader;  /* enum sg_grader */
};

/* Parse and validate. Returns 0, or -EINVAL with `err` saying exactly what
 * is wrong ("<name>:1:15: ..." or "<name>: items[2].completion must be a
 * string, got a number"), or -ENOMEM. A malformed input is the caller's
 * error (usage), never booked. */
int exec_batch_parse(const char *text, size_t len, const char *name, struct exec_batch *out,
		     char *err, size_t err_len);
void exec_batch_free(struct exec_batch *b);
int verify_cases_parse(const char *text, size_t len, const char *name, struct verify_cases *out,
		       char *err, size_t err_len);
void verify_cases_free(struct verify_cases *c);

enum verify_status {
	VERIFY_PASS = 0,
	VERIFY_FAIL, /* wrong answer, or oversized output */
	VERIFY_TIMEOUT,
	VERIFY_CRASH,
	VERIFY_OOM,
	VERIFY_VIOLATION,
	VERIFY_ERROR, /* platform error (after retries): the result has no reward */
};
const char *verify_status_name(enum verify_status s);

struct verify_result {
	enum verify_status status;
	enum sg_cause cause; /* of the test's last run */
	int rule;
	uint64_t wall_ms;
	char detail[128]; /* "line 2 differs", "exited with code 1" */
	bool warm;        /* its last run was a warm interpreter's child */
	bool confirmed;   /* its last run was a timeout's confirmation run */
};

/* One sandbox run of a request, for the result: each attempt's sandbox
 * id joins the result to the kernel's events and the journal. */
struct exec_attempt {
	uint32_t attempt;        /* 1-based */
	int test;                /* verifier mode: the test's index; else -1 */
	char sandbox[SG_ID_BUF]; /* "" when setup failed before it had an id */
	enum sg_cause cause;
	bool confirmation; /* a timeout's confirmation run (exec_confirm.c) */
};

struct exec_attempts {
	struct exec_attempt *v; /* in the order they ran */
	size_t n;
};

/* Append one (0, or -ENOMEM, logged: the result then lacks it). */
int exec_attempts_add(struct exec_attempts *a, uint32_t attempt, int test, bool confirmation,
		      const char *sandbox, enum sg_cause cause);
void exec_attempts_free(struct exec_attempts *a);
/* [{"attempt": 1, "sandbox": "3f2a9c01-4242", "cause": "tenant_timeout"
 *   (, "test": 0 in verifier mode)}, ...] */
json_t *exec_attempts_json(const struct exec_attempts *a);

/* A batch or verifier result: what `sandguard exec` prints. */
struct exec_result {
	char batch_id[SG_ID_BUF];  /* as given, or made up (verifier mode) */
	char run_id[SG_ID_BUF];    /* the trainer's run, or "" */
	struct exec_attempts runs; /* each sandbox run, with its id */
	enum sg_cause cause;
	int rule;       /* enum sg_rule for a policy violation, else -1 */
	double *scores; /* batch mode, cause ok: n_scores scores */
	size_t n_scores;
	struct score_stats stats;
	char detail[EXEC_DETAIL_MAX];
	/* Batch mode: why the last attempt ran cold though the policy asks for
	 * a warm interpreter (one could not start lately), else ""; verifier
	 * mode: why a test did (the first such test's). */
	char warm_fallback[200];
	uint32_t attempts;         /* sandbox runs (0: refused before any) */
	enum exec_refusal refusal; /* why, when attempts is 0 */
	uint64_t wall_ms;
	char *err; /* stderr of the last run (capped by the sandbox) */
	size_t err_len;
	bool paused_tenant; /* this batch paused the tenant */
	/* verifier mode */
	bool verify;
	struct verify_result *tests;
	size_t n_tests;
	int reward;                            /* 0 or 1; -1 when there is none (failed) */
	const char *path;                      /* ctx->path */
	struct verify_compile_result *compile; /* with ctx->build (verify_compile.h) */
};

int exec_batch(const struct exec_ctx *ctx, const struct exec_batch *batch, struct exec_result *res);
/* batch_id names the request in bookings; may be NULL (one is made up). */
int exec_verify(const struct exec_ctx *ctx, const char *batch_id, const struct verify_cases *tests,
		struct exec_result *res);
void exec_result_free(struct exec_result *res);

/* The result object: {"tenant", "run_id", "batch_id", "status", "cause",
 * "rule", "scores", "detail", "attempts", "sandboxes" (exec_attempts_json),
 * "wall_ms", "stats" (ok batches),
 * "stderr" (excerpt, EXEC_STDERR_EXCERPT bytes), "path" (when the caller
 * said: "warm" or "cold"), and in verifier mode "tests": [{"status",
 * "wall_ms", "detail", "interpreter" ("warm": its last run was a warm
 * interpreter's child, else "cold")}], "reward"}. */
json_t *exec_result_json(const char *tenant, const struct exec_result *res);
int exec_exit_code(enum sg_cause cause);

/* ---- run once (HTTP /run_code) ------------------------------------- */

struct exec_run_request {
	const char *request_id; /* booked as the batch id; may be NULL */
	const void *stdin_data;
	size_t stdin_len;
	uint64_t memory_mb; /* 0 = policy; a larger value is lowered to it */
	const struct sandbox_file *files;
	size_t n_files;
	const char *const *fetch;
	size_t n_fetch;
	bool allow_exec_in_scratch; /* compiled languages */
};

struct exec_run_result {
	enum sg_cause cause; /* ok when the program ran and exited 0 */
	int rule;
	bool timed_out;       /* SB_TIMEOUT */
	bool has_return_code; /* it exited: return_code is valid */
	int return_code;
	int signal; /* SB_SIGNALED: the signal, else 0 */
	char *out;  /* raw bytes, NUL-terminated, capped by output_bytes */
	size_t out_len;
	bool out_truncated;
	char *err;
	size_t err_len;
	bool err_truncated;
	struct sandbox_fetched *fetched; /* in request order */
	size_t n_fetched;
	uint64_t wall_ms;    /* of the last run */
	uint64_t timeout_ms; /* effective limits of the run */
	uint64_t memory_mb;
	uint32_t attempts;
	struct exec_attempts runs; /* each sandbox run, with its id */
	/* Why it was refused, when attempts is 0; EXEC_REFUSED_LATE also when
	 * the last attempt could not start by ctx->start_by_ms (booked as a
	 * platform error, not retried): either way its caller answers "too
	 * late". */
	enum exec_refusal refusal;
	char detail[EXEC_DETAIL_MAX];
	const char *path; /* ctx->path */
};

/* Runs ctx->argv once (retrying only platform errors), with the same
 * admission and booking as a batch. ctx->timeout_ms above the policy's is
 * lowered to it. Returns 0 with *res filled (whatever the cause), or
 * -ENOMEM. */
int exec_run(const struct exec_ctx *ctx, const struct exec_run_request *req,
	     struct exec_run_result *res);
void exec_run_result_free(struct exec_run_result *res);

/* ---- booking ------------------------------------------------------ */

/* Book one outcome: one record appended to the outcome journal (see
 * telemetry/journal.h and journal_record.h for the record), durable when
 * this returns 0. Every mode books through this, and so do the front ends
 * for what they refuse before a mode runs (an unloadable policy), and the
 * orphan reaper for an attempt whose executor died.
 *
 * The outcome id makes a booking idempotent: the ledger counts the first
 * record of an id and ignores any later one. It is `outcome_id` when set,
 * else the run's attempt id (its sandbox's id, or <id>.<n> for a later run
 * in the same sandbox), else a fresh random id ("o-<16 hex>"): a refusal
 * before any run, a verifier request's summary.
 *
 * Returns 0, or -errno when the record could not be written (logged as an
 * error); the caller then turns its result into a platform error
 * (exec_book_failed), never returns it as if booked. */
struct canary_report;
struct exec_booking {
	const char *mode;     /* "batch", "verify", "run", "session" */
	const char *batch_id; /* a session's: its session id */
	uint32_t attempt;     /* 0: refused before any run */
	bool final;
	enum sg_cause cause;
	int rule;
	uint64_t wall_ms;
	const struct sandbox_result *run; /* NULL when nothing ran */
	const struct score_stats *stats;  /* NULL unless there are scores */
	bool invalid;                     /* failed the schema gate */
	const char *detail;
	bool retried;            /* another attempt follows this one */
	bool superseded;         /* a warm run its cold run replaces (SIGSYS, exec_verify.c) */
	enum sg_confirm confirm; /* a timeout's confirmation (exec_confirm.c) */
	uint32_t test;           /* verifier mode: 1 + the test's index; 0 = none */
	uint32_t step;           /* session mode: the step, 1-based; 0 = none */
	const char *session_end; /* a session's final: how it ended */
	const struct sandbox_spec *spec; /* what ran (its limits and policy); NULL: ctx's */
	const char *outcome_id;          /* NULL: the run's sandbox id, or a fresh one */
	const char *sandbox;             /* when run is NULL: the sandbox it was about (a reaper) */
	uint64_t cgroup_id;              /* likewise */
	const struct canary_report *canary; /* the batch's probes (canary.h); NULL: none */
	const char *artifact_refused;       /* a pinned artifact refused (artifact.h): why */
	/* NULL: synced before exec_book() returns. Else written only, and
	 * synced by the group's commit, which the request makes before it
	 * returns its result (a verifier's records, journal.h). */
	struct journal_group *group;
};
int exec_book(const struct exec_ctx *ctx, const struct exec_booking *b);

/* Book an admission refusal (attempt 0, final, no run) and return its
 * cause: `cause`, or platform_error when it could not be booked (then
 * `detail` says why, exec_book_failed()). */
enum sg_cause exec_book_refusal(const struct exec_ctx *ctx, const char *mode, const char *batch_id,
				enum sg_cause cause, uint64_t wall_ms, char *detail, size_t len);

/* A result whose booking failed with `err` becomes a platform error:
 * returns SG_CAUSE_PLATFORM_ERROR and rewrites `detail` ("platform error:
 * the outcome could not be written to the journal <dir>: ...; the result
 * is withheld"), or, when `cause` was a platform error already, appends
 * why it is not booked. */
enum sg_cause exec_book_failed(int err, enum sg_cause cause, char *detail, size_t len);

/* The node's CPU (mem false: limits.cpu) or memory (limits.memory_mb) of
 * one sandbox of ctx's tenant, in admission's first-come line, waiting at
 * most wait_ms: SG_CAUSE_OK with *c held (node_cpu_release() gives it
 * back), or SG_CAUSE_PLATFORM_ERROR with *refusal and `detail`. A batch's
 * admission takes both; a session's step its CPU. */
struct node_cpu_commit;
enum sg_cause exec_admit_node(const struct exec_ctx *ctx, bool mem, uint64_t wait_ms,
			      struct node_cpu_commit *c, enum exec_refusal *refusal, char *detail,
			      size_t detail_len);

/* Reclaim what killed executors left (cgroups, scratch, processes) and
 * book each orphaned attempt once, final, platform_error "executor died",
 * through exec_book() with the agent connection `agent` (may be NULL).
 * Returns how many were reaped, or -errno. */
int exec_reap_orphans(struct agent_conn *agent);

/* Whether the journal's disk is below its reserve (or cannot be checked):
 * then `detail` says so, naming the path, and new runs are refused. */
bool exec_journal_full(char *detail, size_t len);

/* ---- an environment's session (exec_session.c; src/session/ keeps them) */

/* One step: a run in the session's own sandbox, whose scratch persists. */
struct exec_step {
	const char *session_id; /* booked as the record's batch_id */
	uint32_t step;          /* 1-based */
	char *const *argv;
	const void *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;        /* the step's deadline */
	const char *event_batch_id; /* the batch id its events carry: "<session>/<step>" */
};

struct exec_step_result {
	enum sg_cause cause; /* ok for a step that ran to its end, whatever its status */
	int rule;
	bool exited, timed_out;
	int exit_code, signal;
	char *out, *err; /* malloc'd; the caller frees them */
	size_t out_len, err_len;
	bool out_truncated, err_truncated;
	uint64_t wall_ms, cpu_ms;
	bool ends;         /* the sandbox cannot serve another step: the session ends */
	bool session_over; /* the session has ended after it (ends, or a budget it used up) */
	bool final_booked; /* and this step's record was its final (the record could not follow) */
	char outcome_id[SG_ID_BUF];
	char detail[EXEC_DETAIL_MAX];
	char end_detail[EXEC_DETAIL_MAX]; /* why the session ends, when not the cause's */
};

/* How a session ended, for its final record. */
struct exec_session_end {
	const char *session_id, *sandbox_id;
	uint64_t cgroup_id;
	uint32_t steps; /* steps it ran */
	enum sg_cause cause;
	int rule;
	const char *how; /* "closed", "idle", "lifetime", "cpu", "policy", "oom", "platform" */
	uint64_t wall_ms;
	const char *detail;
};

/* The session's in-flight record, owing its final from now on. 0, or
 * -errno with `detail` (the session cannot be made). */
int exec_session_open(const struct exec_ctx *ctx, const char *session_id,
		      struct sb_run_record *owed, char *detail, size_t len);
/* Run one step in sb and book it; then ready sb for the next step unless
 * res->ends. Returns 0 (what happened is in res). */
int exec_session_step(const struct exec_ctx *ctx, struct sandbox *sb, struct sb_run_record *owed,
		      const struct exec_step *st, struct exec_step_result *res);
/* Book the session's final record and drop its in-flight record (left for
 * a reaper when the booking fails). 0 or -errno. */
int exec_session_close(const struct exec_ctx *ctx, struct sb_run_record *owed,
		       const struct exec_session_end *end);

/* The session's final was booked already (a step's record, when the
 * in-flight record could not follow): drop the record. */
void exec_session_close_booked(struct sb_run_record *owed);


#endif
