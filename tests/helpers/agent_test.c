/* The agent's integration suite: starts a real agent, puts real processes
 * in sandbox cgroups and asserts the kernel's answers (errno, signals,
 * listeners that saw nothing) and the events. Runs on the host (fallback
 * mode here) and inside the VM kernels (LSM mode): --expect-mode says which.
 *
 *   agent_test --sandguard PATH [--expect-mode lsm|fallback] [--mode auto]
 *              [--prefix TEXT]   (put before every result's name)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "control/agent_client.h"
#include "agent_children.h"
#include "agent_test_lib.h"
#include "lib/cgroup.h"
#include "abi/events.h"
#include "control/pinned.h"

static struct at_env env;
/* The exec target is static busybox: it opens nothing before running, so
 * the test judges the exec alone (our own binary may be instrumented by a
 * sanitizer whose runtime reads /proc at start). */
static char busybox[PATH_MAX], self_exe[PATH_MAX], forbidden_exe[PATH_MAX], ro_file[PATH_MAX],
	unix_path[PATH_MAX], unix_dgram_path[PATH_MAX];
static char expect_mode[16] = "";
static bool lsm; /* the agent runs in LSM mode */
static int port_tcp4, port_tcp6, port_udp, port_allowed;
static int l_tcp4 = -1, l_tcp6 = -1, l_udp = -1, l_allowed = -1, l_unix = -1, l_abstract = -1,
	   l_unix_dgram = -1, l_abstract_dgram = -1;

/* ---- helpers for expectations ---- */

static const char *describe(int st)
{
	static char buf[64];

	if (st == -2)
		return "hung";
	if (st < 0)
		return "could not run";
	if (WIFSIGNALED(st))
		snprintf(buf, sizeof(buf), "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, sizeof(buf), "returned %s (%d)", strerror(WEXITSTATUS(st)),
			 WEXITSTATUS(st));
	return buf;
}

static bool returned(int st, int err)
{
	return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == err;
}

