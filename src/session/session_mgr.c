/* Making sessions (create and fork), and the threads of the manager: the
 * maker, on which every session's sandbox is prepared (a sandbox's init
 * dies with the thread that prepared it, and a request's thread ends with
 * its request), and the reaper, which closes sessions past their idle
 * timeout or lifetime. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include "control/enforcer.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "node/node_sessions.h"
#include "node/tenant_state.h"
#include "session_files.h"
#include "session_internal.h"
#include "control/agent_shared.h"

#define READY_WAIT_MS 10000
#define REAP_EVERY_MS 1000

static void *maker_main(void *arg)
{
	struct session_mgr *m = arg;

	pthread_mutex_lock(&m->lock);
	for (;;) {
		struct make_job *j;

		while (!m->jobs && !m->stopping)
			pthread_cond_wait(&m->cond, &m->lock);
		if (!m->jobs)
			break;
		j = m->jobs;
		m->jobs = j->next;
		pthread_mutex_unlock(&m->lock);
		j->err = sandbox_prepare(&j->spec, &j->sb, j->detail, sizeof(j->detail));
		if (!j->err) {
			j->err = sandbox_wait_ready(j->sb, READY_WAIT_MS, j->detail,
						    sizeof(j->detail));
			if (j->err) {
				sandbox_destroy(j->sb);
				j->sb = NULL;
			}
		}
		pthread_mutex_lock(&m->lock);
		j->done = true;
		pthread_cond_broadcast(&m->cond);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* Ask a maker for j's sandbox (j->spec set); wait_made() waits for it. */
