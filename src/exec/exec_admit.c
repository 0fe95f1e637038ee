/* Admission (see src/exec/exec.h for the rules): the journal's disk, the
 * tenant's state, the agent, then the lines a run waits in (the tenant's
 * concurrency, the node's CPU and memory), first come first served across
 * every executor process on the node. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/agent_client.h"
#include "exec_internal.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/ticket_queue.h"
#include "node/node_cpu.h"
#include "node/node_mem.h"

#define REAP_EVERY_MS 1000

/* "paused_at ..., reason: ..." from the stored pause record. */
static void describe_pause(const char *info, char *buf, size_t len)
{
	json_t *j = json_loads(info, 0, NULL);
	const char *at = json_string_value(json_object_get(j, "paused_at"));
	const char *why = json_string_value(json_object_get(j, "reason"));

	buf[0] = '\0';
	if (at)
		snprintf(buf, len, " since %s", at);
	if (why && *why)
		detail_append(buf, len, " (%s)", why);
	json_decref(j);
}

static const char *agent_sock(void)
{
	const char *s = getenv("SANDGUARD_AGENT_SOCK");

	return s && *s ? s : SG_AGENT_SOCK;
}

/* At most once a second per process: a CLI run reaps at its start, serve
 * every second it takes requests. */
static void reap_now_and_then(struct agent_conn *agent)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t last;
	uint64_t now = clock_ms(CLOCK_MONOTONIC);
	int n;

	if (pthread_mutex_trylock(&lock))
		return; /* another thread is at it */
	if (!last || now - last >= REAP_EVERY_MS) {
		last = now;
		n = exec_reap_orphans(agent);
		if (n < 0)
			sg_warn("exec: cannot look for orphaned sandboxes: %s", strerror(-n));
	}
	pthread_mutex_unlock(&lock);
}

/* The caller hung up while it waited in `line`: nothing ran. */
static enum sg_cause caller_gone(const struct exec_ctx *ctx, const char *line,
				 enum exec_refusal *refusal, char *detail, size_t detail_len)
{
	*refusal = EXEC_REFUSED_GONE;
	snprintf(detail, detail_len,
		 "platform error: the caller hung up while tenant %s's request waited in the "
		 "admission line for %s; nothing ran",
		 ctx->tenant, line);
	return SG_CAUSE_PLATFORM_ERROR;
}

enum sg_cause exec_admit_node(const struct exec_ctx *ctx, bool mem, uint64_t wait_ms,
			      struct node_cpu_commit *c, enum exec_refusal *refusal, char *detail,
			      size_t detail_len)
{
	const struct sg_limits *lim = &ctx->policy->limits;
	uint32_t used, cap;
	int ret = mem ? node_mem_commit(lim->memory_mb, wait_ms, c, &used, &cap)
		      : node_cpu_commit(lim->cpu, wait_ms, c, &used, &cap);
	char held[96], need[64];

	if (!ret)
		return SG_CAUSE_OK;
	if (ret == -ECONNABORTED)
		return caller_gone(ctx, mem ? "the node's memory" : "the node's CPU", refusal,
				   detail, detail_len);
	*refusal = ret == -EBUSY ? (mem ? EXEC_REFUSED_NODE_MEM : EXEC_REFUSED_NODE_CPU)
		   : ret == -ETIMEDOUT
			   ? (mem ? EXEC_REFUSED_NODE_MEM_TIMEOUT : EXEC_REFUSED_NODE_CPU_TIMEOUT)
			   : EXEC_REFUSED_STATE;
	if (mem) {
		snprintf(held, sizeof(held), "memory committed: %u of %u MiB", used, cap);
		snprintf(need, sizeof(need), "%llu (limits.memory_mb)",
			 (unsigned long long)lim->memory_mb);
	} else {
		snprintf(held, sizeof(held), "CPUs committed: %.2f of %.2f cores", used / 1000.0,
			 cap / 1000.0);
		snprintf(need, sizeof(need), "%.2f (limits.cpu)", lim->cpu);
	}
	if (ret == -EBUSY || ret == -ETIMEDOUT)
		snprintf(detail, detail_len,
			 "platform error: node %s are held by running sandboxes and tenant %s "
			 "needs %s%s; retry later",
			 held, ctx->tenant, need,
			 ret == -ETIMEDOUT ? " after waiting queue_timeout_ms" : "");
	else
		snprintf(detail, detail_len,
			 "platform error: cannot commit node %s for tenant %s: %s%s",
			 mem ? "memory" : "CPU", ctx->tenant, strerror(-ret),
			 ret != -EINVAL ? ""
			 : mem          ? " ($SANDGUARD_NODE_MEMORY_MB must be MiB, at least 16)"
					: " ($SANDGUARD_NODE_CPUS must be a number of cores)");
	return SG_CAUSE_PLATFORM_ERROR;
}

bool exec_admit_more(const struct exec_ctx *ctx, struct tenant_slot *slot)
{
	uint32_t used, cap;

	if (tenant_slot_acquire(ctx->tenant, ctx->policy->limits.concurrency, 0, slot))
		return false;
	if (!node_cpu_commit(ctx->policy->limits.cpu, 0, &slot->cpu, &used, &cap) &&
	    !node_mem_commit(ctx->policy->limits.memory_mb, 0, &slot->mem, &used, &cap))
		return true;
	tenant_slot_release(slot);
	return false;
}