static bool sigkilled(int st)
{
	return st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

/* A file or exec refusal: EACCES in LSM mode, the task killed before it
 * could use what it opened in fallback mode. */
static bool refused(int st)
{
	return lsm ? returned(st, EACCES) : sigkilled(st);
}

static int run_in(struct at_sandbox *sb, int (*fn)(void *), void *arg)
{
	return at_run_in(sb->cg, fn, arg, 10000);
}

/* ---- the cases ---- */

static void test_mode(void)
{
	char files[32] = "";

	if (at_agent_mode(&env, files, sizeof(files)))
		at_result(false, "mode: agent status", "could not read the agent's status");
	else if (expect_mode[0])
		at_result(!strcmp(files, expect_mode), "mode: auto picks the expected file mode",
			  "files mode %s, expected %s", files, expect_mode);
	lsm = !strcmp(files, "lsm");
}

static void test_egress(void)
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
static void test_unix(void)
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

static void test_files(void)
{
	struct at_sandbox sb;
	char link[PATH_MAX], scratch_file[PATH_MAX], outside[PATH_MAX + 32], locked[PATH_MAX + 32],
		flags[32];
	int st;

	/* A sandbox per case: in fallback mode a refused open kills the task. */
	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, "files: sandbox", "cannot create/register a sandbox");
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = "/etc/hostname", .flags = O_RDONLY });
	at_result(refused(st), "files: open /etc/hostname is refused", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, lsm ? "\"file_denied\"" : "\"file_tripped\"",
				"/etc/hostname", NULL),
		  "files: the refusal is evented with the resolved path", "no event");
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .cwd = sb.scratch,
					.path = "../../../../../../../../../etc/hostname",
					.flags = O_RDONLY });
	at_result(refused(st), "files: relative ../ path to /etc/hostname is refused", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(link, sizeof(link), "%s/link", sb.scratch);
	if (symlink("/etc/hostname", link))
		at_result(false, "files: symlink", "cannot create %s", link);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .cwd = sb.scratch, .path = "link", .flags = O_RDONLY });
	at_result(refused(st), "files: a symlink in scratch to /etc/hostname is refused", "%s",
		  describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "/etc/hostname", NULL),
		  "files: the symlink's target (not the link) is in the event",
		  "no event naming /etc/hostname");
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(scratch_file, sizeof(scratch_file), "%s/out.txt", sb.scratch);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = scratch_file, .flags = O_WRONLY | O_CREAT });
	at_result(returned(st, 0),
		  "files: scratch is writable (a file created after the policy loaded)", "%s",
		  describe(st));
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_RDONLY });
	at_result(returned(st, 0), "files: the read-only allowlist is readable", "%s",
		  describe(st));
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_WRONLY });
	at_result(refused(st), "files: the read-only allowlist is not writable", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	/* A write outside the scratch is reported as a write, with its flags. */
	at_sandbox_new(&env, "acme", &sb);
	snprintf(outside, sizeof(outside), "%s/created-outside", env.dir);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = outside, .flags = O_WRONLY | O_CREAT });
	at_result(refused(st), "files: an O_CREAT|O_WRONLY open outside the scratch is refused",
		  "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "created-outside", "\"write\":true", NULL),
		  "files: ... and evented as a write", "no event with write true");
	at_sandbox_free(&sb);
	if (!lsm) {
		/* Refused before the agent saw a file (here by DAC; the
		 * executor's Landlock in production): the request's flags. */
		at_sandbox_new(&env, "acme", &sb);
		snprintf(locked, sizeof(locked), "%s/locked", env.dir);
		close(open(locked, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
		st = run_in(&sb, child_open,
			    &(struct open_arg){
				    .path = locked, .flags = O_WRONLY | O_CREAT, .uid = 65534 });
		snprintf(flags, sizeof(flags), "\"flags\":%d", O_WRONLY | O_CREAT);
		at_result(returned(st, EACCES) &&
				  at_event_seen(&env, 3000, sb.name, "\"file_denied\"", "locked",
						"\"requested\":true", "\"write\":true", flags,
						NULL),
			  "files: an open another layer refused is evented as the write it asked",
			  "%s, or no event with write true and %s", describe(st), flags);
		at_sandbox_free(&sb);
	}

	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_uring_open, "/etc/hostname");
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) >= 200)
		at_skipped("files: io_uring openat",
			   "io_uring unavailable here (setup failed, code %d)", WEXITSTATUS(st));
	else if (lsm)
		at_result(returned(st, EACCES),
			  "files: io_uring openat of /etc/hostname gets EACCES", "%s",
			  describe(st));
	else
		at_skipped("files: io_uring openat",
			   "fallback mode does not see io_uring opens (%s); "
			   "the executor's seccomp filter blocks io_uring, LSM mode refuses them",
			   describe(st));
	at_sandbox_free(&sb);
}

static void test_exec(void)
{
	struct at_sandbox sb;
	char marker[PATH_MAX], filename[PATH_MAX + 16];
	int st;

	at_sandbox_new(&env, "acme", &sb);
	snprintf(marker, sizeof(marker), "%s/allowed-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ busybox, marker });
	at_result(returned(st, 0) && access(marker, F_OK) == 0, "exec: an allowlisted exec runs",
		  "%s", describe(st));
	snprintf(filename, sizeof(filename), "\"filename\":\"%s\"", busybox);
	at_result(at_event_seen(&env, 3000, sb.name, "\"type\":\"exec\"", filename, "\"touch\"",
				NULL),
		  "exec: evented with filename and argv", "no exec event with %s", filename);
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(marker, sizeof(marker), "%s/forbidden-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ forbidden_exe, marker });
	at_result(refused(st) && access(marker, F_OK) != 0,
		  lsm ? "exec: a disallowed exec fails at bprm_check with EACCES"
		      : "exec: a disallowed exec is killed before any of its code runs",
		  "%s, marker %s", describe(st), access(marker, F_OK) ? "absent" : "PRESENT");
	at_result(at_event_seen(&env, 3000, sb.name, "\"exec_denied\"",
				lsm ? "\"mode\":\"lsm\"" : "\"mode\":\"fallback\"", NULL),
		  "exec: the refusal is evented with the mode that refused it", "no event");
	at_sandbox_free(&sb);
}

static void test_fork_bomb(void)
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

static void test_kill_action(void)
{
	struct at_sandbox sb;
	struct agent_conn *c;
	const char *method;
	uint64_t cgid = 0;
	int st, rule = -1, killed;

	at_sandbox_new(&env, "strict", &sb);
	cgroup_id_of(sb.cg, &cgid);
	st = run_in(&sb, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	at_result(returned(st, EPERM) || sigkilled(st),
		  "kill: an egress attempt under action kill is refused", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "\"sandbox_killed\"", "\"rule\":\"egress\"",
				NULL) &&
			  at_cgroup_empty(sb.cg, 3000),
		  "kill: the whole sandbox is emptied and evented", "no sandbox_killed");
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
		  "kill: the agent's verdict says killed for egress", "verdict %d rule %d", killed,
		  rule);
	at_sandbox_free(&sb);
}

static void test_flood(void)
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

static void test_nested_cgroup(void)
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

static void test_outside_root(void)
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
static int reloads_logged(const char *needle)
{
	char log[PATH_MAX + 16], *line = NULL;
	size_t cap = 0;
	int n = 0;
	FILE *f;

	snprintf(log, sizeof(log), "%s/agent.log", env.dir);
	f = fopen(log, "r");
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0)
		n += strstr(line, needle) != NULL;
	free(line);
	fclose(f);
	return n;
}

