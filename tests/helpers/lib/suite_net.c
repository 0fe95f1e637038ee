/* The agent suite: egress, inet and unix. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "abi/events.h"
#include "agent_suite.h"
#include "control/agent_client.h"
#include "control/pinned.h"
#include "lib/cgroup.h"

void test_egress(void)
{
	struct at_sandbox sb;
	char dst[64];
	int st;

	if (at_sandbox_new(&env, "acme", &sb)) {
		at_result(false, "egress: sandbox", "cannot create/register a sandbox");
		return;
	}
	st = run_in(&sb, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	snprintf(dst, sizeof(dst), "\"dst\":\"127.0.0.1:%d\"", port_tcp4);
	at_result(returned(st, EPERM) && saw_nothing(l_tcp4, true),
		  "egress: tcp4 connect gets EPERM, listener saw nothing", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "\"egress_denied\"", dst, NULL),
		  "egress: tcp4 denial evented with its destination", "no event with %s", dst);

	st = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_INET6, .type = SOCK_STREAM, .port = port_tcp6 });
	snprintf(dst, sizeof(dst), "\"dst\":\"[::1]:%d\"", port_tcp6);
	at_result(returned(st, EPERM) && saw_nothing(l_tcp6, true),
		  "egress: tcp6 connect gets EPERM, listener saw nothing", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "\"egress_denied\"", dst, NULL),
		  "egress: tcp6 denial evented with its destination", "no event with %s", dst);

	st = run_in(
		&sb, child_net,
		&(struct net_arg){
			.family = AF_INET, .type = SOCK_DGRAM, .port = port_udp, .sendto = true });
	snprintf(dst, sizeof(dst), "\"dst\":\"127.0.0.1:%d\"", port_udp);
	at_result(returned(st, EPERM) && saw_nothing(l_udp, false),
		  "egress: udp sendto gets EPERM, listener saw nothing", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "\"egress_denied\"", dst, "sendmsg4", NULL),
		  "egress: udp denial evented with its destination", "no event with %s", dst);

	st = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_allowed });
	at_result(returned(st, 0) && !saw_nothing(l_allowed, true),
		  "egress: allowlisted loopback port connects", "%s", describe(st));
	at_sandbox_free(&sb);
}

/* A unix connect or send from a sandbox, expected refused: EPERM and the
 * host socket got nothing. */
static void unix_refused(struct at_sandbox *sb, struct net_arg arg, int listener, bool stream,
			 const char *name)
{
	int st = run_in(sb, child_net, &arg);
	bool nothing = listener < 0 || saw_nothing(listener, stream);

	at_result(returned(st, EPERM) && nothing, name, "%s, host socket %s", describe(st),
		  nothing ? "got nothing" : "GOT DATA");
}

/* Unix sockets: the cgroup unix hooks (6.7+), else in LSM mode the LSM
 * unix hooks, which see the peer the kernel resolved. Escape 1 of issue
 * 13 (a socketpair end sending to a host path) and escape 5 (squatting an
 * abstract name) are here. */
void test_unix(void)
{
	bool cgroup_hooks = at_agent_feature(&env, "cgroup_connect_unix") == 1;
	bool lsm_hooks = lsm && at_agent_feature(&env, "bpf_lsm_unix") == 1;
	struct at_sandbox sb;
	char squat[PATH_MAX + 16];
	int st;

	if (!cgroup_hooks && !lsm_hooks) {
		at_skipped(
			"unix: egress",
			"no cgroup unix hooks (kernel < 6.7) and no BPF LSM: the agent does not "
			"judge unix sockets here; the executor's mount and network namespaces do");
		return;
	}
	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, "unix: sandbox", "cannot create/register a sandbox");
	unix_refused(
		&sb,
		(struct net_arg){ .family = AF_UNIX, .type = SOCK_STREAM, .unix_name = unix_path },
		l_unix, true, "unix: stream connect to a host path gets EPERM");
	unix_refused(&sb,
		     (struct net_arg){ .family = AF_UNIX,
				       .type = SOCK_STREAM,
				       .unix_name = "sg-agent-test",
				       .abstract = true },
		     l_abstract, true, "unix: stream connect to a host abstract name gets EPERM");
	at_result(at_event_seen(&env, 3000, sb.name, "\"egress_denied\"", "@sg-agent-test", NULL),
		  "unix: the denial is evented with the abstract name", "no event");
	unix_refused(&sb,
		     (struct net_arg){ .family = AF_UNIX,
				       .type = SOCK_DGRAM,
				       .unix_name = unix_dgram_path,
				       .sendto = true },
		     l_unix_dgram, false, "unix: datagram sendto a host path gets EPERM");
	unix_refused(&sb,
		     (struct net_arg){ .family = AF_UNIX,
				       .type = SOCK_DGRAM,
				       .unix_name = unix_dgram_path,
				       .sendto = true,
				       .from_pair = true },
		     l_unix_dgram, false,
		     "unix: sendto a host path from a socketpair end gets EPERM");
	unix_refused(&sb,
		     (struct net_arg){ .family = AF_UNIX,
				       .type = SOCK_DGRAM,
				       .unix_name = unix_dgram_path,
				       .sendto = true,
				       .from_pair = true,
				       .unspec_first = true },
		     l_unix_dgram, false,
		     "unix: ... and after connect(AF_UNSPEC) on it, EPERM too");
	unix_refused(&sb,
		     (struct net_arg){ .family = AF_UNIX,
				       .type = SOCK_DGRAM,
				       .unix_name = "sg-agent-test-d",
				       .abstract = true,
				       .sendto = true,
				       .from_pair = true },
		     l_abstract_dgram, false,
		     "unix: sendto a host abstract name from a socketpair end gets EPERM");
	at_result(at_event_seen(&env, 3000, sb.name, "\"egress_denied\"", unix_dgram_path, NULL),
		  "unix: the datagram denial is evented with the host path", "no event");
	st = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_UNIX, .type = SOCK_DGRAM, .to_pair_peer = true });
	at_result(returned(st, 0), "unix: a datagram socketpair still talks to its own other end",
		  "%s", describe(st));
	st = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_UNIX, .type = SOCK_STREAM, .to_pair_peer = true });
	at_result(returned(st, 0), "unix: a stream socketpair still talks to its own other end",
		  "%s", describe(st));

	/* Squatting: no cgroup hook sees a unix bind; LSM mode refuses it. */
	if (!lsm) {
		at_skipped("unix: bind",
			   "no hook sees a unix bind without BPF LSM: the executor's network "
			   "namespace scopes abstract names");
	} else {
		unix_refused(&sb,
			     (struct net_arg){ .family = AF_UNIX,
					       .type = SOCK_DGRAM,
					       .unix_name = "sg-agent-test-squat",
					       .abstract = true,
					       .bind_only = true },
			     -1, false,
			     "unix: bind of a host abstract name (squatting) gets EPERM");
		at_result(at_event_seen(&env, 3000, sb.name, "\"egress_denied\"",
					"@sg-agent-test-squat", "lsm_unix_bind", NULL),
			  "unix: the squat is evented with the name", "no event");
		snprintf(squat, sizeof(squat), "%s/s.sock", sb.scratch);
		unix_refused(&sb,
			     (struct net_arg){ .family = AF_UNIX,
					       .type = SOCK_STREAM,
					       .unix_name = squat,
					       .bind_only = true },
			     -1, false, "unix: bind of a path gets EPERM");
	}
	at_sandbox_free(&sb);
}
