/* Plumbing for the agent integration suite (agent_test.c): the agent
 * process, sandboxes, children run inside them, and the event file. */
#ifndef SG_AGENT_TEST_LIB_H
#define SG_AGENT_TEST_LIB_H
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct at_env {
	const char *sandguard; /* path of the sandguard binary */
	char dir[PATH_MAX];    /* temp dir: policies, scratch, events, socket */
	char policy_dir[PATH_MAX];
	char scratch_root[PATH_MAX];
	char events[PATH_MAX];
	char sock[PATH_MAX];
	char ready[PATH_MAX];
	char cg_root[PATH_MAX];    /* sandguard cgroup root */
	char outside_cg[PATH_MAX]; /* a cgroup outside the root */
	char pin_root[PATH_MAX];   /* bpffs pins of this run */
	pid_t agent;
	const char *mode; /* --mode given to the agent */
};

struct at_sandbox {
	char tenant[64];
	char name[64];
	char cg[PATH_MAX];
	char scratch[PATH_MAX];
	bool tmpfs;                    /* the scratch is a tmpfs mounted for it */
	char run_id[80], batch_id[80]; /* "run-<name>", "batch-<name>" */
};

struct sg_enroll_result;

extern int at_pass, at_fail, at_skip;
extern const char *at_prefix; /* put before every result's name */
void at_result(bool ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void at_skipped(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int at_env_init(struct at_env *env, const char *sandguard, const char *mode);
void at_env_fini(struct at_env *env);
int at_agent_start(struct at_env *env);
int at_agent_stop(struct at_env *env);
/* "files" mode the running agent chose, from its status. */
int at_agent_mode(struct at_env *env, char *files, size_t len);

/* Whether the agent's probe found `feature` (1, 0), -1 if unknown. */
int at_agent_feature(struct at_env *env, const char *feature);

/* A sandbox made as the executor makes one: its scratch (a directory, or
 * a tmpfs of its own), its cgroup, then enrolled (src/control/enroll.h)
 * under the tenant's policy from the suite's policy directory. Returns
 * sg_enroll_sandbox()'s answer; *res says whether it is enforced. */
int at_sandbox_enroll(struct at_env *env, const char *tenant, struct at_sandbox *sb,
		      bool tmpfs_scratch, struct sg_enroll_result *res);
/* Whether at_sandbox_enroll() tells the agent (the executor's best-effort
 * notification); 1 unless a case turns it off. */
extern bool at_enroll_notify;
/* The same with a directory scratch; 0 only when enforced. */
int at_sandbox_new(struct at_env *env, const char *tenant, struct at_sandbox *sb);
void at_sandbox_free(struct at_sandbox *sb);
/* What the kernel's maps hold for a sandbox (its entry's policy slot, the
 * slot's action for `rule`, its state: violations, first rule, trip), in
 * words for a failure's message: a case that expected a kill can say
 * whether the kernel never judged it kill-class, or judged it so and the
 * agent did not act. */
void at_sandbox_describe(uint64_t cgid, int rule, char *buf, size_t len);

/* Run fn(arg) in a child placed in `cg` (a sandbox's, or the outside
 * cgroup); fn's return value is the child's exit code. Returns the wait
 * status, or -1. The child does nothing between joining the cgroup and
 * fn() that the agent could judge. */
int at_run_in(const char *cg, int (*fn)(void *), void *arg, int timeout_ms);

/* Wait up to timeout_ms for an event line containing every one of the
 * NULL-terminated substrings. */
bool at_event_seen(struct at_env *env, int timeout_ms, ...);

bool at_cgroup_empty(const char *cg, int timeout_ms);

#endif
