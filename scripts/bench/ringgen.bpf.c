// SPDX-License-Identifier: GPL-2.0
/* Scenario 11's event source (scripts/bench/ringgen.c): a program run by
 * BPF_PROG_TEST_RUN, never attached, that writes `count` events into the
 * agent's own pinned ring buffer per run. The generator of scenario 4
 * pays a whole logged open per event and cannot offer 200k events/s on a
 * 2-core node; this one costs a ring-buffer reservation per event, so
 * the agent's side (ring buffer, decode, JSON, ledger, sink) is what the
 * rate measures.
 *
 * It shares the agent's maps (common.bpf.h, reused from the pins) and
 * its submit: the events are logged `file_tripped` ones, submitted
 * without a wakeup unless the ring is 1/16 full, as the real programs do,
 * and a full ring counts a drop in sg_drops, which the agent reports.
 * Unlike the real programs it does not apply the per-sandbox event cap
 * (that is the kernel's policy, not the pipeline's), so one registered
 * sandbox carries every event. */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct fill_ctx {
	__u64 cgid;
	__u32 tenant;
	__u32 written;
};

static long write_one(__u64 i, void *data)
{
	struct fill_ctx *c = data;
	struct sg_event *e;

	e = bpf_ringbuf_reserve(&sg_events, sizeof(*e), 0);
	if (!e) {
		sg_count_drop();
		return 0;
	}
	e->ts_ns = bpf_ktime_get_boot_ns();
	e->cgroup_id = c->cgid;
	e->type = SG_EV_FILE_TRIPPED;
	e->action = SG_ACTION_LOGGED;
	e->tenant = c->tenant;
	e->rule = SG_RULE_FILE;
	sg_event_task(e);
	/* what files.bpf.c reports for /tmp/<bench dir>/not-allowlisted.txt */
	__builtin_memcpy(e->file.comps[0], "not-allowlisted.txt", 20);
	__builtin_memcpy(e->file.comps[1], "sandguard-bench.xxxxxxxx", 25);
	__builtin_memcpy(e->file.comps[2], "tmp", 4);
	e->file.comps[3][0] = 0;
	e->file.depth = 3;
	e->file.flags = 0x1d; /* FMODE_READ | LSEEK | PREAD | OPENED */
	e->file.write = 0;
	e->file.mode = SG_MODE_FALLBACK;
	e->file.requested = 0;
	sg_event_submit(e);
	c->written++;
	return 0;
}

/* The test run's context: args[0] the cgroup id of a registered sandbox,
 * args[1] how many events to write. Returns how many went in. */
SEC("raw_tp")
int sg_ringgen(struct bpf_raw_tracepoint_args *ctx)
{
	struct fill_ctx c = { .cgid = ctx->args[0] };
	__u64 count = ctx->args[1];
	struct sg_sandbox *sb;

	sb = bpf_map_lookup_elem(&sg_sandboxes, &c.cgid);
	if (!sb)
		return -1;
	c.tenant = sb->tenant;
	bpf_loop(count, write_one, &c, 0);
	return c.written;
}
