/* Booking: each attempt's, refusal's and orphan's record in the outcome
 * journal (see src/exec/exec.h for the rules), and the journal's disk
 * checked before anything runs that could not be booked. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "canary.h"
#include "exec_internal.h"
#include "lib/clock.h"
#include "lib/first_trace.h"
#include "lib/log.h"
#include "sandbox/sandbox_record.h"
#include "telemetry/journal.h"
#include "telemetry/journal_record.h"

/* Book what an orphaned run record owes (see exec_reap_orphans()): its
 * run's attempt, or the batch's final with no run of its own. The ids are
 * the record's, so what the executor booked before it died stays one. */
static int book_orphan(const struct sb_record *rec, const char *id, bool final, void *arg)
{
	struct sandbox_result run = { .rule = -1 };
	struct exec_ctx ctx = { .tenant = rec->tenant,
				.run_id = rec->run_id[0] ? rec->run_id : NULL,
				.agent = arg };
	bool of_run = !strcmp(id, rec->outcome);
	uint64_t now = clock_ms(CLOCK_REALTIME);

	snprintf(run.sandbox_id, sizeof(run.sandbox_id), "%s", of_run ? rec->sandbox : "");
	snprintf(run.attempt_id, sizeof(run.attempt_id), "%s", id);
	return exec_book(&ctx,
			 &(struct exec_booking){
				 .mode = rec->mode[0] ? rec->mode : "batch",
				 .batch_id = rec->batch_id,
				 .attempt = rec->attempt,
				 .final = final,
				 .cause = SG_CAUSE_PLATFORM_ERROR,
				 .rule = -1,
				 .wall_ms = now > rec->started_ms ? now - rec->started_ms : 0,
				 .run = &run,
				 .outcome_id = id,
				 .session_end = final && !strcmp(rec->mode, "session") ? "platform"
										       : NULL,
				 .detail = of_run ? "executor died"
						  : "executor died before it booked the "
						    "batch's final outcome" });
}

int exec_reap_orphans(struct agent_conn *agent)
{
	return sb_records_reap(book_orphan, agent);
}

/* The outcome of a booking, ready for the journal. */
int exec_booking_id(const struct exec_booking *b, const char *owed, char *id, size_t len)
{
	int err = 0;

	if (b->outcome_id && *b->outcome_id)
		snprintf(id, len, "%s", b->outcome_id);
	else if (b->run && b->run->attempt_id[0])
		snprintf(id, len, "%s", b->run->attempt_id);
	else if (b->run && b->run->sandbox_id[0])
		snprintf(id, len, "%s", b->run->sandbox_id);
	else if (owed)
		snprintf(id, len, "%s", owed);
	else if ((err = journal_new_id(id, len)))
		id[0] = '\0';
	return err;
}

static int outcome_of(const struct exec_ctx *ctx, const struct exec_booking *b,
		      struct sg_outcome *o)
{
	const char *sandbox = b->run ? b->run->sandbox_id : b->sandbox;
	int mode = mode_from_name(b->mode), err;

	memset(o, 0, sizeof(*o));
	if (mode < 0)
		return -EINVAL;
	o->mode = mode;
	snprintf(o->tenant, sizeof(o->tenant), "%s", ctx->tenant);
	snprintf(o->run_id, sizeof(o->run_id), "%s", ctx->run_id ? ctx->run_id : "");
	snprintf(o->batch_id, sizeof(o->batch_id), "%s", b->batch_id ? b->batch_id : "");
	snprintf(o->sandbox, sizeof(o->sandbox), "%s", sandbox ? sandbox : "");
	o->cgroup_id = b->run ? b->run->cgroup_id : b->cgroup_id;
	if ((err = exec_booking_id(b, NULL, o->id, sizeof(o->id))))
		return err;
	o->cause = b->cause;
	o->rule = b->rule;
	o->attempt = b->attempt;
	o->final = b->final;
	o->confirm = b->confirm;
	o->wall_ms = b->wall_ms;
	if (b->run) {
		o->cpu_known = b->run->cpu_known;
		o->cpu_us = b->run->cpu_us;
		o->mem_peak_known = b->run->mem_peak_known;
		o->mem_peak_bytes = b->run->mem_peak_bytes;
	}
	if (b->stats) {
		o->n_scores = (uint32_t)b->stats->n;
		o->score_mean = b->stats->mean;
		o->score_var = b->stats->variance;
		o->constant = b->stats->constant;
	}
	o->invalid = b->invalid;
	if (b->artifact_refused)
		snprintf(o->artifact_refused, sizeof(o->artifact_refused), "%s",
			 b->artifact_refused);
	if (b->canary) {
		o->canary_probes = b->canary->probes;
		o->canary_failed = b->canary->failed;
		o->nondeterministic = b->canary->nondeterministic;
		snprintf(o->canary_detail, sizeof(o->canary_detail), "%s", b->canary->detail);
	}
	o->ts_ms = clock_ms(CLOCK_REALTIME);
	o->started_ms = o->ts_ms > o->wall_ms ? o->ts_ms - o->wall_ms : 0;
	o->pid = (int)getpid();
	return 0;
}

