/* Keys and values of the maps shared by every BPF program and the agent.
 * All maps are pinned under SG_PIN_ROOT, so a restarted agent adopts them. */
#ifndef SG_MAPS_H
#define SG_MAPS_H
#include "bpf_types.h"

#define SG_PIN_ROOT "/sys/fs/bpf/sandguard"
/* Policy slots (sg_policies, sg_tenant_names, sg_tenant_index): a fleet has
 * thousands of customers, each with a policy file. sg_policies and the
 * index are hashes without preallocation, so their memory follows the
 * tenants loaded; sg_tenant_names is an array of SG_TENANT_MAX bytes a
 * slot (1 MiB). Pins of an agent built with another value are refused at
 * start (pin_check.c). */
#define SG_MAX_TENANTS   16384
#define SG_MAX_SANDBOXES 8192
#define SG_MAX_EGRESS    32
/* Entries of all tenants' read-only and exec sets (sg_paths, sg_exec_files),
 * twice over during a reload (both generations): a few dozen per tenant for
 * SG_MAX_TENANTS tenants. Hashes without preallocation: the kernel's memory
 * follows the entries present, not these caps. */
#define SG_MAX_PATH_RULES (1 << 20)
#define SG_MAX_EXEC_FILES (1 << 20)
#define SG_RINGBUF_BYTES  (4 << 20)
#define SG_DRAIN_MS       10 /* the agent drains events submitted without a wakeup */
#define SG_WALK_DEPTH     32 /* dentry ancestors examined per open */

/* sg_sandboxes: cgroup id -> sandbox. Absent = not a sandbox: every hook
 * returns after this one lookup. Written before the sandbox runs any code,
 * by the executor (src/control/enroll.c) or by the agent. */
struct sg_sandbox {
	__u32 tenant;      /* index into sg_policies: the tenant's slot, or SG_TENANT_DEFAULT */
	__u32 flags;       /* SG_SB_* */
	__u64 scratch_dev; /* kernel dev_t (MKDEV: major << 20 | minor) */
	__u64 scratch_ino;
};

/* The scratch is a filesystem of its own (a tmpfs the executor mounted
 * for this sandbox): every file on scratch_dev is inside it, at any depth,
 * with no ancestor walk. Without the flag the scratch is a directory,
 * found by (dev, ino) among a file's ancestors. */
#define SG_SB_SCRATCH_FS 1

/* The slot of the default policy: every tenant without a policy file of
 * its own uses it, so a name nobody configured never takes a slot. */
#define SG_TENANT_DEFAULT 0

/* sg_sandbox_state: cgroup id -> counters and the first violation, written
 * by the programs, read by the agent and the executor. */
struct sg_sandbox_state {
	__s64 tasks; /* live tasks (threads), seeded by the agent */
	__u64 forks;
	__u32 tripped;     /* a kill-class violation happened */
	__u32 first_rule;  /* enum sg_rule + 1 of the first violation, 0 = none */
	__u64 first_ts_ns; /* when it happened (for kill latency) */
	__u64 violations;
	__u64 events;       /* events reserved for this sandbox */
	__u64 suppressed;   /* events not sent: past SG_EVENTS_PER_SANDBOX */
	__u32 trip_rule;    /* enum sg_rule + 1 of the kill-class violation */
	__u32 trip_evented; /* its event was sent (exempt from the cap) */
};

/* The rule (enum sg_rule) a sandbox was tripped for, -1 when none: the
 * one place the state's encoding (rule + 1, 0 = none) is decoded. */
static inline int sg_state_kill_rule(const struct sg_sandbox_state *st)
{
	return st->tripped && st->trip_rule ? (int)st->trip_rule - 1 : -1;
}

/* The rule of the first violation of any class, -1 when none. */
static inline int sg_state_first_rule(const struct sg_sandbox_state *st)
{
	return st->first_rule ? (int)st->first_rule - 1 : -1;
}

/* A sandbox gets at most this many events that are not kills: one tenant
 * flooding denied sendto()s must not fill the ring buffer every tenant
 * shares. Kills are bounded by the fork limits and always sent. */
#define SG_EVENTS_PER_SANDBOX 1024

/* sg_policies: tenant index -> the kernel's view of the tenant policy. */
struct sg_egress_rule_k {
	__u8 addr[16]; /* IPv6, IPv4 as ::ffff:a.b.c.d */
	__u8 prefix;   /* 0..128 over the mapped form */
	__u8 proto;    /* 0 any, 6 tcp, 17 udp */
	__u16 port;    /* 0 any, host byte order */
};

