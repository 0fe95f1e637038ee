/* The agent's score-stream detectors, per tenant and per run (see
 * src/agent/agent_health.c). */
#ifndef SG_AGENT_HEALTH_H
#define SG_AGENT_HEALTH_H
#include "telemetry/outcome.h"

struct agent;

/* The journal fold's observer (struct fold.observe): ctx is the agent. */
void agent_health_observe(void *ctx, const struct sg_outcome *o);
void agent_health_free(struct agent *a);

#endif