/* The policy file as an absolute path, so that a reader in another
 * directory finds it ("<embedded>" stays as it is). */
static const char *policy_path(const struct sg_policy *p, char *buf, size_t len)
{
	char cwd[PATH_MAX];

	if (!p)
		return NULL;
	if (p->source[0] == '/' || p->source[0] == '<' || !getcwd(cwd, sizeof(cwd)))
		return p->source;
	snprintf(buf, len, "%s/%s", cwd, p->source);
	return buf;
}

/* What the record says beyond the outcome: why, what it ran under. */
static void notes_of(const struct exec_ctx *ctx, const struct exec_booking *b,
		     struct journal_notes *n, char *reason, char *decision, char *path, size_t len)
{
	const struct sg_policy *p = b->spec ? b->spec->policy : ctx->policy;
	uint64_t timeout = b->spec && b->spec->timeout_ms ? b->spec->timeout_ms
			   : p                            ? p->limits.timeout_ms
							  : 0;

	exec_reason(b, p ? &p->limits : NULL, timeout, reason, len);
	decision[0] = '\0';
	if (p)
		exec_decision(b, p, decision, len);
	*n = (struct journal_notes){ .detail = b->detail,
				     .reason = reason,
				     .decision = decision,
				     .policy = policy_path(p, path, len),
				     .uid = b->run ? b->run->uid : 0,
				     .init_pid = b->run ? b->run->init_pid : 0,
				     .limits = p && b->run ? &p->limits : NULL,
				     .timeout_ms = timeout,
				     .test = b->test,
				     .step = b->step,
				     .session_end = b->session_end,
				     .cpu_ms = b->step && b->run && b->run->cpu_known
						       ? (int64_t)b->run->cpu_ms
						       : -1 };
}

int exec_book(const struct exec_ctx *ctx, const struct exec_booking *b)
{
	struct sg_outcome o;
	struct journal_notes notes;
	struct journal j;
	char *line = NULL, reason[PATH_MAX], decision[PATH_MAX], path[PATH_MAX];
	size_t len;
	int ret;

	notes_of(ctx, b, &notes, reason, decision, path, sizeof(reason));
	if (!(ret = outcome_of(ctx, b, &o)) && !(ret = journal_init(&j, NULL)) &&
	    !(ret = journal_record_encode_notes(&o, &notes, &line, &len))) {
		first_trace_now(); /* a warm client is told first (lib/first_trace.h) */
		ret = b->group ? journal_group_append(&j, b->group, line, len, NULL)
			       : journal_append(&j, line, len, NULL);
	}
	free(line);
	if (ret)
		sg_error("exec: cannot book %s/%s attempt %u (%s) in the outcome journal %s: %s",
			 ctx->tenant, b->batch_id ? b->batch_id : "", b->attempt,
			 cause_name(b->cause), j.dir, strerror(-ret));
	return ret;
}

enum sg_cause exec_book_failed(int err, enum sg_cause cause, char *detail, size_t len)
{
	struct journal j;

	journal_init(&j, NULL);
	if (cause == SG_CAUSE_PLATFORM_ERROR)
		detail_append(detail, len, "; not booked in the journal %s: %s", j.dir,
			      strerror(-err));
	else
		snprintf(detail, len,
			 "platform error: the outcome could not be written to the journal %s: "
			 "%s; the result is withheld, retry later",
			 j.dir, strerror(-err));
	return SG_CAUSE_PLATFORM_ERROR;
}

enum sg_cause exec_book_refusal(const struct exec_ctx *ctx, const char *mode, const char *batch_id,
				enum sg_cause cause, uint64_t wall_ms, char *detail, size_t len)
{
	int err = exec_book(ctx, &(struct exec_booking){ .mode = mode,
							 .batch_id = batch_id,
							 .attempt = 0,
							 .final = true,
							 .cause = cause,
							 .rule = -1,
							 .wall_ms = wall_ms,
							 .detail = detail });

	return err ? exec_book_failed(err, cause, detail, len) : cause;
}

bool exec_journal_full(char *detail, size_t len)
{
	struct journal j;
	uint64_t free_bytes;
	char why[PATH_MAX + 96];
	int ret = journal_init(&j, NULL);

	if (!ret)
		ret = journal_space(&j, &free_bytes);
	if (ret == -ENOSPC) {
		journal_space_describe(&j, free_bytes, why, sizeof(why));
		snprintf(detail, len,
			 "platform error: the outcome journal's disk is full: %s; new runs are "
			 "refused until space is freed",
			 why);
		return true;
	}
	if (ret) {
		snprintf(detail, len, "platform error: cannot check the outcome journal %s: %s",
			 j.dir, strerror(-ret));
		return true;
	}
	return false;
}
