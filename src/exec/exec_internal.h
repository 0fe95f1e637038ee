/* Shared by the executor's modes (exec_batch.c, exec_verify.c, exec_run.c,
 * verify_compile.c): classification, admission, the attempt loop, booking.
 * Not an API: see src/exec/exec.h. */
#ifndef SG_EXEC_INTERNAL_H
#define SG_EXEC_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "exec.h"
#include "node/tenant_state.h"


/* The deadline of one run: ctx->timeout_ms (or the policy's), never above
 * the policy's. */
uint64_t exec_timeout_ms(const struct exec_ctx *ctx);

/* 1 + max_retries: the attempt budget of every mode. */
uint32_t exec_attempt_budget(const struct sg_policy *p);

/* A spec with what every mode sets, for attempt 1 (the caller counts
 * spec->attempt up); the caller adds stdin, files, ... */
void exec_spec_init(const struct exec_ctx *ctx, const struct sg_policy *policy, const char *mode,
		    const char *batch_id, uint64_t timeout_ms, struct sandbox_spec *spec);

/* The sandbox a mode's runs go into: one per attempt, or, in verifier
 * mode, one per worker, reset between its tests (exec_sandbox.c). */
struct exec_box {
	struct sandbox *sb; /* NULL: none yet */
};

/* One run of spec: in box's sandbox, reset since its last run, or in one
 * taken (ctx->sandboxes) or prepared now; ctx->run instead when set (a
 * test's fake). Returns what sandbox_run() returns. */
int exec_box_run(const struct exec_ctx *ctx, struct exec_box *box, const struct sandbox_spec *spec,
		 struct sandbox_result *r);

/* box's sandbox will run nothing more (batch mode: a fresh one per
 * attempt), its run not booked yet: one prepared on the spot is stopped
 * now (sandbox_stop()), so that its teardown overlaps the booking. */
void exec_box_over(const struct exec_ctx *ctx, struct exec_box *box);

/* Done with box's sandbox (its runs are booked): retired. */
void exec_box_done(const struct exec_ctx *ctx, struct exec_box *box);

/* ---- the attempts of one run (exec_attempts.c) ---------------------- */

/* One attempt, as exec_attempt() hands it to the mode's hooks. */
struct exec_try {
	uint32_t attempt;                /* 1-based */
	struct exec_box *box;            /* the sandbox it ran in */
	const struct sandbox_spec *spec; /* what ran (spec->confirm: a confirmation) */
	int rc;                          /* exec_box_run()'s */
	struct sandbox_result r;         /* freed once take() has had it */
	enum sg_cause cause;             /* judge()'s, and what is booked */
	int rule;
	char detail[EXEC_DETAIL_MAX];
	bool unadmitted; /* judge(): a confirmation was due and cannot be had */
	bool confirm;    /* a confirmation run follows (admitted) */
	bool again;      /* another attempt follows */
	bool unbooked;   /* its booking failed: what ran is withheld */
};

/* What a mode does that the others do not; self is the mode's own. */
struct exec_mode_ops {
	/* Before each run, a last word on the spec; NULL: none. */
	void (*before)(void *self, struct sandbox_spec *spec);
	/* What the run means: t->cause, t->rule, t->detail (and the mode's
	 * own verdict); it may rewrite t->rc and t->r to what is booked. */
	void (*judge)(void *self, struct exec_try *t);
	/* Whether another attempt follows, with t->confirm known: the mode's
	 * retry rule, and a confirmation unless the mode says otherwise. */
	bool (*again)(void *self, struct exec_try *t);
	/* The mode's fields of the attempt's booking (test, stats, ...);
	 * NULL: none. */
	void (*book)(void *self, const struct exec_try *t, struct exec_booking *b);
	/* After the booking, every attempt (t->again: not the last): what
	 * the mode keeps of it; it may take t->r's buffers. */
	void (*take)(void *self, struct exec_try *t);
};

/* One batch, request, verifier test or compile: what exec_attempt() runs. */
struct exec_attempt_plan {
	const struct exec_ctx *ctx;
	struct sandbox_spec *spec;    /* its record (spec->record) follows the bookings */
	const char *batch_id;         /* booked as */
	struct exec_box *box;         /* the worker's (a verifier's); NULL: one per attempt */
	struct node_cpu_commit *line; /* a confirmation's CPU; the caller releases it */
	struct exec_attempts *runs;   /* where each run is noted; NULL: take() notes it */
	bool bad_output_invalid;      /* a tenant_bad_output is booked invalid */
	struct journal_group *group;  /* the bookings' (exec_booking.group); NULL: none */
	const struct exec_mode_ops *ops;
	void *self;
};

/* Run, judge, book, until an attempt is the last: a confirmation run
 * after a timeout the node may have caused, the mode's retries, and no
 * more once a booking fails. */
void exec_attempt(const struct exec_attempt_plan *plan);

/* The id b is booked under: b->outcome_id, else its run's attempt id,
 * else its run's sandbox id, else `owed` (the final a run record owes
 * without a run of its own; NULL: none), else a fresh one. 0, or -errno
 * (no fresh id could be made; `id` is then empty). */
