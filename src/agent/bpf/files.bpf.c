// SPDX-License-Identifier: GPL-2.0
/* Files and execs. An open is judged on the file the kernel resolved, not
 * on the string the program passed: a file on the sandbox's own scratch
 * filesystem is its; otherwise the file and its dentry ancestors (crossing
 * mounts, so bind mounts keep their identity) are looked up by (dev, ino)
 * against the tenant's read-only allowlist (and a directory scratch). Symlinks, "..", relative
 * paths, openat2 and files created after the policy loaded are therefore
 * all judged the same way.
 *
 * LSM mode: file_open refuses with EACCES (its file is a BTF pointer,
 * read by plain loads), bprm_check_security refuses a disallowed exec;
 * both attached to the sandguard root cgroup where the kernel can
 * (lsm_cgroup, 6.0+), else to the hooks for every task. Fallback mode (no BPF LSM): the exit of each
 * open syscall looks the new fd up and kills the task before it returns to
 * user space; io_uring opens are not seen (docs/kernel-support.md). The
 * fallback programs are attached only while a sandbox exists
 * (src/control/ondemand.c): a syscall tracepoint slows every system call
 * of every task on the node.
 *
 * An allowed open is judged by the file's identity first (the verdicts
 * remembered per tenant and policy epoch); the policy is looked up and
 * the walk made only for a file not remembered, and names are copied, by
 * a second walk, only for a denial.
 *
 * The fallback's open programs come in two sets, the same judgement with
 * the opened file's fields read two ways: by plain loads through
 * bpf_rdonly_cast() where the kernel has it (6.2+), else by a helper call
 * per field. The agent loads one set (the probe's "rdonly_cast" feature,
 * struct sg_modes.file_loads); a kernel without the kfunc refuses even a
 * program that only names it, so the helper set never does. */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum verdict { ALLOW = 0, DENY = 1 };

#define SG_O_ACCMODE 03
#define SG_O_CREAT   0100
#define SG_O_TRUNC   01000

/* An open that asks to write: for writing, or to create or truncate. */
static __always_inline bool flags_write(__u32 flags)
{
	return (flags & SG_O_ACCMODE) != 0 || (flags & (SG_O_CREAT | SG_O_TRUNC));
}

/* Scratch space for the walk's path names: too big for the stack next to
 * the event. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sg_file_detail);
} sg_walk_buf SEC(".maps");

/* Files found allowed by the tenant's read-only allowlist, by identity
 * (include/abi/maps.h, struct sg_verdict_key): SG_PATH_* bits. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SG_VERDICT_CACHE);
	__type(key, struct sg_verdict_key);
	__type(value, __u8);
} sg_verdicts SEC(".maps");

/* How the walk up a file's ancestors ended. */
enum walk_end {
	WALK_DENY = 0,  /* no allowed ancestor within SG_WALK_DEPTH: fail closed */
	WALK_SCRATCH,   /* inside the sandbox's directory scratch */
	WALK_ALLOWLIST, /* an allowlisted identity: *access says for what */
};

/* Walk from the file up its dentry ancestors, crossing mounts (so bind
 * mounts keep their identity), to the first identity the tenant's
 * allowlist (or the sandbox's directory scratch) names. With `d`, the
 * names walked are kept in it for the event; without, nothing is copied
 * (the allowed path: names are only wanted for a denial). */
