/* What the executor's modes share: the meaning of a sandbox run, orphans
 * and booking (see src/exec/exec.h for the rules). */
#include <errno.h>
#include <pthread.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "control/enforcer.h"
#include "control/agent_client.h"
#include "canary.h"
#include "exec_internal.h"
#include "lib/log.h"
#include "telemetry/journal.h"
#include "telemetry/journal_record.h"
#include "lib/clock.h"
#include "lib/first_trace.h"
#include "lib/rule_names.h"
#include "lib/ticket_queue.h"
#include "node/node_cpu.h"
#include "sandbox/sandbox_record.h"


void detail_append(char *detail, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(detail, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(detail + used, len - used, fmt, ap);
	va_end(ap);
}

uint64_t exec_timeout_ms(const struct exec_ctx *ctx)
{
	uint64_t policy = ctx->policy->limits.timeout_ms;

	return ctx->timeout_ms && ctx->timeout_ms < policy ? ctx->timeout_ms : policy;
}

uint32_t exec_attempt_budget(const struct sg_policy *p)
{
	return 1 + p->max_retries;
}

void exec_spec_init(const struct exec_ctx *ctx, const struct sg_policy *policy, const char *mode,
		    const char *batch_id, uint64_t timeout_ms, struct sandbox_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->policy = policy;
	spec->mode = mode;
	spec->attempt = 1;
	spec->tenant = ctx->tenant;
	spec->run_id = ctx->run_id;
	spec->batch_id = batch_id;
	spec->argv = ctx->argv;
	spec->timeout_ms = timeout_ms;
	spec->start_by_ms = ctx->start_by_ms;
	spec->enforcer = sg_kernel_enforcer(ctx->agent);
}

const char *exec_signal_name(int sig, char *buf, size_t len)
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;

	if (abbrev)
		snprintf(buf, len, "SIG%s (%d)", abbrev, sig);
	else
		snprintf(buf, len, "%d", sig);
	return buf;
}

static enum sg_cause classify_end(const struct sandbox_result *r, const struct sandbox_spec *spec,
				  int *rule, char *detail, size_t detail_len);

enum sg_cause exec_classify(int rc, const struct sandbox_result *r, const struct sandbox_spec *spec,
			    int *rule, char *detail, size_t detail_len)
{
	enum sg_cause cause;

	*rule = -1;
	detail[0] = '\0';
	if (rc < 0) {
		snprintf(detail, detail_len, "platform error: %s",
			 r->detail[0] ? r->detail : strerror(-rc));
		return SG_CAUSE_PLATFORM_ERROR;
	}
	cause = classify_end(r, spec, rule, detail, detail_len);
	/* Where the kernel's record could not be read, say so rather than
	 * let the guess stand unmarked (issue 32). */
	if (r->record_err && (cause == SG_CAUSE_TENANT_CRASH || cause == SG_CAUSE_TENANT_TIMEOUT))
		detail_append(detail, detail_len,
			      "%sthe kernel's record of the sandbox could not be read (%s): a "
			      "violation it holds was not weighed",
			      detail[0] ? "; " : "", strerror(-r->record_err));
	return cause;
}

static enum sg_cause classify_end(const struct sandbox_result *r, const struct sandbox_spec *spec,
				  int *rule, char *detail, size_t detail_len)
{
	const struct sg_limits *lim = &spec->policy->limits;
	char sig[32];

	switch (r->end) {
	case SB_EXITED:
		if (r->exit_code == 0)
			return SG_CAUSE_OK;
		snprintf(detail, detail_len, "exited with code %d", r->exit_code);
		return SG_CAUSE_TENANT_CRASH;
	case SB_SIGNALED:
		snprintf(detail, detail_len, "killed by signal %s",
			 exec_signal_name(r->signal, sig, sizeof(sig)));
		return SG_CAUSE_TENANT_CRASH;
	case SB_TIMEOUT:
		exec_timeout_detail(r, spec, detail, detail_len);
		return SG_CAUSE_TENANT_TIMEOUT;
	case SB_OOM:
		snprintf(detail, detail_len, "memory limit of %llu MB exceeded",
			 (unsigned long long)lim->memory_mb);
		return SG_CAUSE_TENANT_OOM;
	case SB_OUTPUT_OVERSIZE:
		snprintf(detail, detail_len, "oversized: stdout exceeded the cap of %llu bytes",
			 (unsigned long long)lim->output_bytes);
		return SG_CAUSE_TENANT_BAD_OUTPUT;
	case SB_FORK_LIMIT:
		*rule = SG_RULE_FORK;
		snprintf(detail, detail_len, "fork limit reached (max_tasks %u, max_forks %u)",
			 lim->max_tasks, lim->max_forks);
		return SG_CAUSE_TENANT_POLICY_VIOLATION;
	case SB_POLICY_REFUSED:
		*rule = r->rule >= 0 && r->rule < SG_RULE__COUNT ? r->rule : SG_RULE_EXEC;
		snprintf(detail, detail_len, "the %s rule refused the run's command (%s)",
			 rule_name(*rule) ?: "unknown",
			 spec->argv && spec->argv[0] ? spec->argv[0] : "?");
		return SG_CAUSE_TENANT_POLICY_VIOLATION;
	case SB_RULE_TRIPPED:
		*rule = r->rule >= 0 && r->rule < SG_RULE__COUNT ? r->rule : -1;
		snprintf(detail, detail_len,
			 "its %s rule tripped (the kernel's record; the policy's action is kill), "
			 "and no agent kill is on record: the agent did not answer in time",
			 rule_name(r->rule) ?: "unknown");
		if (*rule < 0) /* a record naming no rule: no violation to book */
			return SG_CAUSE_PLATFORM_ERROR;
		return SG_CAUSE_TENANT_POLICY_VIOLATION;
	case SB_KILLED_BY_AGENT:
		if (r->rule >= 0 && r->rule < SG_RULE__COUNT) {
			*rule = r->rule;
			snprintf(detail, detail_len, "killed by the agent: %s rule",
				 rule_name(r->rule) ?: "unknown");
		} else {
			snprintf(detail, detail_len, "killed by the agent (rule not reported)");
		}
		if (r->detail[0])
			detail_append(detail, detail_len, ": %s", r->detail);
		return SG_CAUSE_TENANT_POLICY_VIOLATION;
	}
	snprintf(detail, detail_len, "platform error: sandbox ended in an unknown way (%d)",
		 (int)r->end);
	return SG_CAUSE_PLATFORM_ERROR;
}

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
		ret = journal_append(&j, line, len, NULL);
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
