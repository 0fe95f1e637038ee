/* The executor's connection to the agent (see src/warm/warm_agent.h). */
#include <string.h>
#include <time.h>
#include "control/agent_client.h"
#include "lib/clock.h"
#include "warm_agent.h"

#define RETRY_MS 1000

void warm_agent_init(struct warm_agent *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
}

struct agent_conn *warm_agent_get(struct warm_agent *a)
{
	struct agent_conn *c;
	uint64_t now;

	pthread_mutex_lock(&a->lock);
	c = a->conn;
	now = clock_ms(CLOCK_MONOTONIC);
	if (!c && (!a->last_try_ms || now - a->last_try_ms >= RETRY_MS)) {
		a->last_try_ms = now;
		c = a->conn = agent_connect(NULL);
	}
	pthread_mutex_unlock(&a->lock);
	return c;
}

void warm_agent_close(struct warm_agent *a)
{
	agent_close(a->conn);
	a->conn = NULL;
	pthread_mutex_destroy(&a->lock);
}
