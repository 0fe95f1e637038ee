/* Shared by session.c (the calls) and session_mgr.c (making, forking and
 * reaping sessions). Not an API: see src/session/session.h. */
#ifndef SG_SESSION_INTERNAL_H
#define SG_SESSION_INTERNAL_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "node/node_mem.h"
#include "sandbox/sandbox_record.h"
#include "session.h"
#include "session_kernel.h"

/* A sandbox to be prepared on a maker thread, whose death would end it. */
struct make_job {
	struct sandbox_spec spec;
	struct sandbox *sb;
	int err;
	char detail[256];
	bool done;
	struct make_job *next;
};

struct session {
	char id[SG_ID_BUF];
	char tenant[SG_TENANT_MAX];
	char run_id[SG_ID_BUF];   /* "" for the run without an id */
	struct sg_policy *policy; /* a copy, as it was at creation */
	struct sandbox *sb;
	struct sb_run_record owed; /* owes the session's final (exec_session.c) */
	enum session_kernel kernel;
	uint32_t steps;
	uint64_t cpu_ms;
	uint64_t created_ms, last_ms; /* CLOCK_MONOTONIC */
	pthread_mutex_t lock;         /* the session's turn: one call at a time */
	bool busy;                    /* a call holds its turn (for listings) */
	bool ended, final_booked;
	char end_how[16];
	unsigned refs;               /* the table's, and each call's; under the manager's lock */
	struct make_job job;         /* its sandbox, asked of a maker thread */
	struct node_cpu_commit mem;  /* the node memory it holds for its life (node_mem.h) */
	struct node_cpu_commit seat; /* its node session seat, for its life (node_sessions.h) */
	struct session *next;
};

/* Sandboxes made at once (a fork's n are made side by side). */
#define SESSION_MAKERS 4

struct session_mgr {
	struct agent_shared *agent;
	pthread_mutex_t lock; /* the table, the jobs, the flags */
	pthread_cond_t cond;
	struct session *head;
	size_t live;
	struct make_job *jobs;
	bool stopping;
	pthread_t maker[SESSION_MAKERS], reaper;
	unsigned makers; /* started */
	bool reaper_started;
};

/* The owner's session `id`, referenced (session_unref()); NULL if none. */
struct session *session_find(struct session_mgr *m, const struct session_owner *who,
			     const char *id);
void session_unref(struct session_mgr *m, struct session *s);
/* Its scratch's root, opened without following a link: an fd or -1. */
int session_scratch_fd(const struct session *s);
/* Take the session's turn: 0, -EBUSY while another call of it runs, or
 * -ESRCH once it has ended, its lifetime over included (`detail` says
 * which). */
int session_take_turn(struct session_mgr *m, struct session *s, char *detail, size_t len);
void session_give_turn(struct session *s);
void info_of_session(const struct session *s, struct session_info *info);
/* Run one step (its turn held) and apply the session's budgets after it. */
void session_run_step(struct session_mgr *m, struct session *s, const struct exec_step *st,
		      struct exec_step_result *res);
/* End s (its turn held): final record, sandbox torn down, out of the table. */
void session_end_locked(struct session_mgr *m, struct session *s, const char *how,
			enum sg_cause cause, int rule, const char *why);

#endif
