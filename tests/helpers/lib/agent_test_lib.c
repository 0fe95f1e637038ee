/* Plumbing for the agent integration suite. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <jansson.h>
#include "control/agent_client.h"
#include "control/enroll.h"
#include "control/pinset.h"
#include "policy/policy.h"
#include "agent_test_lib.h"
#include "lib/cgroup.h"
#include "lib/detail.h"

int at_pass, at_fail, at_skip;
const char *at_prefix = "";

void at_result(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s: %s%s", ok ? "PASS" : "FAIL", at_prefix, name);
	if (!ok) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
	if (ok)
		at_pass++;
	else
		at_fail++;
}

void at_skipped(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: %s%s: ", at_prefix, name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	at_skip++;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int at_env_init(struct at_env *env, const char *sandguard, const char *mode)
{
	char mnt[PATH_MAX];

	memset(env, 0, sizeof(*env));
	env->sandguard = sandguard;
	env->mode = mode;
	snprintf(env->dir, sizeof(env->dir), "/tmp/sg-agent-test.XXXXXX");
	if (!mkdtemp(env->dir))
		return -errno;
	chmod(env->dir, 0755);
	snprintf(env->policy_dir, sizeof(env->policy_dir), "%s/policies", env->dir);
	snprintf(env->scratch_root, sizeof(env->scratch_root), "%s/scratch", env->dir);
	snprintf(env->events, sizeof(env->events), "%s/events.jsonl", env->dir);
	snprintf(env->sock, sizeof(env->sock), "%s/agent.sock", env->dir);
	snprintf(env->ready, sizeof(env->ready), "%s/ready", env->dir);
	mkdir(env->policy_dir, 0755);
	mkdir(env->scratch_root, 0755);
	if (cgroup2_mount(mnt, sizeof(mnt)))
		return -ENOENT;
	/* A root of our own, so a test run never touches real sandboxes. */
	snprintf(env->cg_root, sizeof(env->cg_root), "%s/sandguard-test-%d", mnt, getpid());
	snprintf(env->outside_cg, sizeof(env->outside_cg), "%s/sandguard-test-outside-%d", mnt,
		 getpid());
	if (mkdir(env->cg_root, 0755) || mkdir(env->outside_cg, 0755))
		return -errno;
	setenv("SANDGUARD_CGROUP_ROOT", env->cg_root, 1);
	/* Pins of our own too: a real agent on this node is left alone. */
	snprintf(env->pin_root, sizeof(env->pin_root), "/sys/fs/bpf/sandguard-test-%d", getpid());
	setenv("SANDGUARD_PIN_ROOT", env->pin_root, 1);
	return 0;
}

static void rm_cgroup_tree(const char *path)
{
	char cmd[PATH_MAX + 64];

	/* depth-first: sandboxes, tenants, root */
	snprintf(cmd, sizeof(cmd), "find '%s' -depth -type d -exec rmdir {} + 2>/dev/null", path);
	if (system(cmd) != 0)
		rmdir(path);
}

void at_env_fini(struct at_env *env)
{
	char cmd[PATH_MAX + 32];

	if (env->agent > 0)
		at_agent_stop(env);
	if (env->pin_root[0]) {
		snprintf(cmd, sizeof(cmd), "'%s' agent --cleanup >/dev/null 2>&1", env->sandguard);
		if (system(cmd) != 0)
			fprintf(stderr, "agent_test: could not remove the pins under %s\n",
				env->pin_root);
	}
	rm_cgroup_tree(env->cg_root);
	rm_cgroup_tree(env->outside_cg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", env->dir);
	if (!getenv("SANDGUARD_KEEP_TEST_DIR") && system(cmd) != 0)
		fprintf(stderr, "agent_test: could not remove %s\n", env->dir);
}

/* The agent's log on our stderr: in the VM matrix, the console log is
 * all there is to read afterwards. */
static void dump_log(const char *log)
{
	char line[1024];
	FILE *f = fopen(log, "r");

	if (!f)
		return;
	fprintf(stderr, "---- %s ----\n", log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fprintf(stderr, "---- end of %s ----\n", log);
	fclose(f);
}

int at_agent_start(struct at_env *env)
{
	char log[PATH_MAX + 16];
	long deadline;
	pid_t pid;

	unlink(env->ready);
	snprintf(log, sizeof(log), "%s/agent.log", env->dir);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(env->sandguard, env->sandguard, "agent", "--policy-dir", env->policy_dir,
		      "--events", env->events, "--socket", env->sock, "--state-dir", env->dir,
		      "--ready-file", env->ready, "--mode", env->mode, (char *)NULL);
		_exit(127);
	}
	env->agent = pid;
	for (deadline = now_ms() + 30000; now_ms() < deadline; usleep(20000)) {
		int st;
		if (access(env->ready, F_OK) == 0)
			return 0;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			env->agent = 0;
			fprintf(stderr, "agent_test: the agent exited during start (see %s)\n",
				log);
			dump_log(log);
			return -ECHILD;
		}
	}
	dump_log(log);
	return -ETIMEDOUT;
}

