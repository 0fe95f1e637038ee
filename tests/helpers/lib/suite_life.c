/* The agent suite: reloads, restarts, and the refusal to start. */
#include <arpa/inet.h>
#include <sched.h>
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

/* sg_config's verdict epoch: remembered file verdicts are used only in
 * theirs. 0 when unreadable. */
static uint32_t verdict_epoch(void)
{
	struct sg_config cfg = { 0 };

	return sg_pinned_config(&cfg) ? 0 : cfg.verdict_epoch;
}

/* Reads of the suite's read-only file in a new sandbox of acme: allowed
 * twice (the second by the verdict the first left, in the fallback and in
 * LSM mode), with no violation counted; or refused once, and counted as
 * the file rule's. After a policy change, a verdict remembered under the
 * old policy must not allow the file. */
static void ro_file_read(const char *name, bool allowed)
{
	struct sg_sandbox_state st = { 0 };
	struct open_arg rd = { .path = ro_file, .flags = O_RDONLY };
	struct at_sandbox sb;
	int st1, st2 = 0;
	bool counted;

	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, name, "cannot create/register a sandbox");
	st1 = run_in(&sb, child_open, &rd);
	if (allowed)
		st2 = run_in(&sb, child_open, &rd);
	counted = sandbox_state(&sb, &st);
	if (allowed)
		at_result(returned(st1, 0) && returned(st2, 0) && counted && st.violations == 0,
			  name, "%s then %s, %s %llu violations", describe(st1), describe(st2),
			  counted ? "" : "(sg_state unreadable)",
			  (unsigned long long)st.violations);
	else
		at_result(refused(st1) && counted && st.violations == 1 &&
				  st.first_rule == SG_RULE_FILE + 1,
			  name, "%s, %s %llu violations, first rule %u", describe(st1),
			  counted ? "" : "(sg_state unreadable)", (unsigned long long)st.violations,
			  st.first_rule);
	at_sandbox_free(&sb);
}

/* busybox touch, on CPU 0: the fallback remembers the last executable
 * each CPU found allowed (tasks.bpf.c, sg_exec_seen), so both execs of a
 * pair must meet the same CPU's memory. */
static int child_exec_cpu0(void *p)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return errno;
	return child_exec(p);
}

/* An exec of busybox in a new sandbox of acme: runs, or is refused and
 * its marker never made. The policy after the reload leaves the exec
 * action at kill, so in LSM mode the agent's kill may beat the EACCES. */
static void busybox_runs(const char *name, bool allowed)
{
	char marker[PATH_MAX];
	struct at_sandbox sb;
	int st;

	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, name, "cannot create/register a sandbox");
	snprintf(marker, sizeof(marker), "%s/ran", sb.scratch);
	st = run_in(&sb, child_exec_cpu0, &(struct exec_arg){ busybox, marker });
	if (allowed)
		at_result(returned(st, 0) && access(marker, F_OK) == 0, name, "%s", describe(st));
	else
		at_result((refused(st) || sigkilled(st)) && access(marker, F_OK) != 0, name,
			  "%s, marker %s", describe(st),
			  access(marker, F_OK) ? "absent" : "PRESENT");
	at_sandbox_free(&sb);
}

void test_reload(void)
{
	uint32_t epoch;

	struct at_sandbox sb;
	char policy[2048];
	int before, st, st2;

	ro_file_read("reload: the read-only file is readable, remembered, no violation", true);
	busybox_runs("reload: busybox runs, its exec remembered", true);
	epoch = verdict_epoch();
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

	/* A valid change applies: the allowlist now names port_tcp4 only. The
	 * file action stays deny, as in the suite's policy: with kill the
	 * agent's kill races the refused open's EACCES in LSM mode (the VM
	 * on a loaded host saw the kill win). */
	snprintf(
		policy, sizeof(policy),
		"{\"tenant\": \"acme\", \"egress\": {\"allow\": [{\"cidr\": \"127.0.0.1\", \"port\": %d}]},\n"
		" \"files\": {\"scratch_root\": \"%s\"}, \"actions\": {\"egress\": \"deny\", \"file\": \"deny\"}}\n",
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
	at_result(verdict_epoch() != epoch, "reload: the change starts a new verdict epoch",
		  "sg_config.verdict_epoch still %u", epoch);
	ro_file_read(
		"reload: a file the new policy drops is refused despite its remembered verdict",
		false);
	busybox_runs("reload: an executable the new policy drops is refused despite its "
		     "remembered exec",
		     false);

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
	ro_file_read("reload: the restored policy allows the read-only file again", true);
	busybox_runs("reload: the restored policy allows busybox again", true);
}

void test_restart(void)
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
void test_refusal(void)
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
