/* What a sandbox asks of whoever enforces its tenant's policy in the
 * kernel. sandbox/ is mechanism only (namespaces, cgroup, layers, the
 * run): it never talks to the agent or its pinned maps itself. The
 * executor hands it an enforcer in its spec, as exec/ is handed its
 * sandboxes (exec_sandboxes): src/control/enforcer.c is the real one (the
 * agent's pinned maps, and the agent when one answers); a unit test
 * passes its own, or none.
 *
 * No enforcer (ops NULL, `none` set): the sandbox's own layers alone, as
 * on a node that never ran an agent; a policy that requires the agent is
 * refused. */
#ifndef SG_SANDBOX_ENFORCER_H
#define SG_SANDBOX_ENFORCER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sg_policy;

/* One sandbox, as the enforcer knows it. */
struct sb_enrollment {
	const char *tenant;
	const char *sandbox; /* its id: <cgroup root>/<tenant>/<sandbox> */
	const char *run_id, *batch_id;
	uint64_t cgroup_id;
	const char *cgroup_root;        /* the root its cgroup is below */
	const char *scratch;            /* its scratch */
	const struct sg_policy *policy; /* the policy it runs under */
};

struct sb_enrolled {
	bool enforced;    /* the kernel enforces the policy on the sandbox */
	bool notified;    /* and the agent knows it */
	char detail[256]; /* why it was refused, or why it is not enforced */
};

/* Each returns as the comment says; ctx is the enforcer's own. */
struct sb_enforcer_ops {
	/* Before any of the sandbox's code runs: 0 with e->enforced when the
	 * kernel enforces its policy, 0 with !e->enforced when the node has
	 * no enforcement and the policy does not require it, -errno when the
	 * sandbox must be refused (e->detail says why). `notify`: tell the
	 * agent too (best effort). */
	int (*enroll)(void *ctx, const struct sb_enrollment *s, bool notify, struct sb_enrolled *e);
	/* A prepared sandbox's next run: its run and batch ids. 0 or -errno. */
	int (*name_run)(void *ctx, const struct sb_enrollment *s, char *detail, size_t len);
	/* The sandbox is gone: the agent that was told forgets it. 0 or
	 * -errno. */
	int (*unregister)(void *ctx, uint64_t cgroup_id);
	/* Its entries leave the kernel's maps. */
	void (*release)(void *ctx, uint64_t cgroup_id);
	/* Whether an agent answers at all (a policy may require one). */
	bool (*has_agent)(void *ctx);
	/* Whether the enforcer refuses disallowed opens before they happen
	 * (then the sandbox may leave reads to it). */
	bool (*files_preventive)(void *ctx);
	/* The agent's word: 1 with *rule when it killed the sandbox, 0 when
	 * not, -errno when it cannot say within timeout_ms. */
	int (*kill_verdict)(void *ctx, uint64_t cgroup_id, int *rule, int timeout_ms);
	/* The kernel's record of the sandbox: 1 when it holds no violation,
	 * 0 when it does (or has no entry), -errno. */
	int (*quiet)(void *ctx, uint64_t cgroup_id);
	/* 1 with *rule when a kill-class rule tripped, 0 when none, -errno. */
	int (*trip_rule)(void *ctx, uint64_t cgroup_id, int *rule);
	/* 1 with *rule of its first violation of any class, 0 none, -errno. */
	int (*first_rule)(void *ctx, uint64_t cgroup_id, int *rule);
};

struct sb_enforcer {
	const struct sb_enforcer_ops *ops; /* NULL: none */
	void *ctx;
	/* ops NULL by choice: the sandbox's own layers alone. A zero
	 * sb_enforcer is refused: a spec its maker forgot to fill must not
	 * run unguarded by the kernel. */
	bool none;
};

static inline bool sb_enforcer_present(const struct sb_enforcer *e)
{
	return e->ops != NULL;
}

static inline bool sb_enforcer_has_agent(const struct sb_enforcer *e)
{
	return e->ops && e->ops->has_agent(e->ctx);
}
#endif