/* Each thread's kernel stack on our stderr (the console log, in the VM
 * matrix): where a process that does not stop is waiting. */
static void dump_stacks(pid_t pid)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd),
		 "for t in /proc/%d/task/*; do echo \"-- $t\"; cat $t/stack; done >&2", (int)pid);
	if (system(cmd) != 0)
		fprintf(stderr, "agent_test: no stacks for %d\n", (int)pid);
}

/* SIGTERM, and the agent's exit status. An agent that has not stopped
 * within AT_STOP_MS is a failure, not a test that waits forever (the VM
 * matrix would lose every later result): its stacks are logged, and it is
 * killed. */
#define AT_STOP_MS 30000

int at_agent_stop(struct at_env *env)
{
	long deadline = now_ms() + AT_STOP_MS;
	int st = 0;

	if (env->agent <= 0)
		return 0;
	kill(env->agent, SIGTERM);
	while (waitpid(env->agent, &st, WNOHANG) == 0) {
		if (now_ms() > deadline) {
			dump_stacks(env->agent);
			at_result(
				false, "agent: SIGTERM stops the agent",
				"pid %d still runs %d ms after SIGTERM (its stacks are on stderr)",
				(int)env->agent, AT_STOP_MS);
			kill(env->agent, SIGKILL);
			waitpid(env->agent, &st, 0);
			break;
		}
		usleep(20000);
	}
	env->agent = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The agent's status document, parsed; NULL if the agent did not answer. */
static json_t *agent_status_json(struct at_env *env)
{
	struct agent_conn *c = agent_connect(env->sock);
	char *text = NULL;
	json_t *st;

	if (!c || agent_status(c, &text)) {
		agent_close(c);
		return NULL;
	}
	agent_close(c);
	st = json_loads(text, 0, NULL);
	free(text);
	return st;
}

int at_agent_mode(struct at_env *env, char *files, size_t len)
{
	json_t *st = agent_status_json(env);
	int rc = -1;

	if (st && json_is_string(json_object_get(json_object_get(st, "modes"), "files"))) {
		snprintf(files, len, "%s",
			 json_string_value(json_object_get(json_object_get(st, "modes"), "files")));
		rc = 0;
	}
	json_decref(st);
	return rc;
}

int at_agent_feature(struct at_env *env, const char *feature)
{
	json_t *st = agent_status_json(env), *ok;
	int rc = -1;

	if (!st)
		return -1;
	ok = json_object_get(json_object_get(json_object_get(st, "features"), feature), "ok");
	if (json_is_boolean(ok))
		rc = json_is_true(ok);
	json_decref(st);
	return rc;
}

bool at_enroll_notify = true;

int at_sandbox_enroll(struct at_env *env, const char *tenant, struct at_sandbox *sb,
		      bool tmpfs_scratch, struct sg_enroll_result *res)
{
	static int seq;
	struct sg_enroll_request req = { 0 };
	struct sg_policy_error perr;
	struct sg_policy policy;
	char tdir[PATH_MAX];
	uint64_t cgid;
	int err;

	memset(sb, 0, sizeof(*sb));
	memset(res, 0, sizeof(*res));
	snprintf(sb->tenant, sizeof(sb->tenant), "%s", tenant);
	snprintf(sb->name, sizeof(sb->name), "t%d-%d", getpid(), ++seq);
	/* The executor's order: scratch, cgroup, enrollment. */
	snprintf(tdir, sizeof(tdir), "%s/%s", env->scratch_root, tenant);
	mkdir(tdir, 0711);
	snprintf(sb->scratch, sizeof(sb->scratch), "%s/%s", tdir, sb->name);
	if (mkdir(sb->scratch, 0777))
		return -errno;
	if (tmpfs_scratch) {
		if (mount("tmpfs", sb->scratch, "tmpfs", MS_NOSUID | MS_NODEV,
			  "size=16m,mode=0777"))
			return -errno;
		sb->tmpfs = true;
	}
	chmod(sb->scratch, 0777);
	snprintf(tdir, sizeof(tdir), "%s/%s", env->cg_root, tenant);
	mkdir(tdir, 0755);
	snprintf(sb->cg, sizeof(sb->cg), "%s/%s", tdir, sb->name);
	if (mkdir(sb->cg, 0755))
		return -errno;
	if (cgroup_id_of(sb->cg, &cgid))
		return -errno;
	err = policy_for_tenant(env->policy_dir, tenant, &policy, &perr);
	if (err)
		return err;
	req.who.tenant = tenant;
	req.who.sandbox = sb->name;
	snprintf(sb->run_id, sizeof(sb->run_id), "run-%s", sb->name);
	snprintf(sb->batch_id, sizeof(sb->batch_id), "batch-%s", sb->name);
	req.who.run_id = sb->run_id;
	req.who.batch_id = sb->batch_id;
	req.who.cgroup_id = cgid;
	req.who.cgroup_root = env->cg_root;
	req.who.scratch = sb->scratch;
	req.who.policy = &policy;
	req.agent = at_enroll_notify ? agent_connect(env->sock) : NULL;
	req.compile_timeout_ms = 5000;
	req.notify_timeout_ms = 5000;
	err = sg_enroll_sandbox(&req, res);
	agent_close(req.agent);
	if (err)
		fprintf(stderr, "agent_test: enrolling %s/%s: %s\n", tenant, sb->name, res->detail);
	return err;
}

int at_sandbox_new(struct at_env *env, const char *tenant, struct at_sandbox *sb)
{
	struct sg_enroll_result res;
	int err = at_sandbox_enroll(env, tenant, sb, false, &res);

	return err ? err : res.enforced ? 0 : -ENOLINK;
}

void at_sandbox_free(struct at_sandbox *sb)
{
	char cmd[PATH_MAX + 16];

	cgroup_kill(sb->cg, 2000);
	rmdir(sb->cg);
	if (sb->tmpfs)
		umount2(sb->scratch, MNT_DETACH);
	if (rmdir(sb->scratch) == 0 || errno == ENOENT)
		return; /* (no shell for an empty scratch: the VM runs a thousand) */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sb->scratch);
	if (system(cmd) != 0)
		fprintf(stderr, "agent_test: could not remove %s\n", sb->scratch);
}

