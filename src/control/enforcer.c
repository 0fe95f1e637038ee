/* The kernel enforcer (see enforcer.h): each operation a sandbox asks for,
 * on the pinned maps (enroll.c, pinned.c) and the agent (agent_client.c). */
#include <stdio.h>
#include "agent_client.h"
#include "enforcer.h"
#include "enroll.h"
#include "pinned.h"

#define AGENT_REGISTER_MS 250  /* the notification only: enforcement is already in place */
#define AGENT_COMPILE_MS  2000 /* a tenant's policy file the agent has not compiled yet */

static struct sg_enroll_request request_of(const struct sb_enrollment *s)
{
	return (struct sg_enroll_request){ .who = *s,
					   .compile_timeout_ms = AGENT_COMPILE_MS,
					   .notify_timeout_ms = AGENT_REGISTER_MS };
}

static int enroll(void *ctx, const struct sb_enrollment *s, bool notify, struct sb_enrolled *e)
{
	struct sg_enroll_request req = request_of(s);
	struct sg_enroll_result res;
	int err;

	req.agent = notify ? ctx : NULL;
	err = sg_enroll_sandbox(&req, &res);
	e->enforced = res.enforced;
	e->notified = res.notified;
	snprintf(e->detail, sizeof(e->detail), "%s", res.detail);
	return err;
}

static int name_run(void *ctx, const struct sb_enrollment *s, char *detail, size_t len)
{
	struct sg_enroll_request req = request_of(s);

	(void)ctx;
	return sg_enroll_ids(&req, detail, len);
}

static int unregister(void *ctx, uint64_t cgroup_id)
{
	return agent_unregister(ctx, cgroup_id);
}

static void release(void *ctx, uint64_t cgroup_id)
{
	(void)ctx;
	sg_enroll_release(cgroup_id);
}

static bool has_agent(void *ctx)
{
	return ctx != NULL;
}

static bool files_preventive(void *ctx)
{
	return agent_files_preventive(ctx);
}

static int kill_verdict(void *ctx, uint64_t cgroup_id, int *rule, int timeout_ms)
{
	return agent_kill_verdict(ctx, cgroup_id, rule, timeout_ms);
}

static int quiet(void *ctx, uint64_t cgroup_id)
{
	(void)ctx;
	return sg_pinned_quiet(cgroup_id);
}

static int trip_rule(void *ctx, uint64_t cgroup_id, int *rule)
{
	(void)ctx;
	return sg_pinned_trip_rule(cgroup_id, rule);
}

static int first_rule(void *ctx, uint64_t cgroup_id, int *rule)
{
	(void)ctx;
	return sg_pinned_first_rule(cgroup_id, rule);
}

static const struct sb_enforcer_ops kernel_ops = {
	.enroll = enroll,
	.name_run = name_run,
	.unregister = unregister,
	.release = release,
	.has_agent = has_agent,
	.files_preventive = files_preventive,
	.kill_verdict = kill_verdict,
	.quiet = quiet,
	.trip_rule = trip_rule,
	.first_rule = first_rule,
};

struct sb_enforcer sg_kernel_enforcer(struct agent_conn *agent)
{
	return (struct sb_enforcer){ .ops = &kernel_ops, .ctx = agent };
}

struct agent_conn *sg_enforcer_agent(const struct sb_enforcer *e)
{
	return e->ops == &kernel_ops ? e->ctx : NULL;
}
