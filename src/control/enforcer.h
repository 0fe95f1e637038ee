/* The kernel enforcer a sandbox is handed (src/sandbox/sandbox_enforcer.h):
 * the agent's pinned maps, written by the executor itself (enroll.h), and
 * the agent, when one answers, for its notices and kill verdicts. */
#ifndef SG_CONTROL_ENFORCER_H
#define SG_CONTROL_ENFORCER_H
#include "sandbox/sandbox_enforcer.h"

struct agent_conn;

/* The enforcer for sandboxes made while `agent` is connected (NULL: no
 * agent answered; the pinned maps still hold the node's enforcement when
 * an agent ever ran here). */
struct sb_enforcer sg_kernel_enforcer(struct agent_conn *agent);

/* The agent connection an enforcer from sg_kernel_enforcer() holds (NULL
 * for none, or for another kind of enforcer). */
struct agent_conn *sg_enforcer_agent(const struct sb_enforcer *e);
#endif
