/* The sessions of one server: a table, the calls on a session, its budgets
 * (src/session/session.h; docs/environments.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "node/tenant_state.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "sandbox/sandbox_scratch.h"
#include "session_files.h"
#include "session_internal.h"
#include "session_kernel.h"
#include "telemetry/journal_record.h"
#include "control/agent_shared.h"

static struct exec_ctx ctx_of(struct session_mgr *m, const struct session *s)
{
	return (struct exec_ctx){ .policy = s->policy,
				  .tenant = s->tenant,
				  .run_id = s->run_id[0] ? s->run_id : NULL,
				  .agent = agent_shared_get(m->agent) };
}

static bool owned_by(const struct session *s, const struct session_owner *who)
{
	return !strcmp(s->tenant, who->tenant) &&
	       !strcmp(s->run_id, who->run_id ? who->run_id : "");
}

/* The owner's session `id`, referenced; NULL when there is none. */
struct session *session_find(struct session_mgr *m, const struct session_owner *who, const char *id)
{
	struct session *s;

	pthread_mutex_lock(&m->lock);
	for (s = m->head; s; s = s->next)
		if (!strcmp(s->id, id) && owned_by(s, who)) {
			s->refs++;
			break;
		}
	pthread_mutex_unlock(&m->lock);
	return s;
}

int session_scratch_fd(const struct session *s)
{
	return open(sandbox_scratch_path(s->sb), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void session_unref(struct session_mgr *m, struct session *s)
{
	bool last;

	pthread_mutex_lock(&m->lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&m->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->policy);
	free(s);
}

/* Take the session's turn: -EBUSY while another call of it runs, -ESRCH
 * once it has ended, or now ends because its lifetime is over (a busy
 * session must not outlive it: the reaper skips busy ones). */
int session_take_turn(struct session_mgr *m, struct session *s, char *detail, size_t len)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);

	if (pthread_mutex_trylock(&s->lock)) {
		snprintf(detail, len, "session %s is busy: another call of it is under way", s->id);
		return -EBUSY;
	}
	if (!s->ended && now - s->created_ms >= (uint64_t)s->policy->session.max_lifetime_s * 1000)
		session_end_locked(m, s, "lifetime", SG_CAUSE_OK, -1,
				   "the policy's session.max_lifetime_s passed");
	if (s->ended) {
		pthread_mutex_unlock(&s->lock);
		snprintf(detail, len, "session %s has ended (%s)", s->id, s->end_how);
		return -ESRCH;
	}
	s->last_ms = now;
	s->busy = true;
	return 0;
}

void session_give_turn(struct session *s)
{
	s->last_ms = clock_ms(CLOCK_MONOTONIC);
	s->busy = false;
	pthread_mutex_unlock(&s->lock);
}

void info_of_session(const struct session *s, struct session_info *info)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);

	memset(info, 0, sizeof(*info));
	snprintf(info->id, sizeof(info->id), "%s", s->id);
	snprintf(info->tenant, sizeof(info->tenant), "%s", s->tenant);
	snprintf(info->run_id, sizeof(info->run_id), "%s", s->run_id);
	snprintf(info->sandbox, sizeof(info->sandbox), "%s", s->sb ? sandbox_id(s->sb) : "");
	info->kernel = session_kernel_name(s->kernel);
	info->steps = s->steps;
	info->cpu_ms = s->cpu_ms;
	info->age_ms = now - s->created_ms;
	info->idle_ms = now > s->last_ms ? now - s->last_ms : 0;
}

/* End it, with its turn held: book the final, tear the sandbox down, take
 * it out of the table. Idempotent. */
void session_end_locked(struct session_mgr *m, struct session *s, const char *how,
			enum sg_cause cause, int rule, const char *why)
{
	struct exec_ctx ctx = ctx_of(m, s);
	char detail[EXEC_DETAIL_MAX];

	if (s->ended)
		return;
	s->ended = true;
	snprintf(s->end_how, sizeof(s->end_how), "%s", how);
	snprintf(detail, sizeof(detail), "session %s after %u steps: %s", how, s->steps, why);
	if (!s->final_booked)
		exec_session_close(&ctx, &s->owed,
				   &(struct exec_session_end){
					   .session_id = s->id,
					   .sandbox_id = s->sb ? sandbox_id(s->sb) : NULL,
					   .steps = s->steps,
					   .cause = cause,
					   .rule = rule,
					   .how = how,
					   .wall_ms = clock_ms(CLOCK_MONOTONIC) - s->created_ms,
					   .detail = detail });
	else
		exec_session_close_booked(&s->owed);
	if (s->sb)
		sandbox_destroy(s->sb);
	s->sb = NULL;
	node_cpu_release(&s->mem);
	node_cpu_release(&s->seat);
	pthread_mutex_lock(&m->lock);
	for (struct session **p = &m->head; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			m->live--;
			s->refs--; /* the table's */
			break;
		}
	pthread_mutex_unlock(&m->lock);
	sg_info("session %s (tenant %s): %s", s->id, s->tenant, detail);
}

