/* The agent suite's shared state and expectations (agent_suite.h). */
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
#include <bpf/bpf.h>
#include "abi/events.h"
#include "abi/maps.h"
#include "agent_suite.h"
#include "control/agent_client.h"
#include "control/pinned.h"
#include "lib/cgroup.h"

struct at_env env;
/* The exec target is static busybox: it opens nothing before running, so
 * the test judges the exec alone (our own binary may be instrumented by a
 * sanitizer whose runtime reads /proc at start). */
char busybox[PATH_MAX], self_exe[PATH_MAX], forbidden_exe[PATH_MAX], ro_file[PATH_MAX],
	unix_path[PATH_MAX], unix_dgram_path[PATH_MAX];
bool lsm; /* the agent runs in LSM mode */
int port_tcp4, port_tcp6, port_udp, port_allowed;
int l_tcp4 = -1, l_tcp6 = -1, l_udp = -1, l_allowed = -1, l_unix = -1, l_abstract = -1,
    l_unix_dgram = -1, l_abstract_dgram = -1;

/* ---- helpers for expectations ---- */

const char *describe(int st)
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

bool returned(int st, int err)
{
	return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == err;
}

bool sigkilled(int st)
{
	return st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

/* A file or exec refusal: EACCES in LSM mode, the task killed before it
 * could use what it opened in fallback mode. */
bool refused(int st)
{
	return lsm ? returned(st, EACCES) : sigkilled(st);
}

int run_in(struct at_sandbox *sb, int (*fn)(void *), void *arg)
{
	return at_run_in(sb->cg, fn, arg, 10000);
}

bool sandbox_state(const struct at_sandbox *sb, struct sg_sandbox_state *st)
{
	uint64_t cgid = 0;
	int fd = sg_pinned_map("sg_state");
	bool ok;

	if (fd < 0)
		return false;
	ok = !cgroup_id_of(sb->cg, &cgid) && !bpf_map_lookup_elem(fd, &cgid, st);
	close(fd);
	return ok;
}


int write_policy(const char *tenant, const char *egress, const char *file, bool require_agent)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 40], exe_dir[PATH_MAX], ro_dir[PATH_MAX];
	FILE *f;

	snprintf(exe_dir, sizeof(exe_dir), "%s", self_exe);
	*strrchr(exe_dir, '/') = 0;
	snprintf(ro_dir, sizeof(ro_dir), "%s/ro", env.dir);
	snprintf(path, sizeof(path), "%s/%s.json", env.policy_dir, tenant);
	snprintf(tmp, sizeof(tmp), "%s/.%s.json.new", env.policy_dir, tenant);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f,
		"{\"tenant\": \"%s\", \"require_agent\": %s,\n"
		" \"limits\": {\"max_tasks\": 16, \"max_forks\": 100000},\n"
		" \"egress\": {\"allow\": [{\"cidr\": \"127.0.0.1/32\", \"port\": %d, \"proto\": \"tcp\"}]},\n"
		" \"files\": {\"scratch_root\": \"%s\",\n"
		"   \"read_only\": [\"/usr\", \"/lib\", \"/lib64\", \"/bin\", \"/etc/ld.so.cache\", \"/dev/null\", \"%s\", \"%s\"]},\n"
		" \"exec\": {\"allow\": [\"%s\"]},\n"
		" \"actions\": {\"egress\": \"%s\", \"file\": \"%s\", \"fork\": \"kill\", \"exec\": \"deny\"}}\n",
		tenant, require_agent ? "true" : "false", port_allowed, env.scratch_root, exe_dir,
		ro_dir, busybox, egress, file);
	fclose(f);
	return rename(tmp, path) ? -errno : 0; /* whole, as config management writes it */
}

int write_policies(void)
{
	int err = write_policy("acme", "deny", "deny", false);

	if (!err)
		err = write_policy("strict", "kill", "deny", false);
	if (!err)
		err = write_policy("flood", "deny", "kill", false);
	return err;
}
