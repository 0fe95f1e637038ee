/* A client thread's stack, out of the executor's forks.
 *
 * The warm pool's keeper forks the executor for every sandbox it prepares
 * (the sandbox's init is a fork): each fork write-protects every page of
 * the executor, and each page a client's run then writes costs a
 * copy-on-write fault on the caller's path (20-60 us each on the VMs this
 * runs on; about 60 per warm run of /usr/bin/true, half of them on the
 * client thread's stack). A forked child runs on a copy of its forking
 * thread's stack, never of another thread's, so the part of a client
 * thread's stack its runs use can be MADV_DONTFORK, as long as no fork
 * happens on that thread while it is: a sandbox prepared for a taker on
 * that thread (the pool had none ready) is prepared between
 * pool_stack_forkable(true) and (false).
 *
 * The top of the stack, where glibc keeps the thread's descriptor and TLS
 * (a glibc fork's child walks every thread's descriptor), is left as it
 * is; and the whole stack is made copyable again before the thread ends,
 * as glibc may give it to a thread that forks. */
#ifndef SG_WARM_STACK_H
#define SG_WARM_STACK_H
#include <stdbool.h>

/* Leave this thread's stack below the caller's frame out of forks, until
 * pool_stack_release(). False if it could not (nothing changed). */
bool pool_stack_keep_out(void);

/* Whether a fork on this thread (now) copies its stack: true before a
 * fork, false after. 0, or -errno (then the stack is left copyable, and
 * kept so). No-op on a thread that did not pool_stack_keep_out(). */
int pool_stack_forkable(bool yes);

/* Copyable again, for good. 0, or -errno: then the thread must never end
 * (glibc would reuse its stack). */
int pool_stack_release(void);

#endif
