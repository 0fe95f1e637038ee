/* Maps and helpers shared by every sandguard BPF object. Each map is pinned
 * by name under SG_PIN_ROOT: the objects loaded by one agent share them,
 * and a restarted agent adopts them with their contents. */
#ifndef SG_COMMON_BPF_H
#define SG_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "abi/events.h"
#include "abi/maps.h"

/* Atomics. Kernels before 5.12 know only BPF_XADD: an atomic add whose
 * result is unused. The agent loads objects built with SG_BPF_COMPAT there
 * (the probe's "atomic_fetch" feature): an add is followed by a read, and
 * a claim (compare-and-swap from 0) by a read then a write. Counts stay
 * exact; a limit check may see a racing CPU's add too, so it trips no
 * later than it should; two CPUs racing for a first violation may both
 * event it, and the agent kills once. */
#define sg_read_once(x) (*(volatile typeof(x) *)&(x))
#define sg_add(p, v)    ((void)__sync_fetch_and_add((p), (v)))
#ifdef SG_BPF_COMPAT
#define sg_add_fetch(p, v)          \
	({                          \
		sg_add((p), (v));   \
		sg_read_once(*(p)); \
	})
#define sg_claim(p, v)                                  \
	({                                              \
		bool sg_won_ = sg_read_once(*(p)) == 0; \
		if (sg_won_)                            \
			sg_read_once(*(p)) = (v);       \
		sg_won_;                                \
	})
#else
#define sg_add_fetch(p, v) (__sync_fetch_and_add((p), (v)) + (v)) /* the new value */
#define sg_claim(p, v)     (__sync_val_compare_and_swap((p), 0, (v)) == 0)
#endif

#define SG_SIGKILL     9
#define SG_EPERM       1
#define SG_EACCES      13
#define SG_FMODE_WRITE 0x2
#define SG_FMODE_EXEC  0x20
#define SG_FMODE_PATH  0x4000

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SG_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct sg_sandbox);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_sandboxes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SG_MAX_SANDBOXES);
	__type(key, __u64);
	__type(value, struct sg_sandbox_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_state SEC(".maps");

/* A hash, not an array: an update swaps the whole element, so a reload is
 * never seen half-written by a program. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SG_MAX_TENANTS);
	__uint(map_flags,
	       BPF_F_NO_PREALLOC); /* a replaced element is freed after RCU, never reused under a reader */
	__type(key, __u32);
	__type(value, struct sg_policy_k);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_policies SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SG_MAX_PATH_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory follows the tenants loaded */
	__type(key, struct sg_path_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SG_MAX_EXEC_FILES);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* memory follows the tenants loaded */
	__type(key, struct sg_exec_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_exec_files SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sg_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SG_RINGBUF_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_events SEC(".maps");

/* Events that found the ring buffer full, per CPU: never silent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_drops SEC(".maps");

/* The generation this object was loaded as (set before load). A restarted
 * agent attaches its programs first and flips sg_config.active_gen, so
 * there is never a moment with no program enforcing, nor one where both
 * generations count the same fork. */
const volatile __u32 sg_gen = 0;

/* The cgroup level of sandboxes (<root>/<tenant>/<sandbox>), set before
 * load. A task is judged by its ancestor at that level, so a sandbox's
 * child cgroups are the sandbox too. */
const volatile __u32 sg_sandbox_level = 0;

/* Whether tracing and LSM programs may call
 * bpf_get_current_ancestor_cgroup_id() (set before load from the probe;
 * older kernels allow it only in cgroup programs). Without it they read
 * the ancestor from the task's cgroup; the branch not taken is dead code
 * the verifier never checks. */
const volatile bool sg_ancestor_helper = true;

static __always_inline struct sg_config *sg_cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&sg_config, &zero);
}

/* Whether this object's generation is the one enforcing (see sg_gen). */
static __always_inline bool sg_gen_active(void)
{
	struct sg_config *cfg = sg_cfg();

	return cfg && cfg->active_gen == sg_gen;
}

/* The two layouts of a cgroup's ancestors, for CO-RE: an array of ids
 * (before 6.0) or of cgroups. */
struct cgroup___ids {
	int level;
	__u64 ancestor_ids[];
} __attribute__((preserve_access_index));

struct cgroup___ptrs {
	int level;
	struct cgroup *ancestors[];
} __attribute__((preserve_access_index));

/* The id of the current task's cgroup v2 ancestor at `level`, 0 when the
 * task's cgroup is not that deep: what the helper answers. */