/* A step's end, as the session's: a rule, OOM, a platform error. */
static void end_after_step(struct session_mgr *m, struct session *s,
			   const struct exec_step_result *r)
{
	const char *how = r->cause == SG_CAUSE_TENANT_POLICY_VIOLATION ? "policy"
			  : r->cause == SG_CAUSE_TENANT_OOM            ? "oom"
								       : "platform";
	enum sg_cause cause = r->cause == SG_CAUSE_OK || r->cause == SG_CAUSE_TENANT_TIMEOUT ||
					      r->cause == SG_CAUSE_TENANT_CRASH
				      ? SG_CAUSE_PLATFORM_ERROR
				      : r->cause;

	s->final_booked = r->final_booked;
	session_end_locked(m, s, how, cause, cause == r->cause ? r->rule : -1,
			   r->end_detail[0] ? r->end_detail : r->detail);
}

void session_run_step(struct session_mgr *m, struct session *s, const struct exec_step *st_in,
		      struct exec_step_result *res)
{
	struct exec_ctx ctx = ctx_of(m, s);
	struct exec_step st = *st_in;
	uint64_t budget_ms = (uint64_t)s->policy->session.cpu_seconds * 1000;
	char batch[SG_ID_BUF];

	st.session_id = s->id;
	st.step = s->steps + 1;
	/* The events of the step name it: "<session>/<step>". */
	snprintf(batch, sizeof(batch), "%s/%u", s->id, st.step);
	st.event_batch_id = batch;
	uint64_t life_ms = (uint64_t)s->policy->session.max_lifetime_s * 1000,
		 age_ms = clock_ms(CLOCK_MONOTONIC) - s->created_ms;

	if (!st.timeout_ms)
		st.timeout_ms = s->policy->session.step_timeout_ms
					? s->policy->session.step_timeout_ms
					: s->policy->limits.timeout_ms;
	/* No step runs past the session's lifetime (session_take_turn()
	 * made sure some is left). */
	if (age_ms < life_ms && st.timeout_ms > life_ms - age_ms)
		st.timeout_ms = life_ms - age_ms;
	exec_session_step(&ctx, s->sb, &s->owed, &st, res);
	s->steps = st.step;
	s->cpu_ms += res->cpu_ms;
	if (res->ends)
		end_after_step(m, s, res);
	else if (s->cpu_ms >= budget_ms)
		session_end_locked(m, s, "cpu", SG_CAUSE_TENANT_TIMEOUT, -1,
				   "its steps used the policy's session.cpu_seconds");
	res->session_over = s->ended;
}

/* The node's CPU for one step, in the same first-come line as every
 * run's (exec_admit_node()), waiting at most the policy's
 * queue_timeout_ms: so a tenant's sessions can never together take CPU
 * that admission promised other tenants' runs (and their timeouts'
 * confirmations). Refused: -EAGAIN (a 503), nothing ran, nothing booked. */
static int hold_node_cpu(struct session_mgr *m, struct session *s, struct node_cpu_commit *c,
			 char *detail, size_t len)
{
	struct exec_ctx ctx = ctx_of(m, s);
	enum exec_refusal why;

	if (exec_admit_node(&ctx, false, s->policy->limits.queue_timeout_ms, c, &why, detail,
			    len) == SG_CAUSE_OK)
		return 0;
	return why == EXEC_REFUSED_NODE_CPU || why == EXEC_REFUSED_NODE_CPU_TIMEOUT ? -EAGAIN
										    : -EIO;
}

int session_exec(struct session_mgr *m, const struct session_owner *who, const char *id,
		 char *const *argv, const char *code, size_t code_len, const struct exec_step *st,
		 struct exec_step_result *res, struct session_info *info, char *detail, size_t len)
{
	struct session *s = session_find(m, who, id);
	struct exec_step step = *st;
	struct node_cpu_commit cpu;
	char paused[256];
	int err;

	memset(res, 0, sizeof(*res));
	if (!s) {
		snprintf(detail, len, "no session %s of tenant %s and this run", id, who->tenant);
		return -ENOENT;
	}
	if ((err = session_take_turn(m, s, detail, len)))
		goto out;
	/* A step that could not be booked must not run (the batches' rule). */
	if (exec_journal_full(detail, len)) {
		err = -ENOSPC;
		goto give;
	}
	if (tenant_paused(s->tenant, paused, sizeof(paused)) > 0) {
		snprintf(detail, len, "tenant %s is paused (%s): no new steps", s->tenant, paused);
		err = -EPERM;
		goto give;
	}
	if (!argv) {
		char *const *kargv = session_kernel_argv(s->kernel);
		int scratch;

		if (!kargv) {
			snprintf(detail, len, "session %s has no kernel: send a command", id);
			err = -EINVAL;
			goto give;
		}
		scratch = session_scratch_fd(s);
		err = scratch < 0
			      ? -errno
			      : session_kernel_cell(scratch, code, code_len, sandbox_uid(s->sb));
		if (scratch >= 0)
			close(scratch);
		if (err) {
			snprintf(detail, len, "cannot hand the code to the kernel: %s",
				 strerror(-err));
			goto give;
		}
		argv = kargv;
	}
	step.argv = argv;
	if ((err = hold_node_cpu(m, s, &cpu, detail, len)))
		goto give;
	session_run_step(m, s, &step, res);
	node_cpu_release(&cpu);
	info_of_session(s, info);
	err = 0;
give:
	session_give_turn(s);
out:
	session_unref(m, s);
	return err;
}

