/* The agent suite: forks, kills, floods, nesting, and the world outside the root. */
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

void test_fork_bomb(void)
{
	char v1[PATH_MAX], v1dir[PATH_MAX] = "", procs[PATH_MAX + 16];
	struct at_sandbox sb;
	int fd = -1, st;

	if (cgroup_v1_mount("pids", v1, sizeof(v1)) == 0) {
		snprintf(v1dir, sizeof(v1dir), "%s/sandguard-test-bomb-%d", v1, getpid());
		mkdir(v1dir, 0755);
		write_file(v1dir, "pids.max", "512");
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", v1dir);
		fd = open(procs, O_WRONLY | O_CLOEXEC);
	}
	at_sandbox_new(&env, "acme", &sb);
	if (fd < 0) /* pure v2: the same safety net on the v2 pids controller */
		write_file(sb.cg, "pids.max", "512");
	st = at_run_in(sb.cg, child_fork_bomb, &fd, 15000);
	at_result(st != -2 && at_cgroup_empty(sb.cg, 10000),
		  "fork: a fork bomb dies at max_tasks, the runner lives", "%s, cgroup %s",
		  describe(st), cgroup_is_empty(sb.cg) ? "empty" : "NOT empty");
	at_result(at_event_seen(&env, 3000, sb.name, "\"fork_limit\"", "\"which\":\"max_tasks\"",
				NULL) &&
			  at_event_seen(&env, 3000, sb.name, "\"sandbox_killed\"",
					"\"rule\":\"fork\"", NULL),
		  "fork: fork_limit and sandbox_killed evented", "events missing");
	if (fd >= 0)
		close(fd);
	at_sandbox_free(&sb);
	if (v1dir[0])
		rmdir(v1dir);
}

void test_kill_action(void)
{
	struct at_sandbox sb;
	struct agent_conn *c;
	const char *method;
	uint64_t cgid = 0;
	int st, rule = -1, killed, made;
	char seen[256];

	made = at_sandbox_new(&env, "strict", &sb);
	at_result(made == 0, "kill: the sandbox is enrolled and enforced", "%s", strerror(-made));
	cgroup_id_of(sb.cg, &cgid);
	st = run_in(&sb, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	/* Read before the kill: the agent deletes the entries of a sandbox
	 * it emptied. */
	at_sandbox_describe(cgid, SG_RULE_EGRESS, seen, sizeof(seen));
	at_result(returned(st, EPERM) || sigkilled(st),
		  "kill: an egress attempt under action kill is refused", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "\"sandbox_killed\"", "\"rule\":\"egress\"",
				NULL) &&
			  at_cgroup_empty(sb.cg, 3000),
		  "kill: the whole sandbox is emptied and evented",
		  "no sandbox_killed; the kernel's maps after the attempt: %s", seen);
	/* cgroup.kill where the kernel has it (5.14+), else freeze and kill
	 * each task: the event says which emptied it. */
	method = at_agent_feature(&env, "cgroup_kill") == 1
			 ? "\"method\":\"cgroup.kill\""
			 : "\"method\":\"cgroup.freeze+sigkill\"";
	at_result(at_event_seen(&env, 3000, sb.name, "\"sandbox_killed\"", method, NULL),
		  "kill: emptied by the method the kernel offers", "no sandbox_killed with %s",
		  method);
	c = agent_connect(env.sock);
	killed = agent_kill_verdict(c, cgid, &rule, 2000);
	agent_close(c);
	at_result(killed == 1 && rule == SG_RULE_EGRESS,
		  "kill: the agent's verdict says killed for egress",
		  "verdict %d rule %d; the kernel's maps after the attempt: %s", killed, rule,
		  seen);
	at_sandbox_free(&sb);
}

void test_flood(void)
{
	struct at_sandbox sb;
	int st;

	at_sandbox_new(&env, "flood", &sb);
	st = at_run_in(sb.cg, child_flood_then_trip, &port_udp, 30000);
	at_result(sigkilled(st) && at_cgroup_empty(sb.cg, 3000),
		  "flood: after 50000 denied sendto()s a file trip still kills the sandbox", "%s",
		  describe(st));
	at_result(at_event_seen(&env, 5000, sb.name, "\"sandbox_killed\"", "\"rule\":\"file\"",
				NULL),
		  "flood: the kill is evented", "no sandbox_killed for rule file");
	at_result(saw_nothing(l_udp, false), "flood: the UDP listener received nothing",
		  "it received data");
	at_sandbox_free(&sb);
}

void test_nested_cgroup(void)
{
	struct at_sandbox sb;
	char sub[PATH_MAX + 8];
	int st;

	at_sandbox_new(&env, "acme", &sb);
	snprintf(sub, sizeof(sub), "%s/sub", sb.cg);
	if (mkdir(sub, 0755)) {
		at_result(false, "nested: child cgroup", "cannot create %s: %s", sub,
			  strerror(errno));
		return;
	}
	st = at_run_in(
		sub, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 },
		10000);
	at_result(
		returned(st, EPERM) && saw_nothing(l_tcp4, true),
		"nested: a task in a child cgroup of a sandbox is the sandbox's (connect gets EPERM)",
		"%s", describe(st));
	st = at_run_in(sub, child_open,
		       &(struct open_arg){ .path = "/etc/hostname", .flags = O_RDONLY }, 10000);
	at_result(refused(st), "nested: and its opens are judged by the sandbox's policy", "%s",
		  describe(st));
	cgroup_kill(sub, 2000);
	rmdir(sub);
	at_sandbox_free(&sb);
}

void test_outside_root(void)
{
	int st;

	st = at_run_in(
		env.outside_cg, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 },
		10000);
	at_result(returned(st, 0) && !saw_nothing(l_tcp4, true),
		  "outside: a connect outside the root is untouched", "%s", describe(st));
	st = at_run_in(env.outside_cg, child_open,
		       &(struct open_arg){ .path = "/etc/hostname", .flags = O_RDONLY }, 10000);
	at_result(returned(st, 0), "outside: opening /etc/hostname outside the root is untouched",
		  "%s", describe(st));
	st = at_run_in(env.outside_cg, child_fork_some, NULL, 10000);
	at_result(returned(st, 0), "outside: forking past max_tasks outside the root is untouched",
		  "%s", describe(st));
	st = at_run_in(env.outside_cg, child_exec, &(struct exec_arg){ forbidden_exe, "/dev/null" },
		       10000);
	at_result(returned(st, 0), "outside: a non-allowlisted exec outside the root is untouched",
		  "%s", describe(st));
}

/* Reloads seen in the agent's log so far. */