static int submit(struct session_mgr *m, struct make_job *j, char *detail, size_t len)
{
	struct make_job **tail;

	j->done = false;
	j->next = NULL;
	j->sb = NULL;
	pthread_mutex_lock(&m->lock);
	if (m->stopping) {
		pthread_mutex_unlock(&m->lock);
		snprintf(detail, len, "the server is stopping");
		return -ESHUTDOWN;
	}
	for (tail = &m->jobs; *tail; tail = &(*tail)->next)
		;
	*tail = j;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static int wait_made(struct session_mgr *m, struct make_job *j, struct sandbox **sb, char *detail,
		     size_t len)
{
	pthread_mutex_lock(&m->lock);
	while (!j->done)
		pthread_cond_wait(&m->cond, &m->lock);
	pthread_mutex_unlock(&m->lock);
	if (j->err)
		snprintf(detail, len, "cannot prepare the session's sandbox: %s", j->detail);
	*sb = j->sb;
	return j->err;
}

static int new_id(char *buf, size_t len)
{
	unsigned char r[8];

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return -errno;
	snprintf(buf, len, SESSION_ID_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
		 r[3], r[4], r[5], r[6], r[7]);
	return 0;
}

static size_t tenant_sessions(struct session_mgr *m, const char *tenant)
{
	size_t n = 0;

	for (struct session *s = m->head; s; s = s->next)
		n += !strcmp(s->tenant, tenant);
	return n;
}

/* Take the table's place for a new session of who's (its turn held by
 * the caller), or refuse: -EPERM (no sessions in the policy), -EUSERS. */
static int enter(struct session_mgr *m, struct session *s, const struct sg_policy *p, char *detail,
		 size_t len)
{
	int err = 0;

	pthread_mutex_lock(&m->lock);
	if (!p->session.max_sessions) {
		snprintf(detail, len,
			 "tenant %s's policy (%s) allows no sessions: it has no \"session\" "
			 "section with max_sessions",
			 s->tenant, p->source);
		err = -EPERM;
	} else if (tenant_sessions(m, s->tenant) >= p->session.max_sessions) {
		snprintf(detail, len,
			 "tenant %s has %u live sessions, its policy's session.max_sessions",
			 s->tenant, p->session.max_sessions);
		err = -EUSERS;
	} else if (m->stopping) {
		snprintf(detail, len, "the server is stopping");
		err = -ESHUTDOWN;
	} else {
		s->refs = 2; /* the table's and the creator's */
		s->next = m->head;
		m->head = s;
		m->live++;
	}
	pthread_mutex_unlock(&m->lock);
	return err;
}

/* Out of the table again: nothing of it was booked or owed, it never was. */
static void unlist(struct session_mgr *m, struct session *s)
{
	node_cpu_release(&s->mem);
	node_cpu_release(&s->seat);
	pthread_mutex_lock(&m->lock);
	for (struct session **q = &m->head; *q; q = &(*q)->next)
		if (*q == s) {
			*q = s->next;
			m->live--;
			s->refs--;
			break;
		}
	pthread_mutex_unlock(&m->lock);
}

/* A paused tenant makes no session and no fork (`sandguard tenant pause`):
 * -EPERM with "paused" in `detail` (a 423). */
static int refuse_paused(const char *tenant, char *detail, size_t len)
{
	char info[256];

	if (tenant_paused(tenant, info, sizeof(info)) <= 0)
		return 0;
	snprintf(detail, len, "tenant %s is paused (%s): no new sessions, forks or steps", tenant,
		 info);
	return -EPERM;
}

/* One of the node's session seats, for the session's whole life: refused
 * now (-EAGAIN, a 503) when sessions hold them all, so that the node's
 * other uid slots stay free for short runs (node_sessions.h). */
static int hold_seat(struct session *s, char *detail, size_t len)
{
	uint32_t used, cap;
	int err = node_session_seat_take(&s->seat, &used, &cap);

	if (err == -EBUSY) {
		snprintf(detail, len,
			 "the node's %u session seats are all held (the rest of its sandbox slots "
			 "serve short runs); retry later",
			 cap);
		return -EAGAIN;
	}
	if (err)
		snprintf(detail, len, "cannot take a node session seat: %s", strerror(-err));
	return err;
}

/* The node memory of its sandbox, for the session's whole life (its
 * scratch holds memory between steps too): refused now (-EAGAIN, a 503)
 * rather than queued, as a session holds it for long. */
static int hold_memory(struct session *s, char *detail, size_t len)
{
	/* Its scratch too: the server's own writes into it (put, a fork's
	 * copy) are charged to the server's cgroup, not the session's. */
	uint64_t need = s->policy->limits.memory_mb + s->policy->scratch_mb;
	uint32_t used, cap;
	int err = node_mem_commit(need, 0, &s->mem, &used, &cap);

	if (err == -EBUSY) {
		snprintf(detail, len,
			 "node memory committed: %u of %u MiB are held by sandboxes and sessions, "
			 "and the session needs %llu (limits.memory_mb + files.scratch_mb); retry "
			 "later",
			 used, cap, (unsigned long long)need);
		return -EAGAIN;
	}
	if (err)
		snprintf(detail, len, "cannot commit node memory: %s", strerror(-err));
	return err;
}

/* A new session in the table, its turn held by the caller and its
 * sandbox asked of a maker (finish_session() completes it); NULL with
 * `detail` and *err. */
static struct session *begin_session(struct session_mgr *m, const struct session_owner *who,
				     const struct sg_policy *p, enum session_kernel kernel,
				     int *err, char *detail, size_t len)
{
	struct session *s = calloc(1, sizeof(*s));

	if (!s || !(s->policy = malloc(sizeof(*p)))) {
		free(s);
		*err = -ENOMEM;
		snprintf(detail, len, "out of memory");
		return NULL;
	}
	memcpy(s->policy, p, sizeof(*p));
	snprintf(s->tenant, sizeof(s->tenant), "%s", who->tenant);
	snprintf(s->run_id, sizeof(s->run_id), "%s", who->run_id ? who->run_id : "");
	s->kernel = kernel;
	s->created_ms = s->last_ms = clock_ms(CLOCK_MONOTONIC);
	s->owed.lk.fd = -1;
	s->mem.fd = s->seat.fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_lock(&s->lock);
	s->busy = true;
	*err = new_id(s->id, sizeof(s->id));
	if (*err)
		snprintf(detail, len, "cannot make a session id: %s", strerror(-*err));
	else
		*err = enter(m, s, p, detail, len);
	if (!*err && ((*err = hold_seat(s, detail, len)) || (*err = hold_memory(s, detail, len))))
		unlist(m, s);
	if (*err) {
		pthread_mutex_unlock(&s->lock);
		pthread_mutex_destroy(&s->lock);
		free(s->policy);
		free(s);
		return NULL;
	}
	s->job.spec =
		(struct sandbox_spec){ .policy = s->policy,
				       .tenant = s->tenant,
				       .run_id = s->run_id[0] ? s->run_id : NULL,
				       .batch_id = s->id,
				       .mode = "session",
				       .attempt = 1,
				       .cold = true,
				       .enforcer = sg_kernel_enforcer(agent_shared_get(m->agent)) };
	*err = submit(m, &s->job, detail, len);
	if (*err) {
		unlist(m, s);
		s->ended = true;
		pthread_mutex_unlock(&s->lock);
		session_unref(m, s);
		return NULL;
	}
	return s;
}

/* Its sandbox made: the session's record, then its kernel. 0; or -errno
 * with `detail`, s out of the table (booked when it was owed) and
 * released: the caller must not use it. */
static int finish_session(struct session_mgr *m, struct session *s, char *detail, size_t len)
{
	struct exec_ctx ctx = { .policy = s->policy,
				.tenant = s->tenant,
				.run_id = s->run_id[0] ? s->run_id : NULL,
				.agent = sg_enforcer_agent(&s->job.spec.enforcer) };
	int err = wait_made(m, &s->job, &s->sb, detail, len), scratch;

	if (err == -EBUSY) /* every uid slot is taken: the node is full, for now */
		err = -EAGAIN;
	if (!err) {
		sandbox_keep_scratch(s->sb);
		err = exec_session_open(&ctx, s->id, &s->owed, detail, len);
	}
	if (err) { /* nothing booked or owed yet: it never was */
		if (s->sb)
			sandbox_destroy(s->sb);
		s->sb = NULL;
		s->ended = true;
		unlist(m, s);
		pthread_mutex_unlock(&s->lock);
		session_unref(m, s);
		return err;
	}
	scratch = session_scratch_fd(s);
	err = scratch < 0 ? -errno : session_kernel_install(scratch, s->kernel, sandbox_uid(s->sb));
	if (scratch >= 0)
		close(scratch);
	if (err) {
		snprintf(detail, len, "cannot install the %s kernel: %s",
			 session_kernel_name(s->kernel), strerror(-err));
		session_end_locked(m, s, "platform", SG_CAUSE_PLATFORM_ERROR, -1, detail);
		pthread_mutex_unlock(&s->lock);
		session_unref(m, s);
		return err;
	}
	sg_info("session %s (tenant %s): created in sandbox %s, kernel %s", s->id, s->tenant,
		sandbox_id(s->sb), session_kernel_name(s->kernel));
	return 0;
}

static struct session *new_session(struct session_mgr *m, const struct session_owner *who,
				   const struct sg_policy *p, enum session_kernel kernel, int *err,
				   char *detail, size_t len)
{
	struct session *s = begin_session(m, who, p, kernel, err, detail, len);

	if (s && (*err = finish_session(m, s, detail, len)))
		return NULL;
	return s;
}

static void done_with(struct session_mgr *m, struct session *s)
{
	s->busy = false;
	s->last_ms = clock_ms(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&s->lock);
	session_unref(m, s);
}

int session_create(struct session_mgr *m, const struct session_owner *who,
		   const struct session_create *req, struct session_info *info,
		   struct exec_step_result *setup_res, char *detail, size_t len)
{
	int kernel = session_kernel_from_name(req->kernel), err = 0, scratch;
	struct session *s;

	memset(setup_res, 0, sizeof(*setup_res));
	if (kernel < 0) {
		snprintf(detail, len, "unknown kernel \"%s\" (expected none, bash or python)",
			 req->kernel);
		return -EINVAL;
	}
	if (exec_journal_full(detail, len))
		return -ENOSPC;
	if ((err = refuse_paused(who->tenant, detail, len)))
		return err;
	s = new_session(m, who, req->policy, kernel, &err, detail, len);
	if (!s)
		return err;
	scratch = session_scratch_fd(s);
	err = scratch < 0 ? -errno : 0;
	for (size_t i = 0; i < req->n_files && !err; i++)
		err = session_file_put(scratch, req->files[i].path, req->files[i].data,
				       req->files[i].len,
				       req->files[i].mode ? req->files[i].mode : 0644,
				       sandbox_uid(s->sb));
	if (scratch >= 0)
		close(scratch);
	if (err) {
		/* Files that do not fit the scratch, or conflict with each
		 * other, are the request's: the session closes, nobody's fault;
		 * anything else is the node's. */
		bool theirs = session_file_err_tenants(err);

		snprintf(detail, len, "cannot write the session's files: %s", strerror(-err));
		session_end_locked(m, s, theirs ? "closed" : "platform",
				   theirs ? SG_CAUSE_OK : SG_CAUSE_PLATFORM_ERROR, -1, detail);
		done_with(m, s);
		return theirs ? err : -EIO;
	}
	if (req->setup) {
		struct exec_step st = *req->setup;

		session_run_step(m, s, &st, setup_res);
	}
	info_of_session(s, info);
	done_with(m, s);
	return 0;
}

int session_fork(struct session_mgr *m, const struct session_owner *who, const char *id, unsigned n,
		 char (*ids)[SG_ID_BUF], char *detail, size_t len)
{
	struct session *p = session_find(m, who, id), *kids[SESSION_FORK_MAX];
	unsigned made = 0, begun = 0;
	int err = 0;

	if (!p) {
		snprintf(detail, len, "no session %s of tenant %s and this run", id, who->tenant);
		return -ENOENT;
	}
	if (exec_journal_full(detail, len) || (err = refuse_paused(who->tenant, detail, len))) {
		session_unref(m, p);
		return err ? err : -ENOSPC;
	}
	if (n < 1 || n > SESSION_FORK_MAX) {
		snprintf(detail, len, "a fork makes 1 to %d sessions", SESSION_FORK_MAX);
		session_unref(m, p);
		return -EINVAL;
	}
	if ((err = session_take_turn(m, p, detail, len))) {
		session_unref(m, p);
		return err;
	}
	/* Their sandboxes are made side by side, then each is filled. */
	for (unsigned i = 0; i < n && !err; i++) {
		kids[i] = begin_session(m, who, p->policy, p->kernel, &err, detail, len);
		begun += kids[i] != NULL;
	}
	for (unsigned i = 0; i < begun; i++) {
		struct session_copy_stats cs;
		int kerr = finish_session(m, kids[i], detail, len);

		if (kerr) { /* released by finish_session() */
			err = err ?: kerr;
			continue;
		}
		kids[made++] = kids[i];
		/* A fork goes on with its parent's budgets (CPU used, lifetime),
		 * or a chain of forks would renew them. */
		kids[i]->cpu_ms = p->cpu_ms;
		kids[i]->created_ms = p->created_ms;
		kerr = session_copy_tree(sandbox_scratch_path(p->sb),
					 sandbox_scratch_path(kids[i]->sb),
					 sandbox_uid(kids[i]->sb), &cs);
		if (kerr) {
			snprintf(detail, len, "cannot copy session %s's scratch: %s", p->id,
				 strerror(-kerr));
			err = err ?: kerr;
		}
		snprintf(ids[made - 1], SG_ID_BUF, "%s", kids[i]->id);
	}
	/* All or nothing: the forks made before a failure are closed. */
	for (unsigned i = 0; i < made; i++) {
		if (err)
			session_end_locked(m, kids[i], "closed", SG_CAUSE_OK, -1,
					   "its fork failed as a whole");
		done_with(m, kids[i]);
	}
	session_give_turn(p);
	session_unref(m, p);
	return err;
}

/* Close what is past its idle timeout or lifetime. A session in a step
 * is left to finish it (the step has its own deadline). */
static void reap(struct session_mgr *m)
{
	struct session *due[64];
	const char *how[64];
	size_t n = 0;
	uint64_t now;

	pthread_mutex_lock(&m->lock);
	/* Read under the lock, after any call's last_ms it could see: a
	 * last_ms ahead of it is a session in use, never an idle one. */
	now = clock_ms(CLOCK_MONOTONIC);
	for (struct session *s = m->head; s && n < 64; s = s->next) {
		const struct sg_session *b = &s->policy->session;
		bool idle = now > s->last_ms &&
			    now - s->last_ms >= (uint64_t)b->idle_timeout_s * 1000;
		bool old = now - s->created_ms >= (uint64_t)b->max_lifetime_s * 1000;

		if (s->busy || (!idle && !old))
			continue;
		s->refs++;
		how[n] = old ? "lifetime" : "idle";
		due[n++] = s;
	}
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct session *s = due[i];

		if (!pthread_mutex_trylock(&s->lock)) {
			session_end_locked(
				m, s, how[i], SG_CAUSE_OK, -1,
				!strcmp(how[i], "idle")
					? "no call for the policy's session.idle_timeout_s"
					: "the policy's session.max_lifetime_s passed");
			pthread_mutex_unlock(&s->lock);
		}
		session_unref(m, s);
	}
}