/* Wait (up to 5 s) until `needle` has been logged more than `before` times. */
static bool wait_logged(const char *needle, int before)
{
	for (int i = 0; i < 250; i++, usleep(20000))
		if (reloads_logged(needle) > before)
			return true;
	return false;
}

static void replace_policy(const char *tenant, const char *text)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.json", env.policy_dir, tenant);
	snprintf(tmp, sizeof(tmp), "%s/.%s.json.new", env.policy_dir, tenant);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	rename(tmp, path); /* what config management (and a ConfigMap) does */
}

static int write_policies(void);

static void test_reload(void)
{
	struct at_sandbox sb;
	char policy[2048];
	int before, st, st2;

	replace_policy("acme", "{\"tenant\": \"acme\",\n \"limits\": {\"max_tasks\": -3}}\n");
	at_result(
		wait_logged(
			"acme.json:2:26: limits.max_tasks: expected an integer in 1..65536, got -3",
			0),
		"reload: an invalid policy file is rejected with file:line:col",
		"no rejection logged");
	at_sandbox_new(&env, "acme", &sb);
	st = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_allowed });
	st2 = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	at_result(returned(st, 0) && returned(st2, EPERM) && !saw_nothing(l_allowed, true) &&
			  saw_nothing(l_tcp4, true),
		  "reload: after a rejected file the previous policy stays in force",
		  "allowed %s, denied %s", describe(st), describe(st2));
	at_sandbox_free(&sb);

	/* A valid change applies: the allowlist now names port_tcp4 only. */
	snprintf(
		policy, sizeof(policy),
		"{\"tenant\": \"acme\", \"egress\": {\"allow\": [{\"cidr\": \"127.0.0.1\", \"port\": %d}]},\n"
		" \"files\": {\"scratch_root\": \"%s\"}, \"actions\": {\"egress\": \"deny\"}}\n",
		port_tcp4, env.scratch_root);
	before = reloads_logged(", 0 rejected)");
	replace_policy("acme", policy);
	wait_logged(", 0 rejected)", before);
	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	st2 = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_allowed });
	at_result(returned(st, 0) && returned(st2, EPERM) && !saw_nothing(l_tcp4, true) &&
			  saw_nothing(l_allowed, true),
		  "reload: a valid change to a policy file applies to the tenant's sandboxes",
		  "new port %s, old port %s", describe(st), describe(st2));
	at_sandbox_free(&sb);

	/* SIGHUP reloads too; put the suite's policies back that way. */
	write_policies();
	before = reloads_logged("policies reloaded");
	kill(env.agent, SIGHUP);
	at_result(wait_logged("SIGHUP: reloading", 0) && wait_logged("policies reloaded", before),
		  "reload: SIGHUP reloads the policies", "no reload after SIGHUP");
	at_sandbox_new(&env, "acme", &sb);
	st = run_in(
		&sb, child_net,
		&(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_allowed });
	at_result(returned(st, 0) && !saw_nothing(l_allowed, true),
		  "reload: the restored policy is in force", "%s", describe(st));
	at_sandbox_free(&sb);
}

