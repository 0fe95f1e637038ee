/* What a sandbox run means, and why: the classifier that gives each run its
 * cause (exec_classify), the retry rule (exec_retryable), and the
 * sentences each journal record keeps for on-call (`sandguard explain`:
 * exec_reason, exec_decision), said from the same evidence the classifier
 * saw (see src/exec/exec.h for the rules). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "exec_internal.h"
#include "lib/rule_names.h"

uint32_t exec_attempt_budget(const struct sg_policy *p)
{
	return 1 + p->max_retries;
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

bool exec_retryable(enum sg_failure_mode mode, enum sg_cause cause)
{
	if (cause == SG_CAUSE_PLATFORM_ERROR)
		return true;
	if (mode != SG_FAILURE_RETRY)
		return false;
	switch (cause) {
	case SG_CAUSE_TENANT_TIMEOUT:
	case SG_CAUSE_TENANT_CRASH:
	case SG_CAUSE_TENANT_OOM:
	case SG_CAUSE_TENANT_BAD_OUTPUT:
		return true;
	default: /* ok, and a policy violation: final at once */
		return false;
	}
}

/* Admission refused it: nothing ran. */
static void refusal_reason(enum sg_cause cause, char *buf, size_t len)
{
	if (cause == SG_CAUSE_TENANT_PAUSED)
		snprintf(buf, len,
			 "refused at admission, before any sandbox ran: the tenant is paused or "
			 "its policy disables it");
	else if (cause == SG_CAUSE_TENANT_POLICY_VIOLATION) /* src/exec/artifact.h */
		snprintf(buf, len,
			 "refused before any sandbox ran: a pinned artifact did not match its "
			 "digest, was revoked or was not pinned (see the detail); never retried");
	else
		snprintf(buf, len,
			 "refused at admission, before any sandbox ran: the node could not take it "
			 "(see the detail); an admission refusal is never the tenant's fault");
}

/* What ended the sandbox, as the classifier saw it. */
static void run_reason(const struct exec_booking *b, const struct sg_limits *lim,
		       uint64_t timeout_ms, char *buf, size_t len)
{
	const struct sandbox_result *r = b->run;
	const char *rule = rule_name(b->rule) ?: "unknown";
	char sig[32];

	switch (r->end) {
	case SB_EXITED:
		if (r->exit_code != 0)
			snprintf(buf, len,
				 "the program exited with code %d by itself: no deadline, memory "
				 "limit or agent kill ended it",
				 r->exit_code);
		else if (b->cause == SG_CAUSE_OK)
			snprintf(buf, len, "the program exited 0%s",
				 !strcmp(b->mode, "batch")
					 ? " and its stdout passed the schema gate (a JSON array "
					   "of one finite number per item)"
					 : "");
		else if (b->cause == SG_CAUSE_TENANT_BAD_OUTPUT)
			snprintf(buf, len,
				 "the program exited 0, but its stdout failed the schema gate (a "
				 "JSON array of one finite number per item, at most output_bytes)");
		else
			snprintf(buf, len,
				 "the program exited 0; its output could not be judged "
				 "on our side");
		return;
	case SB_SIGNALED:
		snprintf(
			buf, len,
			"the program died of signal %s, which sandguard did not send: no deadline, "
			"memory limit or agent kill was recorded",
			exec_signal_name(r->signal, sig, sizeof(sig)));
		return;
	case SB_TIMEOUT:
		snprintf(buf, len,
			 "the program was still running when its deadline of %llu ms "
			 "(limits.timeout_ms) passed, so the executor killed the sandbox",
			 (unsigned long long)timeout_ms);
		if (b->confirm == SG_CONFIRM_RUN)
			detail_append(buf, len,
				      ", in its confirmation run: a fresh sandbox with the highest "
				      "CPU weight of its tenant's, under the CPU admission had "
				      "committed to it, so the timeout is final");
		return;
	case SB_OOM:
		snprintf(buf, len,
			 "the kernel's OOM killer acted in the sandbox's memory cgroup "
			 "(limits.memory_mb %llu)",
			 (unsigned long long)(lim ? lim->memory_mb : 0));
		return;
	case SB_OUTPUT_OVERSIZE:
		snprintf(buf, len, "stdout passed limits.output_bytes (%llu bytes)",
			 (unsigned long long)(lim ? lim->output_bytes : 0));
		return;
	case SB_FORK_LIMIT:
		snprintf(buf, len,
			 "the sandbox hit its task limit (limits.max_tasks %u, max_forks %u): the "
			 "kernel refused a fork; a fork limit is a policy violation, rule fork",
			 lim ? lim->max_tasks : 0, lim ? lim->max_forks : 0);
		return;
	case SB_RULE_TRIPPED:
		snprintf(
			buf, len,
			"the kernel recorded, in the task's own system call, a violation of its %s "
			"rule (the policy's action for %s is kill); the agent's kill is not on "
			"record, so the kernel's record decides: a policy violation, never retried",
			rule, rule);
		return;
	case SB_KILLED_BY_AGENT:
		snprintf(buf, len,
			 "the agent killed the sandbox for its %s rule (the policy's action for %s "
			 "is kill): a policy violation is the code's own doing, never retried",
			 rule, rule);
		return;
	case SB_POLICY_REFUSED:
		snprintf(buf, len,
			 "the policy's %s rule refused the run's own command (no exec.allow glob "
			 "matches it): a policy violation, never retried",
			 rule);
		return;
	}
	snprintf(buf, len, "the sandbox ended in a way the executor does not know");
}

