// SPDX-License-Identifier: GPL-2.0
/* The shapes a fallback file hook could take, for scenario 7
 * (scripts/bench/syscost.c): each program does what the agent's does for
 * a task outside every sandbox (the sandbox lookup, a miss), or nothing,
 * so that the cost of the attachment itself shows. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, __u64);
} sandboxes SEC(".maps");

__u64 hits;

static __always_inline int lookup(void)
{
	__u64 id = bpf_get_current_ancestor_cgroup_id(3);

	if (bpf_map_lookup_elem(&sandboxes, &id))
		hits++;
	return 0;
}

/* x86-64 numbers of the open syscalls: open, creat, openat, open_by_handle_at, openat2 */
static __always_inline bool is_open(long nr)
{
	return nr == 2 || nr == 85 || nr == 257 || nr == 304 || nr == 437;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int exit_openat_empty(void *ctx)
{
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_openat")
int exit_openat_lookup(void *ctx)
{
	return lookup();
}

SEC("tracepoint/syscalls/sys_enter_openat")
int enter_openat_lookup(void *ctx)
{
	return lookup();
}

SEC("raw_tp/sys_exit")
int raw_exit_empty(struct bpf_raw_tracepoint_args *ctx)
{
	return 0;
}

SEC("raw_tp/sys_exit")
int raw_exit_lookup(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];

	return is_open(BPF_CORE_READ(regs, orig_ax)) ? lookup() : 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(btf_exit_lookup, struct pt_regs *regs, long ret)
{
	return is_open(regs->orig_ax) ? lookup() : 0;
}