static __always_inline enum walk_end walk(const struct sg_sandbox *sb,
					  const struct sg_policy_k *pol, const struct path *path,
					  __u8 *access, struct sg_file_detail *d)
{
	struct dentry *dentry = BPF_CORE_READ(path, dentry);
	struct vfsmount *vfsmnt = BPF_CORE_READ(path, mnt);
	struct mount *mnt = container_of(vfsmnt, struct mount, mnt);
	/* A directory scratch's inode, looked for among the ancestors on its
	 * own mount only (0: no longer looked for): something mounted inside
	 * it is not the sandbox's. */
	__u64 scratch_ino = (sb->flags & SG_SB_SCRATCH_FS) ? 0 : sb->scratch_ino;
	__u32 depth;

	if (d)
		d->depth = 0;
	for (int i = 0; i < SG_WALK_DEPTH; i++) {
		struct sg_path_key key = {};
		struct dentry *mnt_root, *parent;
		__u8 *found;

		key.dev = BPF_CORE_READ(dentry, d_sb, s_dev);
		key.ino = BPF_CORE_READ(dentry, d_inode, i_ino);
		if (scratch_ino && key.ino == scratch_ino && key.dev == sb->scratch_dev)
			return WALK_SCRATCH;
		if (pol) {
			key.tenant = SG_SET_KEY(sb->tenant, pol->set_gen);
			found = bpf_map_lookup_elem(&sg_paths, &key);
			if (found) {
				*access = *found;
				return WALK_ALLOWLIST;
			}
		}

		mnt_root = BPF_CORE_READ(mnt, mnt.mnt_root);
		if (dentry == mnt_root) {
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
			if (up == mnt)
				break; /* the root of the mount tree */
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			scratch_ino = 0;
			continue;
		}
		if (d) {
			/* (The count lives in map memory: a local would multiply
			 * the states the verifier walks by the names kept.) */
			depth = d->depth;
			if (depth < SG_PATH_COMPS)
				bpf_probe_read_kernel_str(d->comps[depth & (SG_PATH_COMPS - 1)],
							  SG_COMP_LEN,
							  BPF_CORE_READ(dentry, d_name.name));
			d->depth = depth + 1;
		}
		parent = BPF_CORE_READ(dentry, d_parent);
		if (parent == dentry)
			break;
		dentry = parent;
	}
	return WALK_DENY;
}

/* The verdict on an opened file for the sandbox, when it was not found
 * allowed before: the walk decides, an allowlisted file is remembered
 * under `vkey`, and only a denial walks again to keep the names for its
 * event. */
static __always_inline enum verdict
judge_walk(const struct sg_sandbox *sb, const struct sg_policy_k *pol, const struct path *path,
	   bool write, struct sg_verdict_key *vkey, struct sg_file_detail *d)
{
	__u8 access = 0;
	enum walk_end end;

	end = walk(sb, pol, path, &access, NULL);
	if (end == WALK_SCRATCH)
		return ALLOW;
	if (end == WALK_ALLOWLIST) {
		/* Remembered for the tenant's policy: the directory scratch
		 * is the sandbox's alone, never. */
		if (pol)
			bpf_map_update_elem(&sg_verdicts, vkey, &access, BPF_ANY);
		if (!write || (access & SG_PATH_WRITE))
			return ALLOW;
	}
	walk(sb, pol, path, &access, d); /* the names, for the event */
	return DENY;
}

static __always_inline struct sg_file_detail *walk_buf(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&sg_walk_buf, &zero);
}

static __always_inline void emit_file(__u64 cgid, const struct sg_sandbox *sb, __u32 type,
				      __u32 action, const struct sg_file_detail *d)
{
	struct sg_event *e = sg_event_reserve(cgid, sb, type, action, SG_RULE_FILE);

	if (!e)
		return;
	sg_event_task(e);
	__builtin_memcpy(&e->file, d, sizeof(*d));
	sg_event_submit(e);
}

/* What the verdict needs of an opened file. */
struct file_id {
	__u32 fmode;
	__u32 dev;
	__u64 ino;
	__u32 generation;
};

/* The file's fields by a helper call each: works on every kernel, from a
 * BTF pointer (LSM) or a plain one (the fallback's fd table slot). */
static __always_inline void file_id_by_helpers(struct file *file, struct file_id *id)
{
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	struct inode *inode = BPF_CORE_READ(dentry, d_inode);

	id->fmode = BPF_CORE_READ(file, f_mode);
	id->dev = BPF_CORE_READ(dentry, d_sb, s_dev);
	id->ino = BPF_CORE_READ(inode, i_ino);
	id->generation = BPF_CORE_READ(inode, i_generation);
}

/* The same fields by plain loads from a BTF pointer: the verifier guards
 * each load against a fault (a bad pointer reads 0) instead of calling a
 * helper for it. LSM's file is such a pointer on every supported kernel
 * (5.10+); the fallback's needs bpf_rdonly_cast() first. */
static __always_inline void file_id_by_loads(const struct file *f, struct file_id *id)
{
	struct dentry *dentry = f->f_path.dentry;
	struct inode *inode = dentry->d_inode;

	id->fmode = f->f_mode;
	id->dev = dentry->d_sb->s_dev;
	id->ino = inode->i_ino;
	id->generation = inode->i_generation;
}

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* The fd table slot's plain pointer made a read-only BTF one. Only in the
 * programs loaded where the probe found the kfunc. */
