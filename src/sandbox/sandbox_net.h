/* The sandbox's network namespace, when its policy allows egress.
 *
 * Every sandbox has a network namespace of its own. Without an egress
 * allowlist its loopback stays down (up, and nothing else, when the
 * policy allows listeners) and nothing is reachable. With one,
 * init brings the loopback up and routes each allowed network to it as
 * local addresses (an "AnyIP" local route): a connect to an allowed
 * address lands on a listener of the sandbox's relay (sandbox_relay.c),
 * which sits in the same namespace, checks the destination against the
 * allowlist and connects to it from the host's namespace, from inside the
 * sandbox's cgroup, where the agent's cgroup hooks judge that connect as
 * the sandbox's own. Nothing else leaves: a destination with no route is
 * unreachable, UDP has no relay, the port space, the abstract unix socket
 * names and the listeners are the namespace's own. */
#ifndef SG_SANDBOX_NET_H
#define SG_SANDBOX_NET_H
#include <stdbool.h>
#include <stdint.h>
#include "policy/policy.h"

#define SB_NET_MAX_ROUTES    (2 * SG_POLICY_EGRESS)
#define SB_NET_MAX_LISTENERS (2 * SG_POLICY_EGRESS)

struct sb_net_route {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint8_t prefix;
};

struct sb_net_listen {
	int family;
	uint16_t port;
};

struct sb_net_plan {
	const struct sg_policy *policy;
	struct sb_net_route routes[SB_NET_MAX_ROUTES];
	int n_routes;
	struct sb_net_listen listens[SB_NET_MAX_LISTENERS];
	int n_listens;
	bool any_port; /* a TCP rule with port 0: no listener can cover it */
};

/* From the policy's TCP (and any-protocol) allow rules. Returns false when
 * the policy allows no TCP egress at all (no relay needed). */
bool sb_net_plan(struct sb_net_plan *np, const struct sg_policy *p);

/* Child side, as root in the sandbox's fresh network namespace: loopback
 * up, the routes, one listener per planned (family, port). fds[] gets the
 * listeners (non-blocking, close-on-exec), *n their count. A family the
 * kernel lacks (IPv6 disabled) is skipped. np NULL: the loopback only (a
 * policy that allows listeners and no egress). Async-signal-safe; 0 or
 * -errno. */
int sb_net_setup(const struct sb_net_plan *np, int *fds, int *n);

#endif
