/* The sandbox's egress relay: the one way out of a sandbox whose policy
 * allows egress (see src/sandbox/sandbox_net.h).
 *
 * A process of the sandbox, started by its init: in its PID namespace and
 * its cgroup, running as its slot uid under its Landlock ruleset and
 * seccomp filter, but in the host's network namespace. It accepts on the
 * listeners init made inside the sandbox's namespace, reads the
 * destination the tenant asked for (the accepted socket's local address,
 * thanks to the local routes), checks it against the policy's allowlist
 * and connects to it. The agent's cgroup hooks see that connect as the
 * sandbox's and judge it like any other; without an agent, the allowlist
 * check here is what holds. At most limits.max_connections at once.
 *
 * Like every process of the sandbox it may not allocate (the executor may
 * be multithreaded): its buffers come from mmap. */
#ifndef SG_SANDBOX_RELAY_H
#define SG_SANDBOX_RELAY_H
#include "sandbox_child.h"

/* When main exits, init closes the relay's life pipe: the relay stops
 * accepting, delivers what the tenant sent before it exited, and exits;
 * init waits for that at most this long before it ends the sandbox. */
#define SB_RELAY_DRAIN_MS 250

/* In the relay process, cloned by init after the root is built. */
_Noreturn void sb_relay_run(const struct sb_child_plan *p, const int *listeners, int n,
			    int host_netns, int life_fd);

#endif
