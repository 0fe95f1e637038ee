/* A thread's notice, given once, just before its request leaves the first
 * trace of it that outlives the process: an in-flight run record made
 * (sb_run_record_write()) or an outcome appended to the journal
 * (exec_book()). Before that trace nothing of the request is booked or
 * owed, whatever the process did for it (parsed it, waited in an admission
 * line, took or prepared a sandbox): had the process died then, running the
 * request elsewhere books it once. A long-lived executor's client thread
 * arms it to tell its client that from here on the run is never to be run
 * again (EXECUTOR_STARTED, src/executor/executor_proto.h).
 *
 * Per thread: a run's other threads (a verifier's workers) and the pool's
 * thread, which reaps orphans, never give it; their traces follow the
 * request's first one, or are not the request's. */
#ifndef SG_FIRST_TRACE_H
#define SG_FIRST_TRACE_H

typedef void (*first_trace_fn)(void *arg);

/* fn(arg) is called by this thread's next first_trace_now(). */
void first_trace_arm(first_trace_fn fn, void *arg);
void first_trace_disarm(void);

/* Before a trace is left: calls what is armed, once, then disarms. */
void first_trace_now(void);

#endif