static void test_restart(void)
{
	struct at_sandbox before, after;
	char dst[64], pin[PATH_MAX];
	int st, rc;

	at_sandbox_new(&env, "acme", &before);
	rc = at_agent_stop(&env);
	snprintf(pin, sizeof(pin), "%s/sg_sandboxes", sg_pin_root());
	at_result(rc == 0 && access(pin, F_OK) == 0,
		  "restart: SIGTERM stops the agent cleanly and the pins stay", "exit %d", rc);
	st = run_in(&before, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	at_result(returned(st, EPERM) && saw_nothing(l_tcp4, true),
		  "restart: with the agent down, sandboxes are still enforced", "%s", describe(st));
	if (at_agent_start(&env))
		return at_result(false, "restart: agent comes back", "the agent did not restart");
	st = run_in(&before, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	at_result(returned(st, EPERM),
		  "restart: the restarted agent keeps enforcing on old sandboxes", "%s",
		  describe(st));
	snprintf(dst, sizeof(dst), "\"dst\":\"127.0.0.1:%d\"", port_tcp4);
	at_result(at_event_seen(&env, 3000, before.name, "\"egress_denied\"", dst, NULL),
		  "restart: events flow again after the restart", "no event");
	at_sandbox_new(&env, "acme", &after);
	st = run_in(&after, child_net,
		    &(struct net_arg){ .family = AF_INET, .type = SOCK_STREAM, .port = port_tcp4 });
	at_result(returned(st, EPERM), "restart: new sandboxes are enforced after the restart",
		  "%s", describe(st));
	at_sandbox_free(&before);
	at_sandbox_free(&after);
}

/* An older kernel: a feature an area needs is missing. The agent must
 * refuse to start, naming it, rather than enforce half the rules. */
static void test_refusal(void)
{
	char log[PATH_MAX + 16], sock[PATH_MAX + 16], text[8192] = "";
	pid_t pid;
	int st = -1, fd;
	ssize_t n;

	snprintf(log, sizeof(log), "%s/refusal.log", env.dir);
	snprintf(sock, sizeof(sock), "%s/refusal.sock", env.dir);
	pid = fork();
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("SANDGUARD_DISABLE_FEATURES", "tp_btf", 1);
		execl(env.sandguard, env.sandguard, "agent", "--policy-dir", env.policy_dir,
		      "--events", "/dev/null", "--socket", sock, "--state-dir", env.dir, "--mode",
		      env.mode, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, &st, 0);
	fd = open(log, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = 0;
		close(fd);
	}
	at_result(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
			  strstr(text, "refusing to start") && strstr(text, "tp_btf:"),
		  "refusal: without a feature a rule needs (tp_btf), the agent refuses to start "
		  "and names it",
		  "%s; log: %.300s", describe(st), text);
}

/* ---- setup ---- */

static int write_policies(void)
{
	char path[PATH_MAX + 32], exe_dir[PATH_MAX], ro_dir[PATH_MAX];
	FILE *f;

	snprintf(exe_dir, sizeof(exe_dir), "%s", self_exe);
	*strrchr(exe_dir, '/') = 0;
	snprintf(ro_dir, sizeof(ro_dir), "%s/ro", env.dir);
	for (int i = 0; i < 3; i++) {
		static const char *const tenants[] = { "acme", "strict", "flood" };
		static const char *const egress[] = { "deny", "kill", "deny" };
		static const char *const file[] = { "deny", "deny", "kill" };
		const char *tenant = tenants[i];
		snprintf(path, sizeof(path), "%s/%s.json", env.policy_dir, tenant);
		f = fopen(path, "w");
		if (!f)
			return -errno;
		fprintf(f,
			"{\"tenant\": \"%s\",\n"
			" \"limits\": {\"max_tasks\": 16, \"max_forks\": 100000},\n"
			" \"egress\": {\"allow\": [{\"cidr\": \"127.0.0.1/32\", \"port\": %d, \"proto\": \"tcp\"}]},\n"
			" \"files\": {\"scratch_root\": \"%s\",\n"
			"   \"read_only\": [\"/usr\", \"/lib\", \"/lib64\", \"/bin\", \"/etc/ld.so.cache\", \"/dev/null\", \"%s\", \"%s\"]},\n"
			" \"exec\": {\"allow\": [\"%s\"]},\n"
			" \"actions\": {\"egress\": \"%s\", \"file\": \"%s\", \"fork\": \"kill\", \"exec\": \"deny\"}}\n",
			tenant, port_allowed, env.scratch_root, exe_dir, ro_dir, busybox, egress[i],
			file[i]);
		fclose(f);
	}
	return 0;
}

static int copy_file(const char *from, const char *to)
{
	char cmd[2 * PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	return system(cmd);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "sandguard", required_argument, NULL, 's' },
					      { "expect-mode", required_argument, NULL, 'e' },
					      { "mode", required_argument, NULL, 'm' },
					      { "prefix", required_argument, NULL, 'p' },
					      { 0 } };
	const char *sandguard = NULL, *mode = "auto";
	char ro_dir[PATH_MAX];
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sandguard = optarg;
			break;
		case 'e':
			snprintf(expect_mode, sizeof(expect_mode), "%s", optarg);
			break;
		case 'm':
			mode = optarg;
			break;
		case 'p':
			at_prefix = optarg;
			break;
		default:
			return 64;
		}
	}
	if (!sandguard) {
		fprintf(stderr,
			"usage: agent_test --sandguard PATH [--expect-mode lsm|fallback] [--mode M] "
			"[--prefix TEXT]\n");
		return 64;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1) < 0)
		return 1;
	if (getuid() != 0) {
		printf("SKIP: agent: needs root\n");
		return 0;
	}
	if (at_env_init(&env, sandguard, mode)) {
		printf("FAIL: agent: setup: %s\n", strerror(errno));
		return 1;
	}
	snprintf(forbidden_exe, sizeof(forbidden_exe), "%s/forbidden-exe", env.dir);
	snprintf(ro_dir, sizeof(ro_dir), "%s/ro", env.dir);
	snprintf(ro_file, sizeof(ro_file), "%s/ro/data", env.dir);
	snprintf(unix_path, sizeof(unix_path), "%s/u.sock", env.dir);
	snprintf(unix_dgram_path, sizeof(unix_dgram_path), "%s/d.sock", env.dir);
	mkdir(ro_dir, 0755);
	close(open(ro_file, O_WRONLY | O_CREAT, 0644));
	if (access("/bin/busybox", X_OK) == 0)
		snprintf(busybox, sizeof(busybox), "/bin/busybox");
	else if (access("/usr/bin/busybox", X_OK) == 0)
		snprintf(busybox, sizeof(busybox), "/usr/bin/busybox");
	else {
		printf("FAIL: agent: setup: no busybox (apt-get install busybox-static)\n");
		return 1;
	}
	if (copy_file(busybox, forbidden_exe))
		printf("FAIL: agent: setup: cannot copy %s\n", busybox);
	if (access("/etc/hostname", F_OK))
		close(open("/etc/hostname", O_WRONLY | O_CREAT, 0644));

	l_tcp4 = listen_on(AF_INET, SOCK_STREAM, &port_tcp4);
	l_tcp6 = listen_on(AF_INET6, SOCK_STREAM, &port_tcp6);
	l_udp = listen_on(AF_INET, SOCK_DGRAM, &port_udp);
	l_allowed = listen_on(AF_INET, SOCK_STREAM, &port_allowed);
	l_unix = listen_unix(unix_path, false);
	l_abstract = listen_unix("sg-agent-test", true);
	l_unix_dgram = bind_unix_dgram(unix_dgram_path, false);
	l_abstract_dgram = bind_unix_dgram("sg-agent-test-d", true);
	if (l_unix < 0 || l_abstract < 0 || l_unix_dgram < 0 || l_abstract_dgram < 0)
		printf("FAIL: agent: setup: unix listeners: %s\n", strerror(errno));
	if (l_tcp4 < 0 || l_udp < 0 || l_allowed < 0)
		printf("FAIL: agent: setup: loopback listeners: %s\n", strerror(errno));
	if (l_tcp6 < 0)
		printf("SKIP: egress: tcp6: no IPv6 loopback here\n");

	if (!write_policies())
		test_refusal();
	if (write_policies() || at_agent_start(&env)) {
		at_result(false, "agent: starts and attaches", "see %s/agent.log", env.dir);
		setenv("SANDGUARD_KEEP_TEST_DIR", "1", 1);
	} else {
		test_mode();
		test_egress();
		test_unix();
		test_files();
		test_exec();
		test_fork_bomb();
		test_kill_action();
		test_flood();
		test_nested_cgroup();
		test_outside_root();
		test_reload();
		test_restart();
	}
	at_env_fini(&env);
	printf("agent: %d passed, %d failed, %d skipped\n", at_pass, at_fail, at_skip);
	return at_fail ? 1 : 0;
}
