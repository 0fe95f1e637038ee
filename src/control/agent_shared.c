/* The executor's connection to the agent (see src/control/agent_shared.h). */
#include <string.h>
#include <time.h>
#include "control/agent_client.h"
#include "lib/clock.h"
#include "agent_shared.h"

#define RETRY_MS 1000

void agent_shared_init(struct agent_shared *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->lock, NULL);
}

struct agent_conn *agent_shared_get(struct agent_shared *a)
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

void agent_shared_close(struct agent_shared *a)
{
	agent_close(a->conn);
	a->conn = NULL;
	pthread_mutex_destroy(&a->lock);
}
