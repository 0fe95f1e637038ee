/* Sandboxes for tenant code: a cgroup <root>/<tenant>/<id>, a tmpfs scratch
 * on <scratch_root>/<tenant>/<id>, an unprivileged slot uid, PID, mount,
 * UTS, IPC and network namespaces of its own with a minimal root, Landlock,
 * seccomp and the policy's resource contract (see docs/sandbox.md). The
 * caller (batch or verifier orchestration) decides what an outcome means.
 *
 * A sandbox is prepared ahead of its first run (sandbox_prepare(): all of
 * the above, its init waiting in its namespaces), serves one run
 * (sandbox_exec()), and is destroyed (sandbox_destroy()), or is reset for
 * another run of the same request (sandbox_reset(): a verifier's next
 * test): every run is a fresh process in a fresh cgroup and IPC namespace,
 * on a scratch put back as it was made. sandbox_run() is the three in one.
 * A sandbox is used by one thread at a time. */
#ifndef SG_SANDBOX_H
#define SG_SANDBOX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/policy.h"
#include "lib/ids.h"
#include "sandbox_enforcer.h"
#include "sandbox_record.h"


struct sandbox_file {     /* written into scratch before the run */
	const char *path; /* relative to scratch, no "..", no leading '/' */
	const void *data;
	size_t len;
	unsigned mode; /* e.g. 0644 */
};

struct sandbox_spec {
	const struct sg_policy *policy;
	const char *tenant;
	const char *run_id;     /* may be NULL */
	const char *batch_id;   /* may be NULL */
	const char *mode;       /* "batch", "verify", "run": for the in-flight record */
	uint32_t attempt;       /* likewise */
	char *const *argv;      /* the tenant's command; argv[0] resolved via PATH=/usr/bin:/bin */
	const void *stdin_data; /* fed to the program's stdin, then closed */
	size_t stdin_len;
	uint64_t timeout_ms; /* wall-clock deadline; 0 = policy->limits.timeout_ms */
	/* CLOCK_MONOTONIC ms by which the tenant's code must have started
	 * (its execve), or the run is not started: -ETIME, a platform error
	 * (a caller whose client stops waiting; 0 = no bound). */
	uint64_t start_by_ms;
	const struct sandbox_file *files;
	size_t n_files;
	const char *const *fetch; /* scratch-relative paths read back after the run */
	size_t n_fetch;
	bool allow_exec_in_scratch; /* compiled languages only */
	/* argv[0] is the tenant's own choice (a session step's tool call),
	 * not a runner the platform picked: a command that cannot be
	 * executed (not found, not executable) is the run's answer, exit
	 * status 127 or 126 as from a shell, never the platform's setup
	 * failure (which is retried and blamed on nobody). */
	bool command_is_tenants;
	bool cold; /* never a warm interpreter, whatever the policy */
	/* A timeout's confirmation run (src/exec/exec_confirm.c): a fresh
	 * sandbox whose CPU weight is the highest its tenant's sandboxes can
	 * have, so that sandguard's own load cannot crowd it. */
	bool confirm;
	/* The sandbox's only run: it is never reset after it (a batch's
	 * attempts each take a fresh one, and a cold one is stopped), so what
	 * its root build made in the scratch is not noted at READY, on the
	 * way to the run's execve; sandbox_reset() then refuses it. */
	bool one_run;
	/* Who enforces the policy in the kernel (sandbox_enforcer.h): the
	 * executor's src/control/enforcer.c; ops NULL: own layers only. */
	struct sb_enforcer enforcer;
	/* The caller's run record, kept across a batch's attempts and
	 * rewritten at this run's start (src/sandbox/sandbox_record.h); NULL:
	 * the run holds its own, owing its outcome as the final, in
	 * sandbox_result.record. */
	struct sb_run_record *record;
};

