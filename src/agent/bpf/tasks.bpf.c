// SPDX-License-Identifier: GPL-2.0
/* Tasks in sandboxes: counts forks and live tasks against the tenant's
 * limits, events every exec (and kills a disallowed one in fallback mode,
 * before it returns to user space), and records how each process ended. */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline struct sg_sandbox_state *state_of(__u64 cgid)
{
	return bpf_map_lookup_elem(&sg_state, &cgid);
}

/* A task is moved into a sandbox (the executor puts the reward program's
 * first process there): it counts as a live task, like a fork would. */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(sg_cgroup_attach, struct cgroup *dst, const char *path, struct task_struct *task,
	     bool threadgroup)
{
	__u64 cgid = BPF_CORE_READ(dst, kn, id);
	struct sg_sandbox_state *st;
	__s64 n = 1;

	/* one generation counts, or a restart counts twice */
	if (!bpf_map_lookup_elem(&sg_sandboxes, &cgid) || !sg_gen_active())
		return 0;
	st = state_of(cgid);
	/* Every thread of the moved process will exit, and each exit counts. */
	if (threadgroup)
		n = BPF_CORE_READ(task, signal, nr_threads);
	if (st)
		sg_add(&st->tasks, n);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sg_fork, struct task_struct *parent, struct task_struct *child)
{
	struct sg_sandbox_state *st;
	struct sg_policy_k *pol;
	struct sg_sandbox *sb;
	struct sg_event *e;
	__u64 cgid, forks;
	__s64 tasks;
	__u32 which = 0, limit = 0;
	__u8 action;

	sb = sg_current_sandbox(&cgid);
	if (!sb)
		return 0;
	st = state_of(cgid);
	if (!st)
		return 0;
	forks = sg_add_fetch(&st->forks, 1);
	tasks = sg_add_fetch(&st->tasks, 1);
	pol = sg_policy(sb->tenant);
	if (!pol)
		return 0;
	if (pol->max_tasks && tasks > pol->max_tasks) {
		which = 1;
		limit = pol->max_tasks;
	} else if (pol->max_forks && forks > pol->max_forks) {
		which = 2;
		limit = pol->max_forks;
	}
	if (!which)
		return 0;

	action = sg_action(pol, SG_RULE_FORK);
	if (action != SG_POLICY_LOG)
		bpf_send_signal(SG_SIGKILL); /* the forker; the agent empties the rest */
	if (!sg_violation(cgid, SG_RULE_FORK, action != SG_POLICY_LOG))
		return 0; /* already tripped: one event per bomb, not one per fork */
	e = sg_event_reserve(cgid, sb, SG_EV_FORK_LIMIT,
			     action == SG_POLICY_LOG ? SG_ACTION_LOGGED : SG_ACTION_KILLED,
			     SG_RULE_FORK);
	if (e) {
		sg_event_task(e);
		e->fork.forks = forks;
		e->fork.tasks = tasks;
		e->fork.limit = limit;
		e->fork.which = which;
		sg_event_submit(e);
	}
	return 0;
}

/* `p` and `bprm` are BTF pointers (tp_btf arguments, 5.5+): their fields
 * are plain loads. Only the two copies (the name, the argv bytes) are
 * helper calls. */
static __always_inline void fill_exec(struct sg_event *e, const struct task_struct *p,
				      const struct linux_binprm *bprm)
{
	struct mm_struct *mm = p->mm;
	unsigned long start = mm->arg_start, end = mm->arg_end, len;

	bpf_probe_read_kernel_str(e->exec.filename, sizeof(e->exec.filename), bprm->filename);
	len = end > start ? end - start : 0;
	/* args_len is the whole argv's length: more than SG_ARGS_LEN says
	 * the copy was truncated. */
	e->exec.args_len = len;
	if (len > SG_ARGS_LEN)
		len = SG_ARGS_LEN;
	if (len == 0 || len > SG_ARGS_LEN ||
	    bpf_probe_read_user(e->exec.args, len, (void *)start)) {
		e->exec.args_len = 0;
		e->exec.args[0] = 0;
	}
}

/* The last executable each CPU found allowed in fallback mode, by
 * identity: a reward loop runs the same binary again and again, and a hit
 * costs no policy and no sg_exec_files lookup. Used only in the epoch it
 * was found in (include/abi/maps.h, struct sg_verdict_key: the agent bumps
 * sg_config.verdict_epoch after every policy swap or removal, and the
 * epoch is read before the policy), for the same tenant slot. Per CPU, so
 * no other CPU's write can tear an entry; a program does not run nested
 * on its own CPU. Denials are never remembered. Not pinned: a new
 * generation starts empty. */
