/* The agent's Prometheus metrics (families, scrape-time collection). */
#ifndef SG_AGENT_METRICS_H
#define SG_AGENT_METRICS_H
#include "telemetry/outcome.h"

struct agent;

int agent_metrics_start(struct agent *a); /* no-op without --metrics */
void agent_metrics_stop(struct agent *a);
void agent_metrics_tick(struct agent *a);
void agent_metrics_observe_kill_latency(struct agent *a, double seconds);
/* Adds `fired` (0 or 1): a 0 gives the tenant's series of each detector
 * a sample before its first firing, which increase() needs to see it. */
void agent_metrics_detector(struct agent *a, const char *tenant, const char *detector,
			    unsigned fired);
void agent_metrics_run_detector(struct agent *a, const char *tenant, const char *detector);
void agent_metrics_canary(struct agent *a, const char *tenant, uint32_t probes, uint32_t failed,
			  bool nondeterministic);

#endif
