/* The agent's integration suite: starts a real agent, puts real processes
 * in sandbox cgroups and asserts the kernel's answers (errno, signals,
 * listeners that saw nothing) and the events. Runs on the host (fallback
 * mode here) and inside the VM kernels (LSM mode): --expect-mode says which.
 *
 *   agent_test --sandguard PATH [--expect-mode lsm|fallback] [--mode auto]
 *              [--prefix TEXT]   (put before every result's name)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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
#include "control/agent_client.h"
#include "agent_children.h"
#include "agent_test_lib.h"
#include "lib/cgroup.h"
#include "abi/events.h"
#include "control/pinned.h"
#include "agent_suite.h"

static char expect_mode[16] = "";

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

/* ---- setup ---- */

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
		test_open_programs();
		test_lsm_scope();
		test_reused_inode();
		test_scratch();
		test_bind_mounts();
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