void exec_reason(const struct exec_booking *b, const struct sg_limits *lim, uint64_t timeout_ms,
		 char *buf, size_t len)
{
	buf[0] = '\0';
	if (!b->run && b->attempt == 0) {
		refusal_reason(b->cause, buf, len);
		return;
	}
	if (!b->run) /* a verifier request's summary, an orphan */
		return;
	if (!b->run->end) {
		snprintf(buf, len,
			 "the sandbox could not be set up or run (the tenant's program may never "
			 "have started): a platform error, never the tenant's");
		return;
	}
	run_reason(b, lim, timeout_ms, buf, len);
	if (outcome_class(mode_from_name(b->mode), b->cause) == SG_CLASS_VERDICT)
		detail_append(buf, len,
			      "; in %s mode the program is model-written code, so this is its "
			      "verdict (class verdict), nobody's fault",
			      b->mode);
}

void exec_decision(const struct exec_booking *b, const struct sg_policy *p, char *buf, size_t len)
{
	bool batch = !strcmp(b->mode, "batch");
	uint32_t budget = exec_attempt_budget(p);

	buf[0] = '\0';
	if (!strcmp(b->mode, "session")) { /* a step decides nothing; the end is the session's */
		if (b->final)
			snprintf(buf, len, "final: the session ended (%s)",
				 b->session_end ? b->session_end : "unknown");
		return;
	}
	if (b->attempt == 0 || b->cause == SG_CAUSE_OK || (!batch && b->final && !b->run))
		return;
	if (b->superseded) {
		snprintf(
			buf, len,
			"retried: killed by SIGSYS in a warm interpreter, where an IPC object or a "
			"refused syscall kills a test that a cold run would let run; the test runs "
			"again cold, and that run's verdict is the test's");
	} else if (b->confirm == SG_CONFIRM_NEXT) {
		snprintf(buf, len,
			 "retried: the node had no room for the run's CPU share (the detail has "
			 "the node's idle time), so the timeout is confirmed once by a run with "
			 "guaranteed CPU, whose verdict is final");
	} else if (b->retried) {
		snprintf(buf, len, "retried: %s is retried %s (attempt %u of %u)",
			 cause_name(b->cause),
			 b->cause == SG_CAUSE_PLATFORM_ERROR ? "in every failure mode"
							     : "under failure mode retry",
			 b->attempt, budget);
	} else if (b->confirm == SG_CONFIRM_RUN && b->cause == SG_CAUSE_TENANT_TIMEOUT) {
		snprintf(buf, len, "final: a confirmation run's timeout is final");
	} else if (b->confirm == SG_CONFIRM_UNADMITTED) {
		snprintf(buf, len,
			 "final: a confirmation run was due but could not run in time (the detail "
			 "says why): the timeout stands");
	} else if (!batch && b->cause != SG_CAUSE_PLATFORM_ERROR) {
		snprintf(buf, len, "final: model-written code is judged on its first run");
	} else if (batch ? exec_retryable(p->failure, b->cause)
			 : b->cause == SG_CAUSE_PLATFORM_ERROR) {
		snprintf(buf, len,
			 "final: the attempt budget is spent (%u attempts: 1 + "
			 "failure.max_retries)",
			 budget);
	} else if (b->cause == SG_CAUSE_TENANT_POLICY_VIOLATION) {
		snprintf(buf, len, "final: a policy violation is never retried");
	} else {
		snprintf(buf, len,
			 "final: failure mode %s ends the batch at its first tenant fault%s",
			 failure_mode_name(p->failure),
			 p->failure == SG_FAILURE_PAUSE ? " and pauses the tenant" : "");
	}
}
