/* What ended a run, and what it left: the verdict (the run's own evidence,
 * then the agent's word) and the outputs (see src/sandbox/sandbox.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/cgroup.h"
#include "lib/log.h"
#include "sandbox_internal.h"
#include "sandbox_io.h"
#include "sandbox_run.h"

#define AGENT_VERDICT_MS 200 /* bounds the round trip, and a kill notice in flight */
#define LEAF_SETTLE_MS   100 /* a killed run's tasks leaving its cgroup */

static uint64_t since(uint64_t now, uint64_t base)
{
	return now > base ? now - base : 0;
}

int sb_run_fail(struct run *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->res->detail, sizeof(r->res->detail), fmt, ap);
	va_end(ap);
	return err;
}

/* Fallback mode cannot refuse an exec that already happened: a `deny` of
 * the exec rule kills the task at its exec instead (tasks.bpf.c, as a
 * `kill` does when no agent is there to empty the sandbox). So a main
 * that died of a SIGKILL nothing of ours explains (no deadline, no limit,
 * no agent kill), in a run whose first violation the kernel recorded was
 * an exec the rule refuses (deny or kill: `log` lets the exec happen and
 * kills nothing), was refused its command, or killed itself after one of
 * its commands was: the tenant's either way, as in LSM mode, where the
 * same execve fails with EACCES (read_start_reports()). */
static bool refused_at_exec(const struct sandbox *sb, const struct sandbox_result *res)
{
	return res->end == SB_SIGNALED && res->signal == SIGKILL && sb_exec_refusal_recorded(sb);
}

bool sb_exec_refusal_recorded(const struct sandbox *sb)
{
	int rule = -1;

	return sb->enrolled && sb->policy.action[SG_RULE_EXEC] != SG_POLICY_LOG &&
	       sb->enforcer.ops->first_rule(sb->enforcer.ctx, sb->cg.id, &rule) == 1 &&
	       rule == SG_RULE_EXEC;
}

/* What ended the run. Our own kills (deadline, stdout) are certain, and
 * so is a run that ended past its deadline; else main's fate, explained
 * by the OOM and pids counters when it failed; and the agent's word on top
 * of everything, since its kill is what a SIGKILL or a timeout may really
 * have been. Returns 0, or a platform error (sandbox_run.h). */
