/* The init forker: a small process, forked by the executor (and by
 * `sandguard serve`; "the executor" below) at its start, before its
 * threads, pools and heap exist, that clones each prepared sandbox's init
 * on request.
 *
 * Why: an init cloned by the executor itself is a fork of the whole
 * multi-threaded executor. Each such fork write-protects every private
 * page of the executor, and init keeps them mapped, so each page a caller's
 * run then writes is a copy-on-write fault (20-70 us each on the VMs we
 * measure on; about 26 a warm run on the caller's path, about 165 for the
 * pool's keeper a refill). A fork of the forker touches nothing of the
 * executor's.
 *
 * What stays as it was:
 *  - the plan is made by the executor exactly as before (sandbox.c); the
 *    forker gets a copy of it and its fds (SCM_RIGHTS) and clones init
 *    with clone3(CLONE_NEWPID | CLONE_INTO_CGROUP | CLONE_PARENT): born
 *    in the sandbox's cgroup, in its own PID namespace, and a child of the
 *    executor (CLONE_PARENT), which reaps and kills it as before;
 *  - init's parent-death signal (SIGKILL) follows the thread that forked
 *    the forker: the executor's first thread, which lives as long as the
 *    executor. The forker dies with the executor too (its own parent-death
 *    signal, and the socket's hang-up). So a `kill -9` of the executor
 *    leaves no init and no forker running; the next start, or the agent,
 *    reaps the cgroups and records as before;
 *  - a plan the forker does not take (a relay's sandbox, which is born
 *    outside its cgroup; no clone3) or a forker that is gone: the caller
 *    clones init itself, as before.
 */
#ifndef SG_SANDBOX_FORKER_H
#define SG_SANDBOX_FORKER_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "sandbox_child.h"

/* Fork the forker. Call it from the thread that lives as long as the
 * process (the inits' parent-death signal follows it), before other
 * threads start. 0, or -errno with `detail`. */
int sb_forker_start(char *detail, size_t dlen);

/* Close its socket, kill and reap it. Inits it made are the caller's
 * children, not the forker's: they are not touched. */
void sb_forker_stop(void);

/* Have the forker clone init for plan `p` into the cgroup `cgroup_fd`
 * (CLONE_NEWPID): true with *pid set (or -1 with errno: the clone
 * failed; EAGAIN: the forker failed after it had the request, did not
 * answer within its deadline or died, and is killed, reaped and not asked
 * again: an init it may have made is in the cgroup), false when there is
 * no forker or it cannot take this plan (the caller clones init itself).
 * Thread-safe. */
bool sb_forker_clone_init(const struct sb_init_plan *p, int cgroup_fd, pid_t *pid);

#endif