struct sg_policy_k {
	__u32 enabled;
	__u32 max_tasks; /* 0 = unlimited */
	__u32 max_forks; /* 0 = unlimited */
	__u8 action[8];  /* enum sg_policy_action per enum sg_rule */
	__u32 n_egress;
	__u32 allow_unix;   /* unix connect/sendmsg allowed */
	__u32 set_gen;      /* which generation of sg_paths/sg_exec_files
	                      * entries is in force (0 or 1): a reload fills
	                      * the other one, then swaps this value */
	__u32 allow_listen; /* TCP to the loopback allowed: the sandbox's own
	                     * network namespace, its own listeners */
	struct sg_egress_rule_k egress[SG_MAX_EGRESS];
};

/* sg_paths: allowed files and directories, judged by identity. An open is
 * allowed when the file or one of its ancestors is present for the
 * sandbox's tenant (read-only allowlist) or is the sandbox's scratch. */
#define SG_SET_KEY(tenant, gen) ((tenant) | ((__u32)(gen) << 31))
struct sg_path_key {
	__u32 tenant; /* SG_SET_KEY(tenant index, set_gen) */
	__u32 dev;    /* kernel dev_t */
	__u64 ino;
};
#define SG_PATH_READ  1
#define SG_PATH_WRITE 2

/* sg_exec_files: executables a tenant may run, by identity (the globs of
 * the policy expanded when it is loaded). */
struct sg_exec_key {
	__u32 tenant; /* SG_SET_KEY(tenant index, set_gen) */
	__u32 dev;
	__u64 ino;
};

/* Pinned maps no program reads (the agent creates them, its peers read
 * them): sg_tenant_names (ARRAY, slot -> name, "" = free), sg_tenant_index
 * (HASH, name -> slot: the tenants whose own policy is compiled),
 * sg_killed (HASH, cgroup id -> enum sg_rule + 1 of a kill the agent
 * carried out: a verdict read from the pins never claims a kill that
 * did not happen), and sg_sandbox_ids (HASH, cgroup id -> struct
 * sg_sandbox_ids). */

/* sg_sandbox_ids: who a sandbox runs for, written by its executor when it
 * enrolls the sandbox (before sg_sandboxes, so before any of its code
 * runs), read by the agent to put the run and batch ids on every event
 * line, even when it was down at enrollment; deleted with the sandbox's
 * other entries. NUL-terminated strings, "" = unknown. */
#define SG_IDS_TENANT_LEN 64  /* SG_TENANT_MAX */
#define SG_IDS_ID_LEN     128 /* SG_ID_BUF */
struct sg_sandbox_ids {
	char tenant[SG_IDS_TENANT_LEN];
	char sandbox[SG_IDS_ID_LEN];
	char run_id[SG_IDS_ID_LEN];
	char batch_id[SG_IDS_ID_LEN];
};

/* Terminates each string, whoever wrote the entry (readers call it). */
static inline void sg_sandbox_ids_terminate(struct sg_sandbox_ids *ids)
{
	ids->tenant[SG_IDS_TENANT_LEN - 1] = 0;
	ids->sandbox[SG_IDS_ID_LEN - 1] = 0;
	ids->run_id[SG_IDS_ID_LEN - 1] = 0;
	ids->batch_id[SG_IDS_ID_LEN - 1] = 0;
}

/* sg_config[0]: global switches written by the agent. */
struct sg_config {
	__u32 active_gen;    /* programs of another generation stay silent */
	__u32 file_mode;     /* enum sg_enforce_mode chosen for files */
	__u32 exec_mode;     /* and for execs */
	__u32 verdict_epoch; /* bumped after every change of a policy: file
			       * verdicts remembered under another epoch
			       * are never used (see struct sg_verdict_key) */
};

/* The file programs remember, per tenant, the identities of files they
 * found allowed by the tenant's read-only allowlist (an LRU map of each
 * generation, not pinned): an allowed open then costs one lookup, with no
 * policy lookup and no walk up the file's ancestors. A verdict is used
 * only in the epoch it was found in: the agent bumps the epoch after
 * every policy swap or removal, and a program reads the epoch before the
 * policy, so a verdict of an old policy is never used once the bump is
 * done (the swap takes effect for remembered verdicts at the bump).
 * Denials are never remembered. A file is named by its device, inode
 * number and inode generation: an allowed file deleted (a package
 * upgrade) frees its inode number for a new file anywhere on the same
 * filesystem, which the generation tells apart (ext4, xfs, btrfs, tmpfs
 * give each new inode a random or increasing one). */
struct sg_verdict_key {
	__u32 tenant; /* index into sg_policies */
	__u32 dev;
	__u64 ino;
	__u32 epoch;      /* sg_config.verdict_epoch when found */
	__u32 generation; /* the inode's i_generation */
};
#define SG_VERDICT_CACHE 16384

#endif
