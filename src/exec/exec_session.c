/* An environment's session as the executor books it (src/session/ keeps
 * the sessions): one journal record per step, one final record for the
 * session, and an in-flight run record from the session's creation to
 * that final, so that an executor killed at any instant leaves exactly one
 * final for the next one's reaper to book (src/sandbox/sandbox_record.h:
 * between two steps the record owes the session's final alone; during a
 * step, the step's attempt too). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "exec_internal.h"
#include "lib/log.h"

int exec_session_open(const struct exec_ctx *ctx, const char *session_id,
		      struct sb_run_record *owed, char *detail, size_t len)
{
	exec_owed_init(owed, ctx, "session", session_id, true);
	return exec_owed_final_first(owed, detail, len);
}

/* Whether the run left the sandbox able to serve another step: an agent
 * kill, a tripped kill-class rule, the pids limit and OOM end the session
 * with that cause (docs/environments.md), as a platform error does. */
static bool ends_session(int rc, const struct sandbox_result *r)
{
	if (rc < 0)
		return true;
	switch (r->end) {
	case SB_KILLED_BY_AGENT:
	case SB_RULE_TRIPPED:
	case SB_FORK_LIMIT:
	case SB_OOM:
		return true;
	default:
		return false;
	}
}

static void take_output(struct exec_step_result *res, struct sandbox_result *r)
{
	res->out = r->out;
	res->out_len = r->out_len;
	res->out_truncated = r->out_truncated;
	res->err = r->err;
	res->err_len = r->err_len;
	res->err_truncated = r->err_truncated;
	r->out = r->err = NULL;
}

int exec_session_step(const struct exec_ctx *ctx, struct sandbox *sb, struct sb_run_record *owed,
		      const struct exec_step *st, struct exec_step_result *res)
{
	struct sandbox_spec spec;
	struct sandbox_result r;
	struct exec_booking b;
	char outcome_id[SG_ID_BUF];
	int rc, err;

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	exec_spec_init(ctx, ctx->policy, "session",
		       st->event_batch_id ? st->event_batch_id : st->session_id, st->timeout_ms,
		       &spec);
	spec.argv = st->argv;
	spec.stdin_data = st->stdin_data;
	spec.stdin_len = st->stdin_len;
	spec.attempt = st->step;
	spec.cold = true;
	spec.record = owed;
	spec.command_is_tenants = true; /* the tool call's own argv */
	rc = sandbox_exec(sb, &spec, &r);
	res->cause = exec_classify(rc, &r, &spec, &res->rule, res->detail, sizeof(res->detail));
	/* A step that ran to its end is the tool call's answer whatever its
	 * exit status: the status goes back to the agent, nobody's fault. */
	if (rc >= 0 && r.end == SB_EXITED) {
		res->cause = SG_CAUSE_OK;
		res->detail[0] = '\0';
		if (r.exit_code)
			snprintf(res->detail, sizeof(res->detail), "exited with status %d",
				 r.exit_code);
	}
	res->ends = ends_session(rc, &r);
	b = (struct exec_booking){ .mode = "session",
				   .batch_id = st->session_id,
				   .attempt = st->step,
				   .step = st->step,
				   .cause = res->cause,
				   .rule = res->rule,
				   .wall_ms = r.wall_ms,
				   .run = &r,
				   .spec = &spec,
				   .detail = res->detail };
	exec_owed_before_booking(owed, &b, outcome_id, sizeof(outcome_id));
	if (b.final) { /* the record could not follow: this booking is the session's end */
		res->ends = true;
		res->final_booked = true;
		b.session_end = "platform";
	}
	err = exec_book(ctx, &b);
	if (err) {
		res->cause = exec_book_failed(err, res->cause, res->detail, sizeof(res->detail));
		res->rule = -1;
		res->ends = true;
	}
	snprintf(res->outcome_id, sizeof(res->outcome_id), "%s", outcome_id);
	res->timed_out = rc >= 0 && r.end == SB_TIMEOUT;
	res->exited = rc >= 0 && r.end == SB_EXITED;
	res->exit_code = res->exited ? r.exit_code : 0;
	res->signal = rc >= 0 && r.end == SB_SIGNALED ? r.signal : 0;
	res->wall_ms = r.wall_ms;
	res->cpu_ms = r.cpu_known ? r.cpu_ms : 0;
	take_output(res, &r);
	sandbox_result_free(&r);
	if (!res->ends) {
		char why[256];

		err = sandbox_reset(sb, why, sizeof(why));
		if (err) { /* e.g. a process of the step outlived it */
			res->ends = true;
			snprintf(res->end_detail, sizeof(res->end_detail),
				 "the sandbox cannot serve another step: %s", why);
		}
	}
	return 0;
}

int exec_session_close(const struct exec_ctx *ctx, struct sb_run_record *owed,
		       const struct exec_session_end *end)
{
	struct exec_booking b = { .mode = "session",
				  .batch_id = end->session_id,
				  .attempt = end->steps + 1,
				  .final = true,
				  .cause = end->cause,
				  .rule = end->rule,
				  .wall_ms = end->wall_ms,
				  .sandbox = end->sandbox_id,
				  .cgroup_id = end->cgroup_id,
				  .session_end = end->how,
				  .detail = end->detail };
	char outcome_id[SG_ID_BUF];
	int err;

	exec_owed_before_booking(owed, &b, outcome_id, sizeof(outcome_id));
	err = exec_book(ctx, &b);
	if (err) {
		sg_error("session %s: its final record could not be booked (%s); the in-flight "
			 "record stays for a reaper",
			 end->session_id, strerror(-err));
		owed->lk.abandon = true; /* unlocked, not deleted: an orphan */
	}
	exec_owed_done(owed);
	return err;
}

void exec_session_close_booked(struct sb_run_record *owed)
{
	exec_owed_done(owed);
}
