/* A first-come, first-served line of waiters for a resource that processes
 * share through files (a node's CPU, a tenant's concurrency slots), kept in
 * <dir>/queue/ next to the resource's own files:
 *
 *  - lock: flock'd around every look at the line and every try at the
 *    resource, so that no newcomer takes a freed resource while someone
 *    waits for it;
 *  - t-<ticket>-<deadline>-<pid>-<random>: one FIFO per waiter, opened
 *    O_RDWR by it for as long as it waits. Tickets grow in arrival order.
 *    A waiter past its deadline (CLOCK_MONOTONIC ms: the executors of a
 *    node share one clock) is passed over, so that a stopped process
 *    holds up the line for its queue timeout at most. A waiter that
 *    gives up (queue timeout), returns or dies closes it: the kernel then
 *    reports POLLERR to the one writer end the waiter behind it holds, and
 *    an open for writing fails with ENXIO, so a dead waiter's file is known
 *    dead and removed. Each waiter watches only the one ahead of it: a
 *    departure wakes one process, not the whole line;
 *  - bell: a FIFO the waiter at the head holds open while the resource is
 *    full; a release writes a byte to it (ticket_queue_ring). A holder that
 *    dies releases without ringing: the head also looks again every
 *    TICKET_QUEUE_RECHECK_MS.
 *
 * Strict order: a head that needs more than is free holds up those behind
 * it, even if they need less. */
#ifndef SG_TICKET_QUEUE_H
#define SG_TICKET_QUEUE_H
#include <stdint.h>

#define TICKET_QUEUE_RECHECK_MS 100

/* Takes the resource, or says why not: 0 taken, -EBUSY not now, or
 * -errno (a failure that waiting does not cure). Called with the queue's
 * lock held. */
typedef int (*ticket_queue_try_fn)(void *arg);

/* Take the resource whose files are in `dir` (which must exist), in
 * arrival order. wait_ms 0: one try, only if no one waits (-EBUSY
 * otherwise). Else wait in line up to wait_ms: -ETIMEDOUT, having left the
 * line; -ECONNABORTED, likewise, when the watched caller hung up
 * (ticket_queue_watch()). Returns what `try` returned last, or -errno for
 * the queue's own files. */
int ticket_queue_take(const char *dir, uint64_t wait_ms, ticket_queue_try_fn try, void *arg);

/* This thread's waits in any line also watch `fd` (-1: none), the
 * connection of the caller it waits for: when the caller hangs up (POLLHUP
 * or POLLERR on it), ticket_queue_take() leaves the line and returns
 * -ECONNABORTED; nobody is left waiting for what the line would give.
 * Only a hang-up counts (a half-close, POLLRDHUP, does not: an HTTP client
 * may shut its writing side and still read the answer). */
void ticket_queue_watch(int fd);

/* After a release of the resource in `dir`: wake the waiter at the head of
 * the line, if any. Never fails (a lost ring costs one recheck interval). */
void ticket_queue_ring(const char *dir);

#endif
