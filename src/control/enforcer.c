/* The kernel enforcer (see enforcer.h): each operation a sandbox asks for,
 * on the pinned maps (enroll.c, pinned.c) and the agent (agent_client.c). */
#include <errno.h>
#include <stdio.h>
#include "agent_client.h"
#include "enforcer.h"
#include "enroll.h"
#include "pinned.h"
#include "pinset.h"

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

/* The kernel's record of a sandbox, read in the kept maps of the last
 * check (pinset.h: not necessarily the set it was enrolled in, after an
 * agent's --cleanup): `read` on its sg_state, or the error of opening it. */
static int on_state(uint64_t cgroup_id, int *rule, int (*read)(int, uint64_t, int *))
{
	struct sg_pinset *set = sg_pinset_get(false);
	int ret;

	*rule = -1;
	if (!set)
		return -ENOMEM;
	ret = set->fd[SG_PIN_STATE] >= 0 ? read(set->fd[SG_PIN_STATE], cgroup_id, rule)
					 : set->err[SG_PIN_STATE];
	sg_pinset_put(set);
	return ret;
}

static int quiet_in(int fd, uint64_t cgroup_id, int *rule)
{
	(void)rule;
	return sg_pinned_quiet_in(fd, cgroup_id);
}

static int quiet(void *ctx, uint64_t cgroup_id)
{
	int unused;

	(void)ctx;
	return on_state(cgroup_id, &unused, quiet_in);
}

static int trip_rule(void *ctx, uint64_t cgroup_id, int *rule)
{
	(void)ctx;
	return on_state(cgroup_id, rule, sg_pinned_trip_rule_in);
}

static int first_rule(void *ctx, uint64_t cgroup_id, int *rule)
{
	(void)ctx;
	return on_state(cgroup_id, rule, sg_pinned_first_rule_in);
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