static __always_inline __u64 sg_task_ancestor_cgid(__u32 level)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct cgroup *cg = BPF_CORE_READ(task, cgroups, dfl_cgrp);
	__u64 id = 0;

	if (!cg || BPF_CORE_READ(cg, level) < (int)level || level > 255)
		return 0;
	if (bpf_core_field_exists(struct cgroup___ids, ancestor_ids)) {
		struct cgroup___ids *old = (void *)cg;

		bpf_probe_read_kernel(&id, sizeof(id), &old->ancestor_ids[level]);
	} else {
		struct cgroup___ptrs *cur = (void *)cg;
		struct cgroup *up = NULL;

		bpf_probe_read_kernel(&up, sizeof(up), &cur->ancestors[level]);
		id = BPF_CORE_READ(up, kn, id);
	}
	return id;
}

static __always_inline struct sg_sandbox *sg_sandbox_of(__u64 *cgid)
{
	struct sg_sandbox *sb;

	/* 0: the task's cgroup is not as deep as sandboxes are (most of a
	 * node's processes): no lookup at all. */
	if (!*cgid)
		return NULL;
	sb = bpf_map_lookup_elem(&sg_sandboxes, cgid);
	return sb && sg_gen_active() ? sb : NULL;
}

/* The one lookup every process pays: is the current task in a sandbox?
 * Programs of an inactive generation see no sandbox at all. For tracing
 * and LSM programs. */
static __always_inline __u64 sg_current_cgid(void)
{
	if (sg_ancestor_helper)
		return bpf_get_current_ancestor_cgroup_id(sg_sandbox_level);
	return sg_task_ancestor_cgid(sg_sandbox_level);
}

static __always_inline struct sg_sandbox *sg_current_sandbox(__u64 *cgid)
{
	*cgid = sg_current_cgid();
	return sg_sandbox_of(cgid);
}

/* The same, handing back the configuration it read for the generation
 * check, for a hot path that needs more of it (the fallback's open): one
 * read of sg_config instead of one per question. */
static __always_inline struct sg_sandbox *sg_current_sandbox_cfg(__u64 *cgid,
								 struct sg_config **cfg)
{
	struct sg_sandbox *sb;

	*cgid = sg_current_cgid();
	if (!*cgid)
		return NULL;
	sb = bpf_map_lookup_elem(&sg_sandboxes, cgid);
	if (!sb)
		return NULL;
	*cfg = sg_cfg();
	return *cfg && (*cfg)->active_gen == sg_gen ? sb : NULL;
}

/* The same for cgroup sock_addr programs, which always have the helper
 * (and cannot read the task). */
static __always_inline struct sg_sandbox *sg_sock_sandbox(__u64 *cgid)
{
	*cgid = bpf_get_current_ancestor_cgroup_id(sg_sandbox_level);
	return sg_sandbox_of(cgid);
}

static __always_inline struct sg_policy_k *sg_policy(__u32 tenant)
{
	return bpf_map_lookup_elem(&sg_policies, &tenant);
}

static __always_inline __u8 sg_action(const struct sg_policy_k *pol, enum sg_rule rule)
{
	/* No policy compiled yet for the tenant: fail closed. */
	if (!pol || rule >= 8)
		return SG_POLICY_KILL;
	return pol->action[rule & 7];
}

static __always_inline void sg_count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&sg_drops, &zero);

	if (n)
		*n += 1; /* per-CPU slot: no atomics needed */
}

/* Reserve an event and fill in what every program may know. Who did it is
 * filled in by sg_event_task() (tracing and LSM programs) or
 * sg_event_current() (cgroup sock_addr programs, which have fewer
 * helpers); cgroup_skb programs run in no task's context. */
static __always_inline struct sg_event *sg_event_reserve_st(struct sg_sandbox_state *st, __u64 cgid,
							    const struct sg_sandbox *sb, __u32 type,
							    __u32 action, __u32 rule)
{
	struct sg_event *e;

	/* The one event of the sandbox's kill-class trip always goes out;
	 * past the cap, others are only counted. */
	if (st && action != SG_ACTION_KILLED &&
	    !(st->tripped && st->trip_rule == rule + 1 && sg_claim(&st->trip_evented, 1)) &&
	    sg_add_fetch(&st->events, 1) > SG_EVENTS_PER_SANDBOX) {
		sg_add(&st->suppressed, 1);
		return NULL;
	}
	e = bpf_ringbuf_reserve(&sg_events, sizeof(*e), 0);
	if (!e) {
		sg_count_drop();
		return NULL;
	}
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = cgid;
	e->type = type;
	e->action = action;
	e->tenant = sb->tenant;
	e->rule = rule;
	e->pid = 0;
	e->ppid = 0;
	e->uid = 0;
	e->flags = SG_EVF_NO_TASK; /* until sg_event_task/_current say who */
	e->comm[0] = 0;
	return e;
}