/* The tenant's concurrency line, then the node CPU's, in the one wait. */
static enum sg_cause admit_in_line(const struct exec_ctx *ctx, struct tenant_slot *slot,
				   uint64_t wait_ms, uint64_t start, enum exec_refusal *refusal,
				   char *detail, size_t detail_len)
{
	const struct sg_limits *lim = &ctx->policy->limits;
	int ret = tenant_slot_acquire(ctx->tenant, lim->concurrency, wait_ms, slot);
	enum sg_cause cause;
	uint64_t waited;

	if (ret == -ECONNABORTED)
		return caller_gone(ctx, "its concurrency slots", refusal, detail, detail_len);
	*refusal = ret == -EBUSY || ret == -ETIMEDOUT ? EXEC_REFUSED_CONCURRENCY
						      : EXEC_REFUSED_STATE;
	if (ret == -EBUSY) {
		snprintf(detail, detail_len,
			 "platform error: concurrency cap reached: %u sandboxes of "
			 "tenant %s already running on this node (on_excess %s); retry later",
			 lim->concurrency, ctx->tenant,
			 lim->on_excess == SG_EXCESS_WAIT ? "wait" : "refuse");
		return SG_CAUSE_PLATFORM_ERROR;
	}
	if (ret == -ETIMEDOUT) {
		snprintf(
			detail, detail_len,
			"platform error: concurrency cap reached: %u sandboxes of "
			"tenant %s still running after waiting %llu ms (queue_timeout_ms); retry later",
			lim->concurrency, ctx->tenant, (unsigned long long)wait_ms);
		return SG_CAUSE_PLATFORM_ERROR;
	}
	if (ret) {
		snprintf(detail, detail_len,
			 "platform error: cannot take a concurrency slot for tenant %s: %s",
			 ctx->tenant, strerror(-ret));
		return SG_CAUSE_PLATFORM_ERROR;
	}
	waited = clock_ms(CLOCK_MONOTONIC) - start;
	cause = exec_admit_node(ctx, false, wait_ms > waited ? wait_ms - waited : 0, &slot->cpu,
				refusal, detail, detail_len);
	if (cause == SG_CAUSE_OK) {
		waited = clock_ms(CLOCK_MONOTONIC) - start;
		cause = exec_admit_node(ctx, true, wait_ms > waited ? wait_ms - waited : 0,
					&slot->mem, refusal, detail, detail_len);
	}
	if (cause != SG_CAUSE_OK) {
		tenant_slot_release(slot);
		return cause;
	}
	*refusal = EXEC_ADMITTED;
	return SG_CAUSE_OK;
}

enum sg_cause exec_admit(const struct exec_ctx *ctx, struct tenant_slot *slot,
			 enum exec_refusal *refusal, char *detail, size_t detail_len)
{
	const struct sg_limits *lim = &ctx->policy->limits;
	uint64_t start = clock_ms(CLOCK_MONOTONIC);
	char info[1024], why[512];
	uint64_t wait_ms;
	enum sg_cause cause;
	int ret;

	slot->fd = -1;
	slot->index = -1;
	slot->noted = NULL;
	slot->cpu.fd = -1;
	slot->mem.fd = -1;
	if (!ctx->reap_elsewhere)
		reap_now_and_then(ctx->agent);
	*refusal = EXEC_REFUSED_DISK;
	if (exec_journal_full(detail, detail_len))
		return SG_CAUSE_PLATFORM_ERROR;
	*refusal = EXEC_REFUSED_STATE;
	ret = tenant_paused(ctx->tenant, info, sizeof(info));
	if (ret < 0) {
		snprintf(detail, detail_len,
			 "platform error: cannot read the paused state of tenant %s: %s",
			 ctx->tenant, strerror(-ret));
		return SG_CAUSE_PLATFORM_ERROR;
	}
	if (ret > 0) {
		*refusal = EXEC_REFUSED_PAUSED;
		describe_pause(info, why, sizeof(why));
		snprintf(detail, detail_len,
			 "tenant %s is paused%s; resume with 'sandguard tenant resume %s'",
			 ctx->tenant, why, ctx->tenant);
		return SG_CAUSE_TENANT_PAUSED;
	}
	if (!ctx->policy->enabled) {
		*refusal = EXEC_REFUSED_DISABLED;
		snprintf(detail, detail_len,
			 "tenant %s is disabled by its policy (%s: \"enabled\": false)",
			 ctx->tenant, ctx->policy->source);
		return SG_CAUSE_TENANT_PAUSED;
	}
	if (ctx->policy->require_agent && !ctx->agent) {
		*refusal = EXEC_REFUSED_NO_AGENT;
		snprintf(
			detail, detail_len,
			"platform error: the policy of tenant %s requires the agent (require_agent), "
			"but no agent answers at %s",
			ctx->tenant, agent_sock());
		return SG_CAUSE_PLATFORM_ERROR;
	}
	wait_ms = lim->on_excess == SG_EXCESS_WAIT ? lim->queue_timeout_ms : 0;
	ticket_queue_watch(ctx->caller_fd > 0 ? ctx->caller_fd : -1);
	cause = admit_in_line(ctx, slot, wait_ms, start, refusal, detail, detail_len);
	ticket_queue_watch(-1);
	return cause;
}
