/* Node-wide session seats (see src/node/node_sessions.h). */
#include <errno.h>
#include <stdlib.h>
#include "node_sessions.h"
#include "sandbox/sandbox_slots.h"

int node_session_seats(uint32_t *seats)
{
	const char *env = getenv("SANDGUARD_NODE_SESSIONS");
	unsigned long v;
	char *end;

	*seats = SB_SLOTS / 2;
	if (!env || !*env)
		return 0;
	v = strtoul(env, &end, 10);
	if (*end || v < 1 || v >= SB_SLOTS)
		return -EINVAL;
	*seats = (uint32_t)v;
	return 0;
}

int node_session_seat_take(struct node_cpu_commit *c, uint32_t *used, uint32_t *cap)
{
	int err;

	c->fd = -1;
	c->path[0] = '\0';
	*used = 0;
	err = node_session_seats(cap);
	return err ? err : node_line_commit("sessions", 1, *cap, 0, c, used);
}