static __always_inline void file_id_by_cast(struct file *file, struct file_id *id)
{
	file_id_by_loads(bpf_rdonly_cast(file, bpf_core_type_id_kernel(struct file)), id);
}

/* Judge an opened file for the sandbox. Returns the policy action when
 * the open violates the policy (its event emitted), 0 when it is allowed.
 * `mode` says who judges: LSM refuses the open, the fallback kills the
 * task that made it.
 *
 * An allowed open is the hot path, and costs the file's identity and one
 * lookup: a file on the sandbox's own scratch filesystem is its, and a
 * file found allowed before (by this tenant's policy, in this epoch) is
 * in sg_verdicts. The policy, the walk buffer and the walk are only for
 * a file not found there. */
static __always_inline __u8 judge_file(__u64 cgid, const struct sg_sandbox *sb,
				       const struct sg_config *cfg, struct file *file,
				       const struct file_id *id, __u32 mode)
{
	bool lsm = mode == SG_MODE_LSM, write = id->fmode & SG_FMODE_WRITE;
	struct sg_verdict_key vkey = {};
	struct sg_file_detail *d;
	struct sg_policy_k *pol;
	__u8 action, *known;

	/* A scratch of its own (a tmpfs mounted for the sandbox): every file
	 * on its filesystem is inside it, at any depth, with no walk. */
	if ((sb->flags & SG_SB_SCRATCH_FS) && id->dev == (__u32)sb->scratch_dev)
		return 0;
	vkey.tenant = sb->tenant;
	vkey.dev = id->dev;
	vkey.ino = id->ino;
	vkey.generation = id->generation;
	/* The epoch before the policy: see struct sg_verdict_key. */
	vkey.epoch = sg_read_once(cfg->verdict_epoch);
	known = bpf_map_lookup_elem(&sg_verdicts, &vkey);
	if (known && (!write || (*known & SG_PATH_WRITE)))
		return 0;

	d = walk_buf();
	if (!d)
		return 0;
	pol = sg_policy(sb->tenant);
	if (judge_walk(sb, pol, &file->f_path, write, &vkey, d) == ALLOW)
		return 0;
	d->flags = id->fmode;
	d->write = write ? 1 : 0;
	d->mode = mode;
	d->requested = 0;
	action = sg_action(pol, SG_RULE_FILE);
	if (action == SG_POLICY_LOG) {
		sg_violation(cgid, SG_RULE_FILE, false);
		emit_file(cgid, sb, lsm ? SG_EV_FILE_DENIED : SG_EV_FILE_TRIPPED, SG_ACTION_LOGGED,
			  d);
		return action;
	}
	/* Every denial is evented; a kill only once (the sandbox is going). */
	if (sg_violation(cgid, SG_RULE_FILE, action == SG_POLICY_KILL) || action == SG_POLICY_DENY)
		emit_file(cgid, sb, lsm ? SG_EV_FILE_DENIED : SG_EV_FILE_TRIPPED,
			  lsm ? SG_ACTION_DENIED : SG_ACTION_KILLED, d);
	return action;
}

/* LSM mode's judgement of an open: 0, or the errno that refuses it. */
static __always_inline int file_open_errno(struct file *file)
{
	struct sg_config *cfg = NULL;
	struct sg_sandbox *sb;
	struct file_id id;
	__u64 cgid;
	__u8 action;

	sb = sg_current_sandbox_cfg(&cgid, &cfg);
	if (!sb || !cfg)
		return 0;
	file_id_by_loads(file, &id);
	/* The open of a file being executed is the exec rule's to judge
	 * (bprm_check_security), so the violation is booked as an exec. */
	if ((id.fmode & SG_FMODE_EXEC) || (file->f_flags & SG_FMODE_EXEC))
		return 0; /* __FMODE_EXEC: f_flags on older kernels, f_mode on newer */
	action = judge_file(cgid, sb, cfg, file, &id, SG_MODE_LSM);
	return action && action != SG_POLICY_LOG ? -SG_EACCES : 0;
}

/* LSM mode's judgement of each file of an exec chain (a script, then its
 * interpreter): every one of them must be allowed. 0, or the errno that
 * refuses the exec. */