enum sandbox_end {
	SB_EXITED = 1,      /* the main process exited (see exit_code) */
	SB_SIGNALED,        /* the main process died of `signal` */
	SB_TIMEOUT,         /* the deadline passed (the cgroup was killed), or the run
			     * ended after it, whatever its exit status */
	SB_OOM,             /* the memory limit was hit (OOM kill counted) */
	SB_KILLED_BY_AGENT, /* the agent killed the sandbox for `rule` */
	SB_FORK_LIMIT,      /* the pids limit was hit (own layer) */
	SB_OUTPUT_OVERSIZE, /* stdout exceeded limits.output_bytes */
	SB_POLICY_REFUSED,  /* the policy's `rule` (exec) refused the run's own
			     * command: its execve failed with EACCES (LSM mode),
			     * or it was killed at it (fallback mode) */
	SB_RULE_TRIPPED,    /* the kernel's record (sg_state) says a kill-class
			     * `rule` tripped, and no agent kill is on record (the
			     * agent stopped, killed or restarting): whatever else
			     * ended the run, that violation is its cause */
};

struct sandbox_fetched {
	char *path;
	char *data; /* NULL if missing/unreadable */
	size_t len;
	bool truncated;
};

struct sandbox_result {
	enum sandbox_end end;
	int exit_code;
	int signal;
	int rule; /* enum sg_rule for SB_KILLED_BY_AGENT / SB_RULE_TRIPPED / SB_FORK_LIMIT / SB_OOM /
		   * SB_POLICY_REFUSED, else -1 */
	char *out; /* stdout, at most output_bytes (malloc'd, NUL-terminated) */
	size_t out_len;
	bool out_truncated;
	char *err; /* stderr, capped likewise, for the tenant's logs */
	size_t err_len;
	bool err_truncated;
	uint64_t wall_ms;
	char sandbox_id[SG_ID_BUF];
	/* The run's outcome id: the sandbox's id for its first run, then
	 * <id>.<n> (a verifier's later tests in the same sandbox). */
	char attempt_id[SG_ID_BUF];
	uint64_t cgroup_id;
	uint32_t uid;        /* the slot uid it ran as; 0 before a slot was taken */
	pid_t init_pid;      /* the host pid of its init (events name it); 0 before */
	bool agent_enforced; /* the agent acknowledged the registration */
	/* -errno when the kernel's record of the sandbox (sg_state) could
	 * not be read at the run's end: a violation it holds was not weighed,
	 * and the cause's detail says so instead of guessing. 0 otherwise. */
	int record_err;
	/* What it got of the CPU (src/lib/cgroup_cpu.h), from the moment
	 * the run's cgroup was made to the end of the run. */
	uint64_t cpu_ms;
	uint64_t cpu_wait_ms;      /* not counting cpu_throttled_ms */
	uint64_t cpu_throttled_ms; /* held back by its own CPU quota */
	bool cpu_known, cpu_wait_known;
	/* What the run cost, for metering (journal "cpu_us", "mem_peak_bytes"):
	 * the run cgroup's usage_usec read again once the run is over (its
	 * tasks exited or killed, the cgroup not yet removed), and the
	 * sandbox's peak memory over the run (sb_cgroup_mem_peak_open()). */
	uint64_t cpu_us;
	uint64_t mem_peak_bytes;
	bool mem_peak_known;
	/* The node's idle CPU time over the run, summed over the executor's
	 * node_cpus CPUs (src/lib/node_idle.h): evidence from outside the
	 * sandbox of the room the node had for it. */
	uint64_t node_idle_ms;
	unsigned node_cpus;
	bool node_idle_known;
	uint64_t timeout_ms; /* the deadline it ran under */
	/* The run's record, held from before it started until
	 * sandbox_result_free(): free the result only once it is booked. */
	struct sb_record_lock record;
	struct sandbox_fetched *fetched;
	size_t n_fetched;
	char detail[256]; /* human-readable; the reason of a platform error */
	/* Set when the run was cold though its policy asks for a warm
	 * interpreter, because one could not start lately: why. */
	char warm_fallback[200];
	bool warm; /* it ran as a warm interpreter's child */
};

struct sandbox;

/* Prepare a sandbox for spec's policy, tenant, allow_exec_in_scratch and
 * agent (nothing else of spec is used): slot, in-flight record, scratch,
 * cgroups with their limits, the agent's enrollment, the Landlock ruleset
 * and seccomp filter, and its init, which builds the namespaces and the
 * root while this returns. 0 with *out set, or -errno with `detail`. */
