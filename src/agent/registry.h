/* The agent's view of tenants and sandboxes, kept in step with the BPF
 * maps. Sandboxes are cgroups <root>/<tenant>/<id>: found by a scan at
 * start, by inotify on the root and tenant directories, and by explicit
 * registration from the executor. */
#ifndef SG_REGISTRY_H
#define SG_REGISTRY_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "abi/maps.h"
#include "policy/policy.h"
#include "lib/ids.h"

struct sg_bpf;

struct sg_tenant {
	char name[SG_TENANT_MAX];
	uint32_t idx;
	struct sg_policy *policy; /* the one in force (NULL: none could be loaded) */
	time_t policy_mtime;      /* of its source file, to notice changes */
	uint32_t active;          /* sandboxes now */
};

struct sg_sandbox_entry {
	uint64_t cgid; /* 0 = free slot */
	uint32_t tenant;
	char name[SG_ID_BUF];
	char run_id[SG_ID_BUF];
	char batch_id[SG_ID_BUF];
	uint64_t added_ns; /* CLOCK_BOOTTIME */
	bool killed;
	int kill_rule;            /* enum sg_rule of the kill */
	uint64_t kill_latency_ns; /* violation to empty cgroup */
};

#define SG_REG_SLOTS 16384 /* open addressing, >= 2 x SG_MAX_SANDBOXES */

struct registry {
	const struct sg_bpf *bpf;
	char root[PATH_MAX];
	char policy_dir[PATH_MAX];
	char host_root[PATH_MAX]; /* where the node's / is ("/" unless --host-root) */
	int host_root_fd;
	struct sg_tenant *tenants[SG_MAX_TENANTS];
	uint32_t n_tenants;
	struct sg_sandbox_entry *slots;
	uint32_t n_sandboxes;
	int inotify_fd;
	int root_wd, policy_wd;
	int tenant_wd[SG_MAX_TENANTS];
	uint64_t policy_generation; /* bumped on every successful reload */
	uint64_t reloads_ok, reloads_failed;
};

int registry_init(struct registry *r, const struct sg_bpf *bpf, const char *root,
		  const char *policy_dir, const char *host_root);

/* Whether a filesystem root (st_dev, st_ino of an executor's "/") is the
 * one the agent resolves policy paths in. */
bool registry_same_root(const struct registry *r, uint64_t dev, uint64_t ino);
void registry_free(struct registry *r);

/* The tenant (created, with its policy compiled, when `create`). */
struct sg_tenant *registry_tenant(struct registry *r, const char *name, bool create);
struct sg_tenant *registry_tenant_by_idx(struct registry *r, uint32_t idx);

/* Start enforcing on <root>/<tenant>/<name>. Idempotent. */
int registry_add(struct registry *r, const char *tenant, const char *name,
		 struct sg_sandbox_entry **out);
void registry_remove(struct registry *r, uint64_t cgid);
struct sg_sandbox_entry *registry_find(struct registry *r, uint64_t cgid);

/* Path of a sandbox's cgroup. */
void registry_cgroup_path(const struct registry *r, const struct sg_sandbox_entry *s, char *buf,
			  size_t len);

/* Read pending inotify events (sandboxes and policy files). */
void registry_handle_inotify(struct registry *r);

/* Re-read every tenant's policy; a file that does not validate is logged
 * and rejected, its tenant keeps the policy in force. Returns the number
 * of files rejected. */
int registry_reload_policies(struct registry *r);

/* Iterate live sandboxes: for (s = NULL; (s = registry_next(r, s));) */
struct sg_sandbox_entry *registry_next(struct registry *r, struct sg_sandbox_entry *prev);

#endif
