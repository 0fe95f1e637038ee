/* A long-lived executor's connection to the node agent: one, shared by
 * every run (src/control/agent_client.h serializes its calls and dials
 * again when the agent restarts). An agent that was not there when the
 * executor started is looked for again, at most once a second. */
#ifndef SG_WARM_AGENT_H
#define SG_WARM_AGENT_H
#include <pthread.h>
#include <stdint.h>

struct agent_conn;

struct agent_shared {
	pthread_mutex_t lock;
	struct agent_conn *conn; /* set once, then kept */
	uint64_t last_try_ms;
};

void agent_shared_init(struct agent_shared *a);
/* The connection, or NULL when no agent answers (yet). */
struct agent_conn *agent_shared_get(struct agent_shared *a);
void agent_shared_close(struct agent_shared *a);

#endif
