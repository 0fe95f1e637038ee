/* A prepared sandbox, shared by the files that make up its life:
 * sandbox.c (prepare and destroy: what lives as long as the sandbox),
 * sandbox_start.c (init's READY and DONE, a run's start), sandbox_exec.c
 * (a run), sandbox_outcome.c (its verdict), sandbox_reuse.c (the reset
 * between runs) and sandbox_access.c (what others read of it). Not an
 * API: see src/sandbox/sandbox.h. */
#ifndef SG_SANDBOX_INTERNAL_H
#define SG_SANDBOX_INTERNAL_H
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "policy/policy.h"
#include "sandbox.h"
#include "sandbox_cgroup.h"
#include "sandbox_child.h"
#include "sandbox_interp.h"
#include "sandbox_net.h"
#include "sandbox_record.h"
#include "sandbox_root.h"
#include "sandbox_scratch.h"
#include "sandbox_seccomp.h"
#include "sandbox_slots.h"

#define SB_KILL_WAIT_MS 2000

struct sandbox {
	struct sg_policy policy; /* what it was prepared for (a copy) */
	char tenant[SG_TENANT_MAX];
	bool exec_in_scratch;
	struct sb_enforcer enforcer; /* the kernel's side (sandbox_enforcer.h) */
	char id[SG_ID_BUF];
	struct sb_slot slot;
	struct sb_record_lock record; /* the sandbox's own (its resources) */
	char scratch[PATH_MAX];
	bool scratch_made; /* mounted on the host's scratch path */
	int scratch_fd;    /* after sb_scratch_detach(): the scratch's root, else -1 */
	struct sb_scratch_marks marks;
	struct sb_cgroup cg;
	bool cgroup_made;
	struct sb_leaf leaf; /* the next (or current) run's cgroup */
	bool registered;     /* the agent was told */
	bool enrolled;       /* our entries are in the pinned maps */
	bool agent_enforced;
	int landlock_fd;
	struct sb_seccomp seccomp;
	struct sb_root_plan root;
	struct sb_net_plan net;
	bool relay; /* the policy allows TCP egress: a relay in each run */
	char home[PATH_MAX + 8];
	char *envp[4];
	struct sb_init_plan plan;
	int ctl; /* our end of init's control socket */
	int pre; /* the first run's channel to its pre-forked main; -1: none, or used */
	pid_t init;
	bool init_reaped;
	bool ready;        /* init said READY */
	bool marked;       /* what its root build made in the scratch is noted: resettable */
	bool keep_scratch; /* a session's: the reset keeps the scratch (sandbox_keep_scratch()) */
	bool used;         /* a run happened since the last reset */
	bool broken;       /* cannot serve another run: destroy it */
	/* The last run's DONE is still to be read from init: sandbox_reset()
	 * reads it before another run (see sb_run_read_done()). */
	bool done_owed;
	unsigned runs;
	uint64_t oom_base, limit_base, pids_base; /* the counters before the current run */
	bool may_keep;                            /* sandbox_may_keep() */
	pthread_t owner; /* the thread that prepared it (its init ends with it) */
	/* The interpreter forkserver's (sandbox_interp.h): the ops registered
	 * when it was prepared (NULL: none, it runs cold), and its state in
	 * this sandbox (NULL until one was started). */
	const struct sb_interp_ops *interp_ops;
	struct sb_interp *interp;
};

/* The interpreter's channel: >= 0 while one runs in sb (its runs are
 * calls of it), else -1. */
static inline int sb_interp_channel(const struct sandbox *sb)
{
	return sb->interp ? sb->interp_ops->channel(sb->interp) : -1;
}

/* Read one message from init's control socket, waiting at most
 * timeout_ms: 1 with *msg, 0 on timeout, -EPIPE when init is gone (the
 * sandbox is broken), -errno. */
int sb_read_init(struct sandbox *sb, struct sb_child_report *msg, int timeout_ms);

/* Init's DONE for the last run, waiting at most wait_ms (other messages
 * are skipped): 1 with *done, 0 when it has not come, -errno when init is
 * gone. */
int sb_await_done(struct sandbox *sb, int wait_ms, struct sb_child_report *done);

/* init said READY: note what its root build made in the scratch (what a
 * reset keeps), unless !note_scratch (a sandbox that is never reset). */
void sb_on_ready(struct sandbox *sb, bool note_scratch);

/* A sandbox's only run has started: the host's mount of its scratch goes
 * now, while the tenant's code runs, not after the result. Its lazy
 * unmount waits for an RCU grace period, and its mount point's removal
 * for the disk: about 0.6 ms that a caller waiting for the exit no longer
 * pays. The sandbox has its own mount of the scratch (private: the host's
 * unmount does not reach it); the executor keeps sb->scratch_fd, for the
 * files it fetches. Where that fails, the teardown removes it as usual. */
void sb_scratch_detach(struct sandbox *sb);

/* Whether the kernel's record of the sandbox (sg_state) says its exec
 * rule refused an exec in it: its first violation an exec, under an
 * action that refuses (deny or kill; `log` lets the exec happen and only
 * events it). The record is written afresh for every run. */
bool sb_exec_refusal_recorded(const struct sandbox *sb);

/* Its entries leave the enforcer's maps (once, while enrolled). */
void sb_enroll_release(struct sandbox *sb);

/* A prepared sandbox's next run: its run and batch ids, for the agent's
 * event lines (nothing to do when not enrolled). 0 or -errno with detail. */
int sb_enroll_name_run(struct sandbox *sb, const char *run_id, const char *batch_id, char *detail,
		       size_t dlen);

/* The enforcer's enrollment of the sandbox (its counters start at zero);
 * the agent is told when `notify` (once is enough). */
int sb_enroll(struct sandbox *sb, bool notify, char *detail, size_t dlen);

/* detail set from fmt; returns err. */
int sb_fail(char *detail, size_t dlen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