void at_sandbox_describe(uint64_t cgid, int rule, char *buf, size_t len)
{
	struct sg_pinset *set = sg_pinset_get(false);
	struct sg_sandbox sb;
	struct sg_sandbox_state st;
	struct sg_policy_k pol;

	buf[0] = '\0';
	if (!set) {
		detail_append(buf, len, "no pins to read");
		return;
	}
	if (bpf_map_lookup_elem(set->fd[SG_PIN_SANDBOXES], &cgid, &sb))
		detail_append(buf, len, "no sandbox entry (%s)", strerror(errno));
	else if (bpf_map_lookup_elem(set->fd[SG_PIN_POLICIES], &sb.tenant, &pol))
		detail_append(buf, len, "slot %u (no policy in it)", sb.tenant);
	else
		detail_append(buf, len, "slot %u (action %u for rule %d)", sb.tenant,
			      pol.action[rule & 7], rule);
	if (bpf_map_lookup_elem(set->fd[SG_PIN_STATE], &cgid, &st))
		detail_append(buf, len, "; no state entry (%s)", strerror(errno));
	else
		detail_append(buf, len,
			      "; state: %llu violations, first rule %d, tripped %u for rule %d",
			      (unsigned long long)st.violations, sg_state_first_rule(&st),
			      st.tripped, sg_state_kill_rule(&st));
	sg_pinset_put(set);
}

int at_run_in(const char *cg, int (*fn)(void *), void *arg, int timeout_ms)
{
	char procs[PATH_MAX + 16];
	long deadline;
	pid_t pid;
	int fd, st;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	/* Opened before the fork: the child only writes, no open inside. */
	fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fd);
		return -1;
	}
	if (pid == 0) {
		if (write(fd, "0", 1) != 1)
			_exit(120);
		_exit(fn(arg));
	}
	close(fd);
	for (deadline = now_ms() + timeout_ms; now_ms() < deadline; usleep(2000))
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -2; /* hung */
}

bool at_event_seen(struct at_env *env, int timeout_ms, ...)
{
	const char *want[16];
	long deadline = now_ms() + timeout_ms;
	char *line = NULL;
	size_t cap = 0;
	va_list ap;
	int n = 0;

	va_start(ap, timeout_ms);
	while (n < 15 && (want[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	do {
		FILE *f = fopen(env->events, "r");
		if (f) {
			while (getline(&line, &cap, f) > 0) {
				int hit = 0;
				for (int i = 0; i < n; i++)
					hit += strstr(line, want[i]) != NULL;
				if (hit == n) {
					fclose(f);
					free(line);
					return true;
				}
			}
			fclose(f);
		}
		usleep(20000);
	} while (now_ms() < deadline);
	free(line);
	return false;
}

bool at_cgroup_empty(const char *cg, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;

	do {
		if (cgroup_is_empty(cg))
			return true;
		usleep(10000);
	} while (now_ms() < deadline);
	return false;
}