int sandbox_prepare(const struct sandbox_spec *spec, struct sandbox **out, char *detail,
		    size_t dlen);

/* Wait (at most timeout_ms) until its init is set up. 0, or -errno with
 * `detail` (the sandbox is then of no use: destroy it). */
int sandbox_wait_ready(struct sandbox *sb, int timeout_ms, char *detail, size_t dlen);

/* Whether sb was prepared for what spec asks: the same policy, tenant and
 * exec-in-scratch, and no warm interpreter in it when spec->cold. */
bool sandbox_fits(const struct sandbox *sb, const struct sandbox_spec *spec);

/* Whether a sandbox made for policy a is one made for b: equal but for
 * what only the executor reads (on_excess, queue_timeout_ms, failure,
 * max_retries, health). */
bool sandbox_policy_same(const struct sg_policy *a, const struct sg_policy *b);

/* sb may run a warm interpreter and serve more than one request: it was
 * prepared on a thread that outlives the requests (a pool's keeper). A
 * sandbox's init has the parent-death signal of the thread that prepared
 * it, so one prepared on a request's thread ends with that thread; such a
 * sandbox (the default) never runs a warm interpreter. */
void sandbox_may_keep(struct sandbox *sb);

/* Its id (the outcomes' "sandbox"). */
const char *sandbox_id(const struct sandbox *sb);

/* sb is an environment's session (src/session/): its scratch is the
 * session's state, so sandbox_reset() keeps it (and a relay, which
 * serves only the session's own runs) instead of putting it back. */
void sandbox_keep_scratch(struct sandbox *sb);

/* The host's path of its scratch (a tmpfs of its own), and the slot uid
 * that owns what is in it: for the session's files and its fork. */
const char *sandbox_scratch_path(const struct sandbox *sb);
uid_t sandbox_uid(const struct sandbox *sb);

/* One run of spec->argv in sb (prepared, or reset since its last run):
 * returns as sandbox_run() does; the run's processes are gone, the
 * sandbox stays for sandbox_reset() or sandbox_destroy(). */
int sandbox_exec(struct sandbox *sb, const struct sandbox_spec *spec,
		 struct sandbox_result *result);

/* Ready sb for another run: the last run's cgroup emptied and removed
 * (nothing left in the sandbox but its init), the scratch put back as it
 * was made, the agent's counters for it started over, a fresh cgroup for
 * the next run (its IPC namespace is fresh too). 0, or -errno with
 * `detail` when it cannot be reused (destroy it and take another): its
 * init died (an agent kill), something survived, a relay runs in it, the
 * scratch is not as made. */
int sandbox_reset(struct sandbox *sb, char *detail, size_t dlen);

/* It will run nothing more: SIGKILL to its init now, without waiting (the
 * PID namespace, and everything in it, dies with init). The kernel tears
 * the namespaces down while the caller books the run; sandbox_destroy()
 * then reaps init and removes the rest as before. */
void sandbox_stop(struct sandbox *sb);

/* A timeout's confirmation run is about to use sb (fresh, never run
 * in): its CPU weight becomes the highest its tenant's sandboxes can have
 * (src/exec/exec_confirm.c). 0, or -errno with `detail`. */
int sandbox_favour_cpu(struct sandbox *sb, char *detail, size_t len);

/* Tear it down: everything in it killed, the agent told, cgroups removed,
 * scratch unmounted, slot released, its record deleted; then freed. A
 * cgroup that cannot be emptied keeps its slot locked for this process's
 * life and leaves its record for a reaper. */
void sandbox_destroy(struct sandbox *sb);

/* Runs spec->argv in a fresh sandbox and tears it down (cgroup emptied and
 * removed, scratch unmounted) before returning, whatever happened. Its
 * run's in-flight record stays until sandbox_result_free(), so that an
 * executor killed before it booked the attempt leaves an orphan the next
 * one books (src/sandbox/sandbox_record.h).
 * Returns 0 when the tenant code ran (see result->end), or -errno for a
 * platform error (no cgroup, fork failed, disk full, ...) with
 * result->detail saying what; a platform error is never the tenant's. */
int sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *result);
/* Frees the outputs and releases the run's in-flight record. */
void sandbox_result_free(struct sandbox_result *result);


#endif
