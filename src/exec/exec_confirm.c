/* A timeout is the tenant's, confirmed where the node was contended.
 *
 * A run that misses its deadline is the program's timeout. The one doubt
 * is a node too busy to give the run its CPU share: then a correct
 * program can miss its deadline through no fault of its own. That doubt
 * must be settled without evidence the tenant's code can produce: a run's
 * own CPU pressure (PSI) and CPU time are its own doing (three of its
 * processes pinned to one CPU wait on each other), so they can never
 * turn a timeout into a platform error, which would drop the sample and
 * bill the platform (issue 31).
 *
 * So the verdict is settled by running again, not by argument:
 *  1. Evidence from outside the sandbox: the node's idle CPU time over
 *     the run (/proc/stat, the CPUs the executor may use), plus the CPU
 *     the run itself got. When that room was at least 90% of the run's
 *     share (min(limits.cpu, node CPUs) x wall time), the node could have
 *     given it its share: the timeout is final. Pinning itself to one
 *     CPU, sleeping or spinning less leaves the node idle, which is room.
 *  2. Otherwise, and only if the run wanted the CPU (it ran or waited to
 *     run at least half its time: a sleeper's timeout needs no second
 *     look), the test or batch is run once more, as a confirmation run: a
 *     fresh cold sandbox with the highest CPU weight among its tenant's
 *     sandboxes, under the commitment admission already holds for it
 *     (src/node/node_cpu.h), while every other sandbox is held to its own
 *     commitment by its CPU quota. Its verdict is final: a timeout there
 *     is the tenant's timeout, whatever the evidence says.
 *
 * The tenant can influence step 1 only towards a confirmation run (its
 * other sandboxes use the node too), which costs it one more run of that
 * test and never changes a verdict's owner. One confirmation at most per
 * test, batch or request run. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "exec_internal.h"
#include "lib/clock.h"
#include "node/node_cpu.h"

#define ROOM_OF_SHARE  0.9 /* room at least 90% of the share: the node gave it */
#define WANTED_OF_WALL 0.5 /* ran or waited to run half its time: it wanted the CPU */

/* The CPU share a run was owed, in cores: its quota, at most the CPUs
 * the executor may use. */
static double share_of(const struct sg_limits *lim, unsigned cpus)
{
	double node = cpus ? (double)cpus : (double)node_cpu_count();

	return lim->cpu > 0 && lim->cpu < node ? lim->cpu : node;
}

bool exec_confirm_wanted(int rc, const struct sandbox_result *r, const struct sandbox_spec *spec)
{
	double wall = (double)r->wall_ms, owed;

	if (rc < 0 || r->end != SB_TIMEOUT || spec->confirm || r->wall_ms == 0)
		return false;
	if (!r->node_idle_known || !r->cpu_known)
		return false; /* no outside evidence of contention: final */
	owed = share_of(&spec->policy->limits, r->node_cpus) * wall;
	if ((double)(r->node_idle_ms + r->cpu_ms) >= ROOM_OF_SHARE * owed)
		return false;
	/* Tenant-made evidence, used only to spare a sleeper a second run. */
	return !r->cpu_wait_known || (double)(r->cpu_ms + r->cpu_wait_ms) >= WANTED_OF_WALL * wall;
}

void exec_confirm_describe(const struct sandbox_result *r, const struct sandbox_spec *spec,
			   char *buf, size_t len)
{
	double share = share_of(&spec->policy->limits, r->node_cpus);

	if (!r->node_idle_known) {
		snprintf(buf, len, "the node's idle time could not be read");
		return;
	}
	snprintf(buf, len,
		 "the node had %llu ms of idle CPU on its %u CPUs in those %llu ms, and the run "
		 "used %llu ms, against a share of %.0f ms (%.2f cores)",
		 (unsigned long long)r->node_idle_ms, r->node_cpus, (unsigned long long)r->wall_ms,
		 (unsigned long long)r->cpu_ms, share * (double)r->wall_ms, share);
}

static uint64_t timeout_of(const struct sandbox_spec *spec)
{
	return spec->timeout_ms ? spec->timeout_ms : spec->policy->limits.timeout_ms;
}

bool exec_confirm_admit(const struct exec_ctx *ctx, const struct sandbox_spec *spec,
			struct node_cpu_commit *line, char *detail, size_t len)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC), timeout = timeout_of(spec);
	uint64_t wait = spec->policy->limits.queue_timeout_ms;
	uint32_t used, cap;
	int err;

	if (ctx->finish_by_ms) {
		if (ctx->finish_by_ms <= now + timeout) {
			detail_append(detail, len,
				      "; no time is left for a confirmation run before its caller "
				      "gives up: the timeout stands");
			return false;
		}
		if (wait > ctx->finish_by_ms - now - timeout)
			wait = ctx->finish_by_ms - now - timeout;
	}
	err = node_cpu_commit_confirmation(spec->policy->limits.cpu, wait, line, &used, &cap);
	if (!err)
		return true;
	if (err == -EBUSY || err == -ETIMEDOUT)
		detail_append(detail, len,
			      "; no confirmation run: the node's confirmation runs hold %.2f of "
			      "its %.2f cores and none freed in %llu ms: the timeout stands",
			      used / 1000.0, cap / 1000.0, (unsigned long long)wait);
	else
		detail_append(
			detail, len,
			"; no confirmation run: cannot commit its CPU: %s: the timeout stands",
			strerror(-err));
	return false;
}

enum sg_confirm exec_confirm_state(bool confirm, bool unadmitted, const struct sandbox_spec *spec)
{
	return confirm         ? SG_CONFIRM_NEXT
	       : unadmitted    ? SG_CONFIRM_UNADMITTED
	       : spec->confirm ? SG_CONFIRM_RUN
			       : SG_CONFIRM_NONE;
}

void exec_confirm_next(const struct exec_ctx *ctx, struct sandbox_spec *spec, bool start)
{
	if (!start)
		return;
	spec->confirm = true;
	spec->cold = true; /* a warm interpreter's child shares its parent's cgroup */
	/* Its own start bound: the first run's has passed by now. */
	spec->start_by_ms = ctx->finish_by_ms ? ctx->finish_by_ms - timeout_of(spec) : 0;
}

static uint64_t deadline_of(const struct sandbox_result *r, const struct sandbox_spec *spec)
{
	return r->timeout_ms ? r->timeout_ms : timeout_of(spec);
}

static const char *known(bool is_known, uint64_t v, char *buf, size_t len)
{
	if (!is_known)
		return "unknown";
	snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

void exec_timeout_detail(const struct sandbox_result *r, const struct sandbox_spec *spec,
			 char *detail, size_t detail_len)
{
	char wait[24], node[256];

	snprintf(detail, detail_len, "deadline of %llu ms passed%s: the sandbox was killed",
		 (unsigned long long)deadline_of(r, spec),
		 spec->confirm ? " again in its confirmation run with guaranteed CPU" : "");
	if (r->cpu_known)
		detail_append(detail, detail_len, " (it got %llu ms of CPU, waited %s ms for one",
			      (unsigned long long)r->cpu_ms,
			      known(r->cpu_wait_known, r->cpu_wait_ms, wait, sizeof(wait)));
	if (r->cpu_known && r->cpu_throttled_ms)
		detail_append(detail, detail_len, ", and its own CPU limit held it %llu ms",
			      (unsigned long long)r->cpu_throttled_ms);
	if (r->cpu_known)
		detail_append(detail, detail_len, ")");
	if (r->node_idle_known) {
		exec_confirm_describe(r, spec, node, sizeof(node));
		detail_append(detail, detail_len, "; %s", node);
	}
}