int exec_booking_id(const struct exec_booking *b, const char *owed, char *id, size_t len);

/* The batch's run record (exec_owed.c, states in
 * src/sandbox/sandbox_record.h): what a reaper books if this executor
 * dies. Every mode keeps one from its first run to its final booking;
 * owes_final is false for a verifier's tests (the request owes it). */
void exec_owed_init(struct sb_run_record *rr, const struct exec_ctx *ctx, const char *mode,
		    const char *batch_id, bool owes_final);

/* A request whose final is booked without a run of its own (the
 * verifier's): the record, owing a fresh final id, written before any
 * run. 0, or -errno with `detail` set (a platform error). */
int exec_owed_final_first(struct sb_run_record *rr, char *detail, size_t len);

/* Before exec_book(b): sets b->outcome_id (in `id`) and rewrites the
 * record to owe b's id and the batch's final (b's id when b->final, else
 * a fresh one). When it cannot, and the record owes the final, b becomes
 * that final (b->final set, b->retried cleared): no retry follows. */
void exec_owed_before_booking(struct sb_run_record *rr, struct exec_booking *b, char *id,
			      size_t len);

/* A verifier test is booked: the worker's record owes nothing and stays,
 * held, for its next test (sb_run_record_idle()). */
void exec_owed_idle(struct sb_run_record *rr);

/* The final is booked (or cannot be): the record goes. */
void exec_owed_done(struct sb_run_record *rr);

/* What a run means (exec.h's table), before any schema gate: a clean exit
 * 0 is SG_CAUSE_OK. rc is sandbox_run()'s return value. */
enum sg_cause exec_classify(int rc, const struct sandbox_result *r, const struct sandbox_spec *spec,
			    int *rule, char *detail, size_t detail_len);

/* A timeout (rc, r) whose node had no room for the run's share, by
 * evidence from outside the sandbox: its test, batch or run gets one
 * confirmation run (spec->confirm), whose verdict is final. Never for a
 * confirmation run itself. */
bool exec_confirm_wanted(int rc, const struct sandbox_result *r, const struct sandbox_spec *spec);
/* Before a confirmation is booked as coming: its place in the node's
 * confirmation line (node_cpu_commit_confirmation()), waiting at most
 * the policy's queue_timeout_ms and never past the caller's finish_by.
 * false, with `detail` saying why, when it cannot run: the timeout then
 * stands as the tenant's (booked SG_CONFIRM_UNADMITTED and counted). The
 * caller releases `line` after the confirmation's last attempt. */
bool exec_confirm_admit(const struct exec_ctx *ctx, const struct sandbox_spec *spec,
			struct node_cpu_commit *line, char *detail, size_t len);
/* What a booking says of confirmation: `confirm` (one follows), else
 * `unadmitted` (one was due but cannot run), else whether this run is the
 * confirmation (spec->confirm). */
enum sg_confirm exec_confirm_state(bool confirm, bool unadmitted, const struct sandbox_spec *spec);
/* The next attempt is the confirmation run (when `start`): cold, and
 * favoured (exec_box_run()); it stays so for any platform retry of it. */
void exec_confirm_next(const struct exec_ctx *ctx, struct sandbox_spec *spec, bool start);
/* A missed deadline's detail: always the tenant's timeout (a
 * confirmation run settles it first where one is owed); the run's CPU and
 * the node's idle time are for the reader. */
void exec_timeout_detail(const struct sandbox_result *r, const struct sandbox_spec *spec,
			 char *detail, size_t detail_len);
/* That evidence in words, for the detail and the journal. */
void exec_confirm_describe(const struct sandbox_result *r, const struct sandbox_spec *spec,
			   char *buf, size_t len);

/* "SIGABRT (6)" */
const char *exec_signal_name(int sig, char *buf, size_t len);

/* Whether a failed batch attempt gets another one (budget permitting):
 * platform errors in every failure mode; timeouts, crashes, OOMs and bad
 * output under "retry"; never a policy violation. */
bool exec_retryable(enum sg_failure_mode mode, enum sg_cause cause);

/* For the journal record (exec_classify.c): why booking `b` got its cause,
 * from the evidence the classifier saw ("" when there is nothing to say),
 * and why it was retried or final. */
void exec_reason(const struct exec_booking *b, const struct sg_limits *lim, uint64_t timeout_ms,
		 char *buf, size_t len);
void exec_decision(const struct exec_booking *b, const struct sg_policy *p, char *buf, size_t len);


/* Admission: the journal's disk, paused or disabled tenant, agent requirement, then one
 * concurrency slot (waiting per the policy). Returns SG_CAUSE_OK with
 * *slot held, or the refusal's cause with *refusal and `detail` set. */
enum sg_cause exec_admit(const struct exec_ctx *ctx, struct tenant_slot *slot,
			 enum exec_refusal *refusal, char *detail, size_t detail_len);

/* One more slot and its node CPU, only if both are free right now
 * (verifier mode's extra parallel tests). */
bool exec_admit_more(const struct exec_ctx *ctx, struct tenant_slot *slot);

#endif
