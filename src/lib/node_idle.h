/* The node's idle CPU time over the CPUs this process may run on: the
 * executor's evidence, from outside the sandbox, that the node had room
 * to give a run its CPU share (src/exec/exec_confirm.c).
 *
 * Read from /proc/stat's per-CPU lines (idle + iowait, in USER_HZ ticks,
 * so 10 ms per CPU at the usual 100 Hz). A sandbox inherits the
 * executor's CPUs and can only narrow its own set (sched_setaffinity), so
 * the executor's set is the one the node owed it: an idle CPU the run
 * chose not to use is still room the node gave it. Steal time (a
 * hypervisor running another guest) is not idle: it is room the node did
 * not have. */
#ifndef SG_NODE_IDLE_H
#define SG_NODE_IDLE_H
#include <stdbool.h>
#include <stdint.h>

struct node_idle {
	uint64_t idle_us; /* summed over the CPUs below */
	unsigned cpus;    /* how many CPUs were summed */
	bool known;
};

/* A sample now. On any error, known is false (the caller then has no
 * evidence of contention, and the run is judged without it). */
void node_idle_read(struct node_idle *s);

/* Idle time between two samples of the same CPUs, in ms; false when
 * either sample is unknown or they cover different CPUs. */
bool node_idle_between(const struct node_idle *a, const struct node_idle *b, uint64_t *idle_ms);

#endif