struct exec_seen {
	__u32 valid;
	__u32 epoch;
	__u32 tenant;
	__u32 dev;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_seen);
} sg_exec_seen SEC(".maps");

/* Whether the fallback allows the exec of `file`: the per-CPU last
 * allowed identity first, then the policy's allowlist (sg_exec_allowed),
 * remembered when allowed. *pol is looked up only on a miss (NULL on a
 * hit: only a refusal needs it). */
static __always_inline bool exec_allowed_cached(const struct sg_sandbox *sb, __u32 epoch,
						const struct file *file, struct sg_policy_k **pol)
{
	struct inode *inode = file ? file->f_inode : NULL;
	__u32 zero = 0, dev = inode ? inode->i_sb->s_dev : 0;
	__u64 ino = inode ? inode->i_ino : 0;
	struct exec_seen *seen = bpf_map_lookup_elem(&sg_exec_seen, &zero);

	*pol = NULL;
	if (seen && seen->valid && seen->epoch == epoch && seen->tenant == sb->tenant &&
	    seen->dev == dev && seen->ino == ino)
		return true;
	*pol = sg_policy(sb->tenant);
	if (!sg_exec_allowed(sb, *pol, file))
		return false;
	if (seen && inode) {
		seen->valid = 1;
		seen->epoch = epoch;
		seen->tenant = sb->tenant;
		seen->dev = dev;
		seen->ino = ino;
	}
	return true;
}

/* Runs when the new image is in place but before it returns to user
 * space: a SIGKILL sent here means no instruction of it ever runs. `p` is
 * the current task. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(sg_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct sg_sandbox_state *st;
	struct sg_policy_k *pol = NULL;
	struct sg_config *cfg = NULL;
	struct sg_sandbox *sb;
	struct sg_event *e;
	__u32 type = SG_EV_EXEC, action = SG_ACTION_ALLOWED, epoch;
	__u64 cgid;

	sb = sg_current_sandbox_cfg(&cgid, &cfg);
	if (!sb || !cfg)
		return 0;
	/* Before the policy: see sg_exec_seen. */
	epoch = sg_read_once(cfg->verdict_epoch);
	st = state_of(cgid);
	/* In LSM mode bprm_check_security already refused what is not
	 * allowed; here the check is the fallback's. */
	if (cfg->exec_mode == SG_MODE_FALLBACK &&
	    !exec_allowed_cached(sb, epoch, bprm->file, &pol)) {
		__u8 act = sg_action(pol, SG_RULE_EXEC);

		if (act == SG_POLICY_LOG) {
			action = SG_ACTION_LOGGED;
			sg_violation(cgid, SG_RULE_EXEC, false);
		} else {
			bpf_send_signal(SG_SIGKILL);
			type = SG_EV_EXEC_DENIED;
			action = SG_ACTION_KILLED;
			sg_violation(cgid, SG_RULE_EXEC, act == SG_POLICY_KILL);
		}
	} else if (st && st->tripped) {
		return 0;
	}
	e = sg_event_reserve_st(st, cgid, sb, type, action, SG_RULE_EXEC);
	if (!e)
		return 0;
	sg_event_task_btf(e, p);
	fill_exec(e, p, bprm);
	e->exec.mode = type == SG_EV_EXEC_DENIED ? SG_MODE_FALLBACK : SG_MODE_NONE;
	sg_event_submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sg_exit, struct task_struct *p)
{
	struct sg_sandbox_state *st;
	struct sg_sandbox *sb;
	struct sg_event *e;
	__u32 code;
	bool oom;
	__u64 cgid;

	sb = sg_current_sandbox(&cgid);
	if (!sb)
		return 0;
	st = state_of(cgid);
	if (st)
		sg_add(&st->tasks, -1);
	/* The OOM killer marks its victim's thread group (signal->oom_mm,
	 * set once, kept until the group is gone). */
	oom = p->signal->oom_mm != NULL;
	/* One event per process (its leader), none from a sandbox being
	 * emptied after a kill: a dying fork bomb would flood the buffer. */
	if (p->pid != p->tgid || (st && st->tripped && !oom))
		return 0;
	e = sg_event_reserve_st(st, cgid, sb, SG_EV_EXIT, SG_ACTION_ALLOWED, 0);
	if (!e)
		return 0;
	sg_event_task_btf(e, p);
	code = p->exit_code;
	e->exit.signal = code & 0x7f;
	e->exit.core = (code & 0x80) ? 1 : 0;
	e->exit.exit_code = e->exit.signal ? 0 : (code >> 8) & 0xff;
	e->exit.oom_killed = oom ? 1 : 0;
	sg_event_submit(e);
	return 0;
}
