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
	__type(key, struct sg_path_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sg_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SG_MAX_EXEC_FILES);
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

/* The one lookup every process pays: is the current task in a sandbox?
 * Programs of an inactive generation see no sandbox at all. */
static __always_inline struct sg_sandbox *sg_current_sandbox(__u64 *cgid)
{
	struct sg_sandbox *sb;

	*cgid = bpf_get_current_ancestor_cgroup_id(sg_sandbox_level);
	sb = bpf_map_lookup_elem(&sg_sandboxes, cgid);
	return sb && sg_gen_active() ? sb : NULL;
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
static __always_inline struct sg_event *sg_event_reserve(__u64 cgid, const struct sg_sandbox *sb,
							 __u32 type, __u32 action, __u32 rule)
{
	struct sg_sandbox_state *st = bpf_map_lookup_elem(&sg_state, &cgid);
	struct sg_event *e;

	/* The one event of the sandbox's kill-class trip always goes out;
	 * past the cap, others are only counted. */
	if (st && action != SG_ACTION_KILLED &&
	    !(st->tripped && st->trip_rule == rule + 1 &&
	      __sync_val_compare_and_swap(&st->trip_evented, 0, 1) == 0) &&
	    __sync_fetch_and_add(&st->events, 1) >= SG_EVENTS_PER_SANDBOX) {
		__sync_fetch_and_add(&st->suppressed, 1);
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
	e->pad = 0;
	e->comm[0] = 0;
	return e;
}

static __always_inline void sg_event_task(struct sg_event *e)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();

	e->pid = task->tgid;
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

static __always_inline void sg_event_current(struct sg_event *e)
{
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->uid = (__u32)bpf_get_current_uid_gid();
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* Book a violation in the sandbox's state. Returns true for the first one
 * of a kill-class violation (callers event it; later ones are counted). */
static __always_inline bool sg_violation(__u64 cgid, enum sg_rule rule, bool kill_class)
{
	struct sg_sandbox_state *st = bpf_map_lookup_elem(&sg_state, &cgid);

	if (!st)
		return true;
	__sync_fetch_and_add(&st->violations, 1);
	if (__sync_val_compare_and_swap(&st->first_rule, 0, rule + 1) == 0)
		st->first_ts_ns = bpf_ktime_get_boot_ns();
	if (!kill_class)
		return true;
	if (__sync_val_compare_and_swap(&st->tripped, 0, 1) != 0)
		return false;
	st->trip_rule = rule + 1; /* what the kill is for, whatever came first */
	return true;
}

/* Whether the sandbox already tripped a kill: its remaining tasks are
 * about to die, so their events are noise (a fork bomb's exits). */
static __always_inline bool sg_tripped(__u64 cgid)
{
	struct sg_sandbox_state *st = bpf_map_lookup_elem(&sg_state, &cgid);

	return st && st->tripped;
}

/* Whether the file being executed is one the tenant may run, by identity. */
static __always_inline bool sg_exec_allowed(const struct sg_sandbox *sb,
					    const struct sg_policy_k *pol, struct file *file)
{
	struct sg_exec_key key = {};
	struct inode *inode = BPF_CORE_READ(file, f_inode);

	if (!pol)
		return false;
	key.tenant = SG_SET_KEY(sb->tenant, pol->set_gen);
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	return bpf_map_lookup_elem(&sg_exec_files, &key) != NULL;
}

#endif