/* The owner's session with its turn taken, and its scratch open: 0, or
 * -errno with `detail` (nothing held). */
static int open_turn(struct session_mgr *m, const struct session_owner *who, const char *id,
		     struct session **out, int *scratch, char *detail, size_t len)
{
	struct session *s = session_find(m, who, id);
	int err;

	if (!s) {
		snprintf(detail, len, "no session %s of tenant %s and this run", id, who->tenant);
		return -ENOENT;
	}
	err = session_take_turn(m, s, detail, len);
	if (!err) {
		*scratch = session_scratch_fd(s);
		if (*scratch >= 0) {
			*out = s;
			return 0;
		}
		err = -errno;
		snprintf(detail, len, "cannot open session %s's scratch: %s", id, strerror(errno));
		session_give_turn(s);
	}
	session_unref(m, s);
	return err;
}

static void close_turn(struct session_mgr *m, struct session *s, int scratch)
{
	close(scratch);
	session_give_turn(s);
	session_unref(m, s);
}

int session_put(struct session_mgr *m, const struct session_owner *who, const char *id,
		const struct sandbox_file *files, size_t n, char *detail, size_t len)
{
	struct session *s;
	int scratch, err = open_turn(m, who, id, &s, &scratch, detail, len);

	if (err)
		return err;
	for (size_t i = 0; i < n && !err; i++) {
		err = session_file_put(scratch, files[i].path, files[i].data, files[i].len,
				       files[i].mode ? files[i].mode : 0644, sandbox_uid(s->sb));
		if (err)
			snprintf(detail, len, "cannot write %s into session %s: %s", files[i].path,
				 id,
				 err == -EINVAL ? "not a scratch-relative path" : strerror(-err));
	}
	close_turn(m, s, scratch);
	return err;
}

int session_get(struct session_mgr *m, const struct session_owner *who, const char *id,
		const char *const *paths, size_t n, size_t cap, struct sandbox_fetched *out,
		char *detail, size_t len)
{
	struct session *s;
	size_t left = SESSION_GET_MAX;
	int scratch, err = open_turn(m, who, id, &s, &scratch, detail, len);

	if (err)
		return err;
	/* Each file within cap, all of them within SESSION_GET_MAX: what
	 * the server holds for one call is bounded, whatever is asked. */
	for (size_t i = 0; i < n && !err; i++) {
		size_t this_cap = cap < left ? cap : left;

		err = sb_scratch_fetch(scratch, paths[i], sandbox_uid(s->sb), this_cap, &out[i]);
		if (err)
			snprintf(detail, len, "cannot read session %s's files: %s", id,
				 strerror(-err));
		else if (out[i].truncated) {
			err = -EFBIG;
			snprintf(detail, len,
				 "%s is larger than a get returns (%zu MiB a file, %d MiB a call): "
				 "ask for fewer files, or split it in a step",
				 paths[i], cap >> 20, SESSION_GET_MAX >> 20);
		}
		left -= out[i].len;
	}
	close_turn(m, s, scratch);
	return err;
}

int session_close(struct session_mgr *m, const struct session_owner *who, const char *id,
		  char *detail, size_t len)
{
	struct session *s = session_find(m, who, id);

	if (!s) {
		snprintf(detail, len, "no session %s of tenant %s and this run", id, who->tenant);
		return -ENOENT;
	}
	/* Waits for a call under way: a close is never refused as busy. */
	pthread_mutex_lock(&s->lock);
	session_end_locked(m, s, "closed", SG_CAUSE_OK, -1, "closed by its client");
	pthread_mutex_unlock(&s->lock);
	session_unref(m, s);
	return 0;
}

size_t session_list(struct session_mgr *m, const struct session_owner *who,
		    struct session_info *out, size_t cap)
{
	size_t n = 0;

	pthread_mutex_lock(&m->lock);
	for (struct session *s = m->head; s; s = s->next) {
		if (!owned_by(s, who))
			continue;
		if (n < cap) {
			info_of_session(s, &out[n]);
			out[n].busy = s->busy;
		}
		n++;
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

size_t session_count(struct session_mgr *m)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = m->live;
	pthread_mutex_unlock(&m->lock);
	return n;
}