int sb_run_decide(struct run *r, int pump_end)
{
	struct sandbox *sb = r->sb;
	struct sandbox_result *res = r->res;
	bool reported = r->done_read && r->done.main_ran, settled = false, quiet, node_oom = false;
	/* No report from init: it was killed, and main with it. */
	int status = reported ? r->done.wait_status : SIGKILL, rule = -1, verdict, tripped;

	if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		res->signal = WTERMSIG(status);
	res->rule = -1;
	if (r->exec_failed) {
		/* The tenant's command could not be executed (sandbox_start.c):
		 * a shell's 127 for one not found, 126 for one found but not
		 * runnable. */
		res->end = SB_EXITED;
		res->exit_code = r->exec_failed == ENOENT || r->exec_failed == ENOTDIR ? 127 : 126;
		res->signal = 0;
	} else if (pump_end == SB_PUMP_OVERSIZE) {
		res->end = SB_OUTPUT_OVERSIZE;
	} else if (pump_end == SB_PUMP_DEADLINE || res->wall_ms > r->timeout_ms) {
		res->end = SB_TIMEOUT;
	} else if (WIFEXITED(status) && res->exit_code == 0) {
		res->end = SB_EXITED;
	} else if (since(sb_cgroup_oom_kills(&sb->cg), sb->oom_base) > 0) {
		/* The sandbox's own limit, or the node's memory (an ancestor's
		 * limit, the global OOM killer, which picks the biggest task:
		 * often a reward program well within its limit). Only the
		 * first is the tenant's; the second is the node's overload,
		 * unless the run broke a rule too (below). */
		node_oom = !sb_cgroup_mem_limit_reached(&sb->cg, sb->limit_base);
		res->end = SB_OOM;
		res->rule = SG_RULE_MEMORY;
	} else if (since(sb_cgroup_pids_max_hits(&sb->cg), sb->pids_base) > 0) {
		res->end = SB_FORK_LIMIT;
		res->rule = SG_RULE_FORK;
	} else {
		res->end = WIFSIGNALED(status) ? SB_SIGNALED : SB_EXITED;
	}
	/* The run's cgroup empty first (bounded): a task killed inside a
	 * system call books its violation when the call ends, and neither the
	 * kernel's record nor the agent's verdict may be read before it. Then
	 * the agent's word only where the kernel saw a violation: its round
	 * trip (and a busy agent's delay, up to AGENT_VERDICT_MS) is not on
	 * the path of a run that broke no rule. Not in a warm interpreter's
	 * sandbox: it is kept for other batches' calls, and the verdict is
	 * what makes the agent read this call's last events before the next
	 * call's ids replace its own (the agent tells each event with the ids
	 * in force when it reads it). */
	if (sb_enforcer_has_agent(&sb->enforcer) || sb->enrolled)
		settled = sb_cgroup_leaf_settle(&sb->leaf, LEAF_SETTLE_MS) == 0;
	/* No violation on record: nothing for the agent or the record to say. */
	quiet = settled && sb->enrolled &&
		sb->enforcer.ops->quiet(sb->enforcer.ctx, sb->cg.id) == 1;
	if (sb_enforcer_has_agent(&sb->enforcer)) {
		verdict = quiet && sb_interp_channel(sb) < 0
				  ? 0
				  : sb->enforcer.ops->kill_verdict(sb->enforcer.ctx, sb->cg.id,
								   &rule, AGENT_VERDICT_MS);
		if (verdict == 1) {
			res->end = SB_KILLED_BY_AGENT;
			res->rule = rule;
			sb->broken = true;
			return 0;
		}
		if (verdict < 0)
			sg_debug("sandbox %s: no kill verdict from the agent: %s", sb->id,
				 strerror(-verdict));
	}
	/* The kernel's own record, booked in the task's own system call
	 * whether or not the agent is alive to act on it: a kill-class rule
	 * tripped is the run's violation, whatever else ended it (the agent
	 * stopped, killed or restarting before its kill, or killed before it
	 * recorded the kill: then its kill reads as a SIGKILL, or as init
	 * killed from outside; or no agent answered when the sandbox was
	 * made, and the executor enrolled it in the pinned maps itself, where
	 * the kernel kills the forker and a new agent the rest). Not reused:
	 * its record holds the trip. */
	tripped = sb->enrolled && !quiet
			  ? sb->enforcer.ops->trip_rule(sb->enforcer.ctx, sb->cg.id, &rule)
			  : 0;
	if (tripped == 1) {
		res->end = SB_RULE_TRIPPED;
		res->rule = rule;
		sb->broken = true;
		return 0;
	}
	res->record_err = tripped < 0 ? tripped : 0;
	if (r->exec_refused || (reported && refused_at_exec(sb, res))) {
		res->end = SB_POLICY_REFUSED;
		res->rule = SG_RULE_EXEC;
		/* A session's next step starts from a record enrolled afresh
		 * (sandbox_reset()): its refused tool call is an error it can
		 * handle, not the episode's end. */
		sb->broken = !sb->keep_scratch;
		return 0;
	}
	/* An OOM kill the sandbox's own limit did not cause, in a run that
	 * broke no rule the agent killed it for: the node's. */
	if (node_oom)
		return sb_run_fail(
			r, -ENOMEM,
			"sandbox %s: the kernel's OOM killer killed in it, though it never "
			"reached its own memory limit (%llu MB): the node, or a cgroup "
			"above the sandbox, ran out of memory",
			sb->id, (unsigned long long)sb->policy.limits.memory_mb);
	/* The call's parent is the platform's: its death is never scored,
	 * but for the OOM killer's. Only the parent and the call use the
	 * sandbox's memory during a call, so an OOM kill then is the
	 * tenant's memory, whichever process the killer took: a call can
	 * make it take the parent (memory no process maps, a memfd's or the
	 * scratch's, from a small process), which must not turn its OOM into
	 * a platform_error that is retried and never blamed (24-warm-attacks
	 * `warm-call-oom-of-its-parent-is-the-tenants`). Nor are our own
	 * kills (the deadline, the output cap) and a fork limit the call's
	 * cgroup hit: certain whatever the parent says or withholds, and the
	 * tenant's; a parent that holds back its DONE must not turn them into
	 * a run that fails (24-warm-attacks `warm-preload-cannot-hang-a-call`).
	 * Any other end without DONE fails the run, and exec_box_run() runs
	 * the call again cold: nothing the parent reports is evidence. */
	if (!reported && sb_interp_channel(sb) >= 0 && res->end != SB_OOM &&
	    res->end != SB_TIMEOUT && res->end != SB_OUTPUT_OVERSIZE && res->end != SB_FORK_LIMIT) {
		/* Not again for a while: preloaded code that ends its parent
		 * whenever a call fails would make every attempt a retried
		 * platform_error, the tenant's failure never its own. Its
		 * retries and next calls run cold (24-warm-attacks
		 * `warm-preload-cannot-dodge-blame`). */
		sb->interp_ops->refuse(sb, "its warm interpreter died during a call");
		return sb_run_fail(r, -ECHILD,
				   "sandbox %s: its warm interpreter died during the call", sb->id);
	}
	if (!reported && res->end != SB_TIMEOUT && res->end != SB_OUTPUT_OVERSIZE &&
	    res->end != SB_OOM && res->end != SB_FORK_LIMIT)
		return sb_run_fail(
			r, -ECHILD,
			"sandbox %s: its init was killed from outside (no agent kill, no "
			"limit hit%s)",
			sb->id,
			res->record_err ? ", and the kernel's record could not be read" : "");
	return 0;
}

