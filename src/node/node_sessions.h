/* Node-wide session seats. A session holds a sandbox, and with it one of
 * the node's SB_SLOTS uid slots (src/sandbox/sandbox_slots.h), for its
 * whole life, which may be hours. Without a bound of their own, sessions
 * (one tenant's alone, under a generous max_sessions) could hold every
 * slot, and every other tenant's batch, verifier and run sandboxes would
 * fail for want of one. So sessions, counted across every server on the
 * node, hold at most $SANDGUARD_NODE_SESSIONS seats (1 .. SB_SLOTS - 1;
 * default half the slots): the rest always serve short runs.
 *
 * A seat is a commitment of 1 in the line <run>/sessions/ (node_cpu.h's
 * mechanism, flock'd files: a server that dies gives its seats back). */
#ifndef SG_NODE_SESSIONS_H
#define SG_NODE_SESSIONS_H
#include <stdint.h>
#include "node_cpu.h"

/* The node's session seats. 0, or -EINVAL (a bad $SANDGUARD_NODE_SESSIONS). */
int node_session_seats(uint32_t *seats);

/* Take a seat for a new session, never waiting: 0 (held), -EBUSY (all
 * held) with *used and *cap set for the message, or -errno.
 * node_cpu_release() gives it back. */
int node_session_seat_take(struct node_cpu_commit *c, uint32_t *used, uint32_t *cap);
#endif
