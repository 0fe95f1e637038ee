/* The artifact_refused event (see src/agent/agent_artifact.c). */
#ifndef SG_AGENT_ARTIFACT_H
#define SG_AGENT_ARTIFACT_H
#include "telemetry/outcome.h"

struct agent;

/* One outcome the journal's fold booked: an event line when it is a
 * pinned artifact's refusal, nothing otherwise. */
void agent_artifact_observe(struct agent *a, const struct sg_outcome *o);

#endif