int sb_run_take_outputs(struct run *r, struct sb_pump *pump)
{
	const struct sandbox_spec *s = r->spec;
	struct sandbox_result *res = r->res;
	int dirfd, err = 0;
	size_t i;

	res->out = pump->out.data ? pump->out.data : strdup("");
	res->out_len = pump->out.len;
	res->out_truncated = pump->out.truncated;
	res->err = pump->err.data ? pump->err.data : strdup("");
	res->err_len = pump->err.len;
	res->err_truncated = pump->err.truncated;
	pump->out.data = pump->err.data = NULL;
	if (!res->out || !res->err)
		return sb_run_fail(r, -ENOMEM, "out of memory");
	if (!s->n_fetch)
		return 0;
	res->fetched = calloc(s->n_fetch, sizeof(*res->fetched));
	if (!res->fetched)
		return sb_run_fail(r, -ENOMEM, "out of memory");
	res->n_fetched = s->n_fetch;
	dirfd = r->sb->scratch_fd >= 0
			? r->sb->scratch_fd
			: open(r->sb->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return sb_run_fail(r, -errno, "cannot open the scratch %s to fetch %s: %s",
				   r->sb->scratch, s->fetch[0], strerror(errno));
	for (i = 0; i < s->n_fetch && !err; i++)
		err = sb_scratch_fetch(dirfd, s->fetch[i], r->sb->slot.uid,
				       s->policy->limits.output_bytes, &res->fetched[i]);
	if (dirfd != r->sb->scratch_fd)
		close(dirfd);
	return err ? sb_run_fail(r, err, "cannot fetch %s from the scratch: %s", s->fetch[i - 1],
				 strerror(-err))
		   : 0;
}

void sb_run_free_outputs(struct sandbox_result *res)
{
	free(res->out);
	free(res->err);
	for (size_t i = 0; i < res->n_fetched; i++) {
		free(res->fetched[i].path);
		free(res->fetched[i].data);
	}
	free(res->fetched);
	res->out = res->err = NULL;
	res->out_len = res->err_len = 0;
	res->fetched = NULL;
	res->n_fetched = 0;
}

void sandbox_result_free(struct sandbox_result *res)
{
	if (!res)
		return;
	sb_run_free_outputs(res);
	sb_record_release(&res->record);
	memset(res, 0, sizeof(*res));
	res->rule = -1;
}
