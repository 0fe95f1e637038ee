/* The agent's view of tenants and sandboxes, kept in step with the BPF
 * maps. Sandboxes are cgroups <root>/<tenant>/<id>: enrolled by the
 * executor itself (src/control/enroll.c writes their map entries), found
 * by a scan at start, by inotify on the root and tenant directories, and by
 * a sweep of the maps every second. Tenants with a policy file of their own
 * have a policy slot (tenants.c); every other tenant uses the default's. */
#ifndef SG_REGISTRY_H
#define SG_REGISTRY_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "abi/maps.h"
#include "policy/policy.h"
#include "policy_compile.h"
#include "lib/ids.h"

struct sg_bpf;

/* Which version of a policy file a slot was compiled from. */
struct policy_file_version {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

/* What the agent reads of a tenant's policy once it is compiled (the full
 * struct sg_policy is 35 KiB, mostly path lists the compiled maps hold;
 * kept for thousands of tenants it would be most of the agent's memory). */
struct sg_policy_kept {
	uint8_t action[SG_RULE__COUNT]; /* enum sg_policy_action per rule */
	struct sg_health health;
	char scratch_root[SG_POLICY_PATHLEN];
	char source[SG_POLICY_PATHLEN];
};

/* A policy slot: sg_policies[idx] and its sets in sg_paths / sg_exec_files. */
struct sg_tenant {
	char name[SG_TENANT_MAX]; /* whose policy file it is; "default" in SG_TENANT_DEFAULT */
	uint32_t idx;
	struct sg_policy_kept *policy; /* the one in force (NULL: none could be loaded) */
	struct policy_file_version version;
	uint32_t active;       /* sandboxes using the slot now */
	uint32_t sessions;     /* of them, environments' sessions (agent_metrics_tick()) */
	bool had_sessions;     /* ever: its sessions gauge is shown */
	uint64_t last_used_ns; /* CLOCK_BOOTTIME: the idle slot used longest ago is evicted first */
	bool retired;          /* its file is gone: out of the index, freed once idle */
	struct sg_tenant *hnext; /* next in its registry.by_name bucket */
	char error[256];         /* why its policy file was rejected, "" if it was not */
	struct sg_compiled compiled;
};

struct sg_sandbox_entry {
	uint64_t cgid;              /* 0 = free slot */
	uint32_t slot;              /* its policy slot (sg_sandbox.tenant) */
	char tenant[SG_TENANT_MAX]; /* whose it is: its cgroup, events and ledger */
	char name[SG_ID_BUF];
	char run_id[SG_ID_BUF];   /* "" = unknown */
	char batch_id[SG_ID_BUF]; /* "" = unknown */
	bool ids_known;           /* read from sg_sandbox_ids, or told by the executor */
	uint64_t added_ns;        /* CLOCK_BOOTTIME */
	bool killed;              /* the agent emptied its cgroup */
	bool kill_handled;        /* killed, or found tripped after its last task ended */
	int kill_rule;            /* enum sg_rule of the kill */
	uint64_t kill_latency_ns; /* violation to empty cgroup */
	uint32_t table_slot;      /* where the registry's table holds it */
};

#define SG_TENANT_BUCKETS 16384 /* power of two */
#define SG_REG_SLOTS      16384 /* open addressing, >= 2 x SG_MAX_SANDBOXES */

/* An inotify watch on a tenant's directory of sandbox cgroups. */
struct tenant_watch {
	char name[SG_TENANT_MAX];
	int wd;
};

struct registry {
	const struct sg_bpf *bpf;
	char root[PATH_MAX];
	char policy_dir[PATH_MAX];
	char host_root[PATH_MAX]; /* where the node's / is ("/" unless --host-root) */
	int host_root_fd;
	struct sg_tenant **tenants; /* by slot: SG_MAX_TENANTS, on the heap */
	struct sg_tenant **by_name; /* SG_TENANT_BUCKETS chains: find a slot by name */
	uint32_t n_tenants;         /* slots in use are below this */
	uint32_t n_unslotted;       /* policy files with no slot at the last load */
	/* Open addressing over cgids[] (0 = free), at[i] the entry of
	 * cgids[i] in pool[]: a lookup or a pass touches the small table, and
	 * the entries (half a KiB each) are in memory only for the sandboxes
	 * that exist. */
	uint64_t *cgids;
	uint32_t *at;
	struct sg_sandbox_entry *pool; /* SG_MAX_SANDBOXES */
	uint32_t *free;                /* pool entries given back, last first */
	uint32_t n_free, pool_used;
	uint32_t n_sandboxes;
	int inotify_fd;
	int root_wd, policy_wd;
	struct tenant_watch *watches;
	size_t n_watches, cap_watches;
	uint64_t policy_generation; /* bumped on every reload */
	uint64_t reloads_ok, reloads_failed;
	uint64_t evictions; /* idle slots given to another tenant */
};

int registry_init(struct registry *r, const struct sg_bpf *bpf, const char *root,
		  const char *policy_dir, const char *host_root);

/* Whether a filesystem root (st_dev, st_ino of an executor's "/") is the
 * one the agent resolves policy paths in. */
bool registry_same_root(const struct registry *r, uint64_t dev, uint64_t ino);
void registry_free(struct registry *r);

/* The policy slot a tenant's sandboxes use: its own, compiled from
 * <policy dir>/<name>.json (now, when `create` and it is not loaded yet),
 * else the default's. A name with no policy file never takes a slot. NULL
 * only for an invalid name. */
struct sg_tenant *registry_tenant(struct registry *r, const char *name, bool create);
struct sg_tenant *registry_tenant_by_idx(struct registry *r, uint32_t idx);

/* Compile a tenant's own policy file into a slot now (an executor found it
 * missing from the pins). 0, or -errno with `err` saying why. */
int registry_compile_tenant(struct registry *r, const char *name, char *err, size_t len);

/* Start enforcing on <root>/<tenant>/<name>, or adopt the map entries an
 * executor wrote for it. Idempotent. */
int registry_add(struct registry *r, const char *tenant, const char *name,
		 struct sg_sandbox_entry **out);
void registry_remove(struct registry *r, uint64_t cgid);
struct sg_sandbox_entry *registry_find(struct registry *r, uint64_t cgid);

/* Make sure the sandbox's run and batch ids are loaded before an event of
 * it is written: they are read from the pinned sg_sandbox_ids at every
 * event (one map lookup), because they change: a prepared sandbox is
 * enrolled before its request is known, and a sandbox with a warm
 * interpreter serves calls of several batches, each enrolling its own ids
 * before it starts (docs/warm-interpreters.md). The executor's
 * verdict request drains the ring buffer at the end of each call, before
 * the next call's ids are written. Empty ids leave the known ones. */
void registry_event_ids(struct registry *r, struct sg_sandbox_entry *s);

/* Map entries no sandbox of ours accounts for: adopted when their cgroup
 * exists (an executor enrolled it), deleted when it is gone. */
void registry_sweep_maps(struct registry *r);

/* Path of a sandbox's cgroup. */
void registry_cgroup_path(const struct registry *r, const struct sg_sandbox_entry *s, char *buf,
			  size_t len);

/* Read pending inotify events (sandboxes and policy files). */
void registry_handle_inotify(struct registry *r);

/* Re-read every tenant's policy; a file that does not validate is logged
 * and rejected, its tenant keeps the policy in force. Returns the number
 * of files rejected. `changed_only`: only files whose version changed, and
 * new ones (inotify); else all of them (SIGHUP). */
int registry_reload_policies(struct registry *r, bool changed_only);

/* Iterate live sandboxes: for (s = NULL; (s = registry_next(r, s));) */
struct sg_sandbox_entry *registry_next(struct registry *r, struct sg_sandbox_entry *prev);

/* tenants.c, for registry.c */
int tenants_init(struct registry *r);
void tenants_use(struct registry *r, uint32_t slot, int delta);
void tenants_release_unused(struct registry *r);
void tenants_free(struct registry *r);

#endif