static void *reaper_main(void *arg)
{
	struct session_mgr *m = arg;

	pthread_mutex_lock(&m->lock);
	while (!m->stopping) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += REAP_EVERY_MS / 1000;
		pthread_cond_timedwait(&m->cond, &m->lock, &until);
		if (m->stopping)
			break;
		pthread_mutex_unlock(&m->lock);
		reap(m);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

int session_mgr_start(struct agent_shared *agent, struct session_mgr **out, char *detail,
		      size_t len)
{
	struct session_mgr *m = calloc(1, sizeof(*m));
	int ret;

	if (!m) {
		snprintf(detail, len, "out of memory");
		return -ENOMEM;
	}
	m->agent = agent;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	for (ret = 0; m->makers < SESSION_MAKERS && !ret; m->makers += !ret)
		ret = pthread_create(&m->maker[m->makers], NULL, maker_main, m);
	if (!ret) {
		ret = pthread_create(&m->reaper, NULL, reaper_main, m);
		m->reaper_started = !ret;
	}
	if (ret) {
		snprintf(detail, len, "cannot start the session threads: %s", strerror(ret));
		session_mgr_stop(m);
		return -ret;
	}
	*out = m;
	return 0;
}

void session_mgr_stop(struct session_mgr *m)
{
	if (!m)
		return;
	for (;;) {
		struct session *s;

		pthread_mutex_lock(&m->lock);
		s = m->head;
		if (s)
			s->refs++;
		pthread_mutex_unlock(&m->lock);
		if (!s)
			break;
		pthread_mutex_lock(&s->lock);
		session_end_locked(m, s, "platform", SG_CAUSE_PLATFORM_ERROR, -1,
				   "the server stopped");
		pthread_mutex_unlock(&s->lock);
		session_unref(m, s);
	}
	pthread_mutex_lock(&m->lock);
	m->stopping = true;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	for (unsigned i = 0; i < m->makers; i++)
		pthread_join(m->maker[i], NULL);
	if (m->reaper_started)
		pthread_join(m->reaper, NULL);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
}