static __always_inline int bprm_errno(struct linux_binprm *bprm)
{
	struct sg_policy_k *pol;
	struct sg_sandbox *sb;
	struct sg_event *e;
	__u64 cgid;
	__u8 action;

	sb = sg_current_sandbox(&cgid);
	if (!sb)
		return 0;
	pol = sg_policy(sb->tenant);
	if (sg_exec_allowed(sb, pol, bprm->file))
		return 0;
	e = sg_deny_report(cgid, sb, pol, SG_RULE_EXEC, SG_EV_EXEC_DENIED, &action);
	if (e) {
		sg_event_task(e);
		bpf_probe_read_kernel_str(e->exec.filename, sizeof(e->exec.filename),
					  BPF_CORE_READ(bprm, filename));
		e->exec.args[0] = 0;
		e->exec.args_len = 0;
		e->exec.mode = SG_MODE_LSM;
		sg_event_submit(e);
	}
	return action == SG_POLICY_LOG ? 0 : -SG_EACCES;
}

/* The two ways LSM mode attaches (src/agent/bpf_loader.c loads one):
 * - lsm/: on the hook itself, so the kernel runs the program for every
 *   task of the node, each paying the sandbox lookup (5.7+);
 * - lsm_cgroup/: BPF_LSM_CGROUP on the sandguard root (6.0+), so the
 *   kernel runs it only for tasks in a cgroup below the root: a task
 *   outside every sandbox runs no program at all. Such a program answers
 *   1 (allow) or 0 (refuse, with the errno it set by bpf_set_retval).
 * Either way an earlier program's refusal stands and is not judged again. */
static __always_inline int cgroup_answer(int err)
{
	if (!err)
		return 1;
	bpf_set_retval(err);
	return 0;
}

SEC("lsm/file_open")
int BPF_PROG(sg_file_open, struct file *file, int ret)
{
	return ret ? ret : file_open_errno(file);
}

SEC("lsm_cgroup/file_open")
int BPF_PROG(sg_cg_file_open, struct file *file)
{
	return bpf_get_retval() ? 0 : cgroup_answer(file_open_errno(file));
}

SEC("lsm/bprm_check_security")
int BPF_PROG(sg_bprm_check, struct linux_binprm *bprm, int ret)
{
	return ret ? ret : bprm_errno(bprm);
}

SEC("lsm_cgroup/bprm_check_security")
int BPF_PROG(sg_cg_bprm_check, struct linux_binprm *bprm)
{
	return bpf_get_retval() ? 0 : cgroup_answer(bprm_errno(bprm));
}

/* Fallback: the fd an open syscall just returned, judged like file_open
 * would have. The open happened; the task dies before it can use it.
 * One program per open syscall, at its exit only: outside sandboxes each
 * costs one lookup. */

/* Which open syscall, for where its path and flags are in its arguments. */
enum open_call { OPEN_AT, OPEN, OPEN_AT2, CREAT, OPEN_BY_HANDLE };

/* An open refused with EACCES in a sandbox: in fallback mode that is the
 * executor's Landlock enforcing this same policy. Event it with the path
 * and flags as requested, read from the syscall's own arguments (its
 * saved registers: the exit has no arguments of its own), and apply the
 * policy's action (nothing was opened). */
