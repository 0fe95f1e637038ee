/* One run of tenant code in a fresh sandbox: a cgroup <root>/<tenant>/<id>,
 * a scratch directory <scratch_root>/<tenant>/<id>, an unprivileged slot
 * uid, Landlock, seccomp and the policy's resource contract. The caller
 * (batch or verifier orchestration) decides what the outcome means. */
#ifndef SG_SANDBOX_H
#define SG_SANDBOX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/policy.h"
#include "lib/ids.h"

struct agent_conn;

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
	char *const *argv;      /* the tenant's command; argv[0] resolved via PATH=/usr/bin:/bin */
	const void *stdin_data; /* fed to the program's stdin, then closed */
	size_t stdin_len;
	uint64_t timeout_ms; /* wall-clock deadline; 0 = policy->limits.timeout_ms */
	const struct sandbox_file *files;
	size_t n_files;
	const char *const *fetch; /* scratch-relative paths read back after the run */
	size_t n_fetch;
	bool allow_exec_in_scratch; /* compiled languages only */
	struct agent_conn *agent;   /* NULL: no agent, own layers only */
};

enum sandbox_end {
	SB_EXITED = 1,      /* the main process exited (see exit_code) */
	SB_SIGNALED,        /* the main process died of `signal` */
	SB_TIMEOUT,         /* the deadline passed; the cgroup was killed */
	SB_OOM,             /* the memory limit was hit (OOM kill counted) */
	SB_KILLED_BY_AGENT, /* the agent killed the sandbox for `rule` */
	SB_FORK_LIMIT,      /* the pids limit was hit (own layer) */
	SB_OUTPUT_OVERSIZE, /* stdout exceeded limits.output_bytes */
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
	int rule;  /* enum sg_rule for SB_KILLED_BY_AGENT / SB_FORK_LIMIT / SB_OOM, else -1 */
	char *out; /* stdout, at most output_bytes (malloc'd, NUL-terminated) */
	size_t out_len;
	bool out_truncated;
	char *err; /* stderr, capped likewise, for the tenant's logs */
	size_t err_len;
	bool err_truncated;
	uint64_t wall_ms;
	char sandbox_id[SG_ID_BUF];
	uint64_t cgroup_id;
	uint32_t uid;        /* the slot uid it ran as; 0 before a slot was taken */
	bool agent_enforced; /* the agent acknowledged the registration */
	struct sandbox_fetched *fetched;
	size_t n_fetched;
	char detail[256]; /* human-readable; the reason of a platform error */
};

/* Runs spec->argv in a fresh sandbox and tears it down (cgroup emptied and
 * removed, scratch removed) before returning, whatever happened.
 * Returns 0 when the tenant code ran (see result->end), or -errno for a
 * platform error (no cgroup, fork failed, disk full, ...) with
 * result->detail saying what; a platform error is never the tenant's. */
int sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *result);
void sandbox_result_free(struct sandbox_result *result);

#endif