/* The same, looking up the sandbox's state; a program that already has it
 * (tasks.bpf.c) passes it to sg_event_reserve_st() instead. */
static __always_inline struct sg_event *sg_event_reserve(__u64 cgid, const struct sg_sandbox *sb,
							 __u32 type, __u32 action, __u32 rule)
{
	return sg_event_reserve_st(bpf_map_lookup_elem(&sg_state, &cgid), cgid, sb, type, action,
				   rule);
}

/* Submitting an event, and when the agent hears of it. An event the
 * policy acts on (denied, killed) wakes the agent at once: a kill must
 * not wait. Allowed and logged events (execs, exits, logged opens) are
 * submitted without a wakeup, so a busy sandbox does not wake the agent
 * once per exec; the agent drains them on a short timer
 * (SG_DRAIN_MS), or at once when they fill SG_WAKEUP_BYTES of the ring. */
#define SG_WAKEUP_BYTES (SG_RINGBUF_BYTES / 16)

static __always_inline void sg_event_submit(struct sg_event *e)
{
	__u64 flags = BPF_RB_FORCE_WAKEUP;

	if ((e->action == SG_ACTION_ALLOWED || e->action == SG_ACTION_LOGGED) &&
	    bpf_ringbuf_query(&sg_events, BPF_RB_AVAIL_DATA) < SG_WAKEUP_BYTES)
		flags = BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

/* (bpf_get_current_task_btf() is 5.11+: the plain task pointer and CO-RE
 * reads work everywhere but in the fallback's open programs, which need
 * 5.15 anyway.) */
static __always_inline void sg_event_task(struct sg_event *e)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->flags = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* The same for a tracing program that has the current task as a BTF
 * pointer (a tp_btf argument): its parent by plain loads instead of
 * bpf_get_current_task() and two helper reads. */
static __always_inline void sg_event_task_btf(struct sg_event *e, const struct task_struct *task)
{
	e->pid = task->tgid;
	e->ppid = task->real_parent->tgid;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->flags = 0;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

static __always_inline void sg_event_current(struct sg_event *e)
{
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->flags = SG_EVF_NO_PPID;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* Book a violation in the sandbox's state. Returns true for the first one
 * of a kill-class violation (callers event it; later ones are counted). */
static __always_inline bool sg_violation(__u64 cgid, enum sg_rule rule, bool kill_class)
{
	struct sg_sandbox_state *st = bpf_map_lookup_elem(&sg_state, &cgid);

	if (!st)
		return true;
	sg_add(&st->violations, 1);
	if (sg_claim(&st->first_rule, rule + 1))
		st->first_ts_ns = bpf_ktime_get_boot_ns();
	if (!kill_class)
		return true;
	if (!sg_claim(&st->tripped, 1))
		return false;
	st->trip_rule = rule + 1; /* what the kill is for, whatever came first */
	return true;
}

/* A refusal by the policy, reported: the rule's action (what the caller
 * answers by), the violation booked (a kill-class one trips the sandbox),
 * and the event reserved as denied, or as logged when the policy only
 * logs. NULL when no event goes out (the sandbox's cap, a full ring); the
 * caller fills in what it knows and submits it. */
static __always_inline struct sg_event *sg_deny_report(__u64 cgid, const struct sg_sandbox *sb,
						       const struct sg_policy_k *pol,
						       enum sg_rule rule, __u32 type, __u8 *action)
{
	*action = sg_action(pol, rule);
	sg_violation(cgid, rule, *action == SG_POLICY_KILL);
	return sg_event_reserve(cgid, sb, type,
				*action == SG_POLICY_LOG ? SG_ACTION_LOGGED : SG_ACTION_DENIED,
				rule);
}

/* Whether the sandbox already tripped a kill: its remaining tasks are
 * about to die, so their events are noise (a fork bomb's exits). */
static __always_inline bool sg_tripped(__u64 cgid)
{
	struct sg_sandbox_state *st = bpf_map_lookup_elem(&sg_state, &cgid);

	return st && st->tripped;
}

/* Whether the file being executed is one the tenant may run, by identity.
 * `file` is a BTF pointer (bprm->file of a tp_btf or LSM argument, 5.5+),
 * so its inode's device and number are plain loads, not helper calls. */
static __always_inline bool sg_exec_allowed(const struct sg_sandbox *sb,
					    const struct sg_policy_k *pol, const struct file *file)
{
	struct sg_exec_key key = {};
	struct inode *inode;

	if (!pol || !file)
		return false;
	inode = file->f_inode;
	key.tenant = SG_SET_KEY(sb->tenant, pol->set_gen);
	key.dev = inode->i_sb->s_dev;
	key.ino = inode->i_ino;
	return bpf_map_lookup_elem(&sg_exec_files, &key) != NULL;
}

#endif
