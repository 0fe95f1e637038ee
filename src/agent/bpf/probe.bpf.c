// SPDX-License-Identifier: GPL-2.0
/* Minimal programs that answer "does this kernel load and attach X?".
 * The agent loads them one at a time (src/agent/probe.c); none of them does
 * anything when attached. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} probe_rb SEC(".maps");

/* A BPF LSM program can load and attach on a kernel where the bpf LSM is
 * not active (5.10 booted without bpf in lsm=): it then never runs. The
 * probe opens a file after attaching and counts its own opens here. */
const volatile __u32 probe_tgid = 0;
__u64 lsm_hits = 0;

SEC("lsm/file_open")
int BPF_PROG(probe_lsm, struct file *file, int ret)
{
	if ((bpf_get_current_pid_tgid() >> 32) == probe_tgid)
		__sync_fetch_and_add(&lsm_hits, 1);
	return ret;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(probe_tp_btf, struct task_struct *parent, struct task_struct *child)
{
	/* bpf_send_signal is what enforces limits from tracing programs */
	if (!parent)
		bpf_send_signal(0);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int probe_syscall_tp(void *ctx)
{
	return 0;
}

SEC("cgroup/connect4")
int probe_connect4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/connect6")
int probe_connect6(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg4")
int probe_sendmsg4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg6")
int probe_sendmsg6(struct bpf_sock_addr *ctx)
{
	return 1;
}

/* Attach type set by number in userspace (BPF_CGROUP_UNIX_CONNECT). */
SEC("cgroup/connect4")
int probe_connect_unix(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/connect4")
int probe_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup_skb/egress")
int probe_skb_egress(struct __sk_buff *skb)
{
	return 1;
}

/* Fetching atomics (5.12+): without them the agent loads its compat
 * objects (src/agent/bpf/common.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} probe_counter SEC(".maps");

SEC("tracepoint/syscalls/sys_exit_openat")
int probe_atomic_fetch(void *ctx)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&probe_counter, &zero);

	if (v && __sync_fetch_and_add(v, 1) == (__u64)-1)
		return 1;
	if (v && __sync_val_compare_and_swap(v, 0, 1))
		return 1;
	return 0;
}

/* Tracing and LSM programs may ask for a cgroup ancestor's id (older
 * kernels allow the helper in cgroup programs only). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(probe_tracing_ancestor, struct task_struct *parent, struct task_struct *child)
{
	return bpf_get_current_ancestor_cgroup_id(1) == 0;
}

/* The LSM unix hooks, used where there are no cgroup unix hooks. */
SEC("lsm/unix_may_send")
int BPF_PROG(probe_lsm_unix, struct socket *sock, struct socket *other, int ret)
{
	return ret;
}

/* BPF_LSM_CGROUP (6.0+): the LSM program attached to a cgroup, run by the
 * kernel only for tasks below it. It answers 1 (allow) or 0 (refuse). */
SEC("lsm_cgroup/file_open")
int BPF_PROG(probe_lsm_cgroup, struct file *file)
{
	return 1;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int probe_ringbuf(void *ctx)
{
	long *v = bpf_ringbuf_reserve(&probe_rb, sizeof(long), 0);
	if (v)
		bpf_ringbuf_discard(v, 0);
	return 0;
}

/* The bpf_rdonly_cast kfunc (6.2+): the fallback's open programs read the
 * opened file through it by plain (guarded) loads, the same fields as
 * here (src/agent/bpf/files.bpf.c, file_id_by_loads). A kernel without
 * it refuses the program: libbpf leaves the weak call unresolved. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
__u64 probe_file = 0;
__u64 probe_sink = 0;

SEC("tracepoint/syscalls/sys_exit_openat")
int probe_rdonly_cast(void *ctx)
{
	struct file *f = bpf_rdonly_cast((void *)probe_file, bpf_core_type_id_kernel(struct file));
	struct dentry *dentry = f->f_path.dentry;
	struct inode *inode = dentry->d_inode;

	probe_sink = f->f_mode + dentry->d_sb->s_dev + inode->i_ino + inode->i_generation;
	return 0;
}
