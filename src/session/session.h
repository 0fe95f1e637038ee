/* Environments' sessions (docs/environments.md): a sandbox that lives
 * across calls, owned by one (tenant, run). Its scratch, and the kernel
 * state kept in it, persist from step to step; every step is a fresh
 * process in the session's sandbox, enforced by the agent's rules for the
 * session's whole life and booked as one journal record; the session's
 * end is one final record (src/exec/exec_session.c).
 *
 * The manager lives in a long-lived process (`sandguard serve`): the
 * sandboxes' inits are made on a thread of its own, and a thread of its
 * own closes sessions past their idle timeout or lifetime. A session's
 * calls take turns: one that finds another under way is refused (EBUSY). */
#ifndef SG_SESSION_H
#define SG_SESSION_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"
#include "lib/ids.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"

struct agent_shared;
struct session_mgr;

#define SESSION_FORK_MAX  64
#define SESSION_GET_MAX   (64 << 20) /* bytes one get returns, all files together */
#define SESSION_ID_PREFIX SG_SESSION_ID_PREFIX

struct session_info {
	char id[SG_ID_BUF];
	char tenant[SG_TENANT_MAX];
	char run_id[SG_ID_BUF];
	char sandbox[SG_ID_BUF];
	const char *kernel; /* "none", "bash", "python" */
	uint32_t steps;
	uint64_t cpu_ms;
	uint64_t age_ms, idle_ms;
	bool busy;
};

/* Who asks: a call names the session and its owner; another tenant's or
 * another run's session is not found (-ENOENT), never refused, so that
 * nobody learns of a session that is not theirs. */
struct session_owner {
	const char *tenant;
	const char *run_id; /* NULL: the run without an id */
};

struct session_create {
	const struct sg_policy *policy;
	const char *kernel; /* NULL or "none", "bash", "python" */
	const struct sandbox_file *files;
	size_t n_files;
	const struct exec_step *setup; /* argv, stdin, timeout; NULL: none */
};

int session_mgr_start(struct agent_shared *agent, struct session_mgr **out, char *detail,
		      size_t len);
/* Close every session (each booked final, "platform": the server
 * stopped), then stop the threads. */
void session_mgr_stop(struct session_mgr *m);

/* 0 with *info (and *setup_res when a setup command ran: its outputs are
 * the caller's to free), or -errno with `detail`: -EPERM (the policy has
 * no sessions), -EUSERS (the tenant's max_sessions are live), -EINVAL
 * (a bad request), else a platform error. */
int session_create(struct session_mgr *m, const struct session_owner *who,
		   const struct session_create *req, struct session_info *info,
		   struct exec_step_result *setup_res, char *detail, size_t len);

/* One step: argv, or code for the session's kernel (argv NULL). 0 with
 * *res (its outputs are the caller's) and *info after it, or -ENOENT,
 * -EBUSY (a call of the session is under way), -EINVAL, -EPERM (the
 * tenant is paused; `detail` says so), -ESRCH (the session has ended). */
int session_exec(struct session_mgr *m, const struct session_owner *who, const char *id,
		 char *const *argv, const char *code, size_t code_len, const struct exec_step *st,
		 struct exec_step_result *res, struct session_info *info, char *detail, size_t len);

int session_put(struct session_mgr *m, const struct session_owner *who, const char *id,
		const struct sandbox_file *files, size_t n, char *detail, size_t len);
/* out[i] as sb_scratch_fetch() fills it (data NULL: missing); the caller
 * frees each path and data. -EFBIG when a file is past cap, or all of
 * them past SESSION_GET_MAX. */
int session_get(struct session_mgr *m, const struct session_owner *who, const char *id,
		const char *const *paths, size_t n, size_t cap, struct sandbox_fetched *out,
		char *detail, size_t len);
/* n new sessions of the same owner starting from this one's state (its
 * scratch, and with it its kernel's state). ids[i] are theirs. */
int session_fork(struct session_mgr *m, const struct session_owner *who, const char *id, unsigned n,
		 char (*ids)[SG_ID_BUF], char *detail, size_t len);
/* Close it: booked final "closed". */
int session_close(struct session_mgr *m, const struct session_owner *who, const char *id,
		  char *detail, size_t len);
/* The owner's live sessions, at most cap; returns how many there are. */
size_t session_list(struct session_mgr *m, const struct session_owner *who,
		    struct session_info *out, size_t cap);
/* Live sessions, node-wide for this server (all tenants). */
size_t session_count(struct session_mgr *m);

#endif