static __always_inline int refused_open(__u64 cgid, const struct sg_sandbox *sb,
					enum open_call call)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct sg_file_detail *d = walk_buf();
	unsigned long path = 0;
	struct sg_policy_k *pol;
	__u64 flags = 0;
	__u8 action;

	if (!d)
		return 0;
	__builtin_memset(d, 0, sizeof(*d));
	switch (call) {
	case OPEN_AT:
		path = PT_REGS_PARM2_CORE_SYSCALL(regs);
		flags = PT_REGS_PARM3_CORE_SYSCALL(regs);
		break;
	case OPEN:
		path = PT_REGS_PARM1_CORE_SYSCALL(regs);
		flags = PT_REGS_PARM2_CORE_SYSCALL(regs);
		break;
	case OPEN_AT2: /* struct open_how begins with its flags */
		path = PT_REGS_PARM2_CORE_SYSCALL(regs);
		bpf_probe_read_user(&flags, sizeof(flags),
				    (const void *)PT_REGS_PARM3_CORE_SYSCALL(regs));
		break;
	case CREAT:
		path = PT_REGS_PARM1_CORE_SYSCALL(regs);
		flags = SG_O_CREAT | SG_O_TRUNC | 1 /* O_WRONLY */;
		break;
	case OPEN_BY_HANDLE: /* a handle, no path */
		flags = PT_REGS_PARM3_CORE_SYSCALL(regs);
		break;
	}
	if (path)
		bpf_probe_read_user_str(d->comps, sizeof(d->comps), (const void *)path);
	d->flags = (__u32)flags;
	d->write = flags_write((__u32)flags);
	d->requested = 1;
	d->mode = SG_MODE_FALLBACK;
	pol = sg_policy(sb->tenant);
	action = sg_action(pol, SG_RULE_FILE);
	if (action == SG_POLICY_LOG) {
		emit_file(cgid, sb, SG_EV_FILE_DENIED, SG_ACTION_LOGGED, d);
		return 0;
	}
	if (sg_violation(cgid, SG_RULE_FILE, action == SG_POLICY_KILL) || action == SG_POLICY_DENY)
		emit_file(cgid, sb, SG_EV_FILE_DENIED, SG_ACTION_DENIED, d);
	return 0;
}

/* `loads` (a constant in each program): read the file by plain loads
 * (file_id_by_cast) rather than helper calls. */
static __always_inline int judge_open_exit(long fd, enum open_call call, bool loads)
{
	struct sg_config *cfg = NULL;
	struct sg_sandbox *sb;
	struct fdtable *fdt;
	struct file **fds, *file;
	struct file_id id;
	__u64 cgid;
	__u8 action;

	if (fd < 0 && fd != -SG_EACCES)
		return 0; /* nothing opened, nothing refused */
	sb = sg_current_sandbox_cfg(&cgid, &cfg);
	if (!sb || !cfg || cfg->file_mode != SG_MODE_FALLBACK)
		return 0;
	if (fd < 0)
		return refused_open(cgid, sb, call);
	/* The fd table by the task's BTF pointer: plain loads (each guarded
	 * against a fault), not a helper call per field. The slot itself
	 * needs the helper: a variable index into it is not a BTF access. */
	fdt = bpf_get_current_task_btf()->files->fdt;
	if ((__u64)fd >= fdt->max_fds)
		return 0;
	fds = fdt->fd;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	if (loads)
		file_id_by_cast(file, &id);
	else
		file_id_by_helpers(file, &id);
	if (id.fmode & SG_FMODE_PATH)
		return 0; /* O_PATH: no access to the contents */
	action = judge_file(cgid, sb, cfg, file, &id, SG_MODE_FALLBACK);
	/* deny cannot undo an open that happened: it is enforced as a kill
	 * of the task (docs/policy.md); kill also empties the sandbox. */
	if (action && action != SG_POLICY_LOG)
		bpf_send_signal(SG_SIGKILL);
	return 0;
}

/* Each open syscall's exit, twice: `helpers` reads the file by helper
 * calls, `loads` by plain loads; the agent loads one of the two
 * (src/agent/bpf_loader.c). Both pin as the same on-demand tracepoint. */
#define OPEN_EXIT(tp, call, helpers, loads)                    \
	SEC("tracepoint/syscalls/" tp)                         \
	int helpers(struct trace_event_raw_sys_exit *ctx)      \
	{                                                      \
		return judge_open_exit(ctx->ret, call, false); \
	}                                                      \
	SEC("tracepoint/syscalls/" tp)                         \
	int loads(struct trace_event_raw_sys_exit *ctx)        \
	{                                                      \
		return judge_open_exit(ctx->ret, call, true);  \
	}

OPEN_EXIT("sys_exit_openat", OPEN_AT, sg_exit_openat, sg_cast_openat)
OPEN_EXIT("sys_exit_open", OPEN, sg_exit_open, sg_cast_open)
OPEN_EXIT("sys_exit_openat2", OPEN_AT2, sg_exit_openat2, sg_cast_openat2)
OPEN_EXIT("sys_exit_creat", CREAT, sg_exit_creat, sg_cast_creat)
OPEN_EXIT("sys_exit_open_by_handle_at", OPEN_BY_HANDLE, sg_exit_open_by_handle,
	  sg_cast_open_by_handle)
