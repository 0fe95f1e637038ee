/* Enrollment and tenants with a real agent (issue 12): a sandbox the
 * executor enrolls is enforced from its first instruction whether or not
 * the agent runs; names nobody configured never take a policy slot; a
 * verdict never claims a kill that did not happen; a control client that
 * never reads does not hold registration up. Runs on the host and in the
 * VM matrix.
 *
 *   enroll_test --sandguard PATH [--tenants N] [--prefix TEXT]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <jansson.h>
#include "abi/events.h"
#include "abi/maps.h"
#include "agent_suite.h"
#include "control/agent_client.h"
#include "control/enroll.h"
#include "control/ondemand.h"
#include "control/pinned.h"
#include "lib/cgroup.h"

static int n_invented = 1100; /* more than the 1,024 slots of the table */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct net_arg connect_tcp4 = { .family = AF_INET, .type = SOCK_STREAM };

/* Policy slots in use, from the agent's status. */
static int slots_in_use(void)
{
	struct agent_conn *c = agent_connect(env.sock);
	char *text = NULL;
	json_t *st;
	int n = -1;

	if (c && agent_status(c, &text) == 0) {
		st = json_loads(text, 0, NULL);
		if (json_is_array(json_object_get(st, "tenants")))
			n = (int)json_array_size(json_object_get(st, "tenants"));
		json_decref(st);
	}
	free(text);
	agent_close(c);
	return n;
}

/* `"sandbox":..,"batch_id":..,"run_id":..,` of an event line of sb. */
static const char *ids_of(const struct at_sandbox *sb, char *buf, size_t len)
{
	snprintf(buf, len, "\"sandbox\":\"%s\",\"batch_id\":\"%s\",\"run_id\":\"%s\",", sb->name,
		 sb->batch_id, sb->run_id);
	return buf;
}

static void test_default_slot(void)
{
	struct sg_enroll_result res;
	struct at_sandbox sb;
	int st;

	if (at_sandbox_enroll(&env, "nofile-1", &sb, false, &res))
		return at_result(false, "tenants: default slot", "not enrolled: %s", res.detail);
	st = run_in(&sb, child_net, &connect_tcp4);
	at_result(
		res.enforced && res.slot == SG_TENANT_DEFAULT && returned(st, EPERM),
		"tenants: a tenant without a policy file is enforced in the default policy's slot",
		"enforced %d slot %u, %s", res.enforced, res.slot, describe(st));
	at_sandbox_free(&sb);
}

/* Item 3 of issue 12: 1,010 invented tenants filled the 1,024-slot table
 * and a real new tenant then ran unenforced. */
static void test_invented_tenants(void)
{
	int before = slots_in_use(), bad = 0, st;
	char tenant[64], marker[PATH_MAX + 16];
	struct sg_enroll_result res;
	struct at_sandbox sb;

	for (int i = 0; i < n_invented; i++) {
		snprintf(tenant, sizeof(tenant), "invented-%d", i);
		if (at_sandbox_enroll(&env, tenant, &sb, false, &res) || !res.enforced ||
		    res.slot != SG_TENANT_DEFAULT)
			bad++;
		at_sandbox_free(&sb);
		snprintf(marker, sizeof(marker), "%s/%s", env.cg_root, tenant);
		rmdir(marker);
	}
	at_result(bad == 0 && slots_in_use() == before,
		  "tenants: invented tenant names take no policy slot",
		  "%d of %d not in the "
		  "default slot; slots %d before, %d after",
		  bad, n_invented, before, slots_in_use());

	/* A tenant configured after them has its own policy at once. */
	write_policy("late", "deny", "deny", false);
	if (at_sandbox_enroll(&env, "late", &sb, false, &res))
		return at_result(false, "tenants: late tenant", "not enrolled: %s", res.detail);
	snprintf(marker, sizeof(marker), "%s/forbidden-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ forbidden_exe, marker });
	at_result(res.enforced && res.slot != SG_TENANT_DEFAULT && refused(st) &&
			  access(marker, F_OK) != 0,
		  "tenants: after them, a newly configured tenant runs under its own policy",
		  "enforced %d slot %u, exec %s", res.enforced, res.slot, describe(st));
	at_sandbox_free(&sb);
}

static void test_no_pins(void)
{
	char none[PATH_MAX], saved[PATH_MAX];
	struct sg_enroll_result res;
	struct at_sandbox sb;
	int err;

	snprintf(saved, sizeof(saved), "%s", sg_pin_root());
	snprintf(none, sizeof(none), "/sys/fs/bpf/sandguard-none-%d", getpid());
	setenv("SANDGUARD_PIN_ROOT", none, 1);
	err = at_sandbox_enroll(&env, "acme", &sb, false, &res);
	at_result(!err && !res.enforced && strstr(res.detail, "no sandguard agent"),
		  "enroll: no agent ever on the node: the executor's own layers", "err %d: %s", err,
		  res.detail);
	at_sandbox_free(&sb);
	write_policy("needy", "deny", "deny", true);
	err = at_sandbox_enroll(&env, "needy", &sb, false, &res);
	at_result(err == -ENOTCONN && strstr(res.detail, "requires the sandguard agent"),
		  "enroll: ... unless the policy requires the agent: refused, saying why",
		  "err %d: %s", err, res.detail);
	at_sandbox_free(&sb);
	setenv("SANDGUARD_PIN_ROOT", saved, 1);
}

/* The agent down (stopped, restarting, overloaded): enrollment goes on
 * without it, and the restarted agent takes over. One stop for all the
 * cases: an agent start costs seconds in the VM matrix. Item 6 of issue
 * 12 is here too: a result said "killed by the agent: egress rule" when no
 * agent ran and the program had run to completion. */
static void test_agent_down(void)
{
	struct sg_enroll_result res, strict_res, later_res;
	struct at_sandbox sb, strict, later;
	int st, st2, err, rule = -1, trip = -1, killed, tripped;
	struct agent_conn *c;
	uint64_t cgid = 0;
	char ids[512];

	at_agent_stop(&env);
	err = at_sandbox_enroll(&env, "acme", &sb, false, &res);
	st = run_in(&sb, child_net, &connect_tcp4);
	at_result(!err && res.enforced && !res.notified && returned(st, EPERM) &&
			  saw_nothing(l_tcp4, true),
		  "enroll: with the agent down, an enrolled sandbox is enforced from its first "
		  "instruction",
		  "err %d enforced %d (%s), %s", err, res.enforced, res.detail, describe(st));

	write_policy("later", "deny", "deny", false);
	err = at_sandbox_enroll(&env, "later", &later, false, &later_res);
	at_result(err && !later_res.enforced && strstr(later_res.detail, "not compiled"),
		  "tenants: with the agent down, a tenant whose policy is not compiled is refused, "
		  "saying why",
		  "err %d, enforced %d: %s", err, later_res.enforced, later_res.detail);
	at_sandbox_free(&later);

	at_sandbox_enroll(&env, "strict", &strict, false, &strict_res);
	cgroup_id_of(strict.cg, &cgid);
	st2 = run_in(&strict, child_net, &connect_tcp4);
	killed = sg_pinned_kill_rule(cgid, &rule);
	tripped = sg_pinned_trip_rule(cgid, &trip);
	at_result(returned(st2, EPERM) && killed == 0 && tripped == 1 && trip == SG_RULE_EGRESS,
		  "verdict: with no agent, a kill-class violation is recorded, not reported as a "
		  "kill",
		  "%s, killed %d, tripped %d rule %d", describe(st2), killed, tripped, trip);

	if (at_agent_start(&env))
		return at_result(false, "enroll: agent restart", "the agent did not restart");
	at_result(at_event_seen(&env, 5000, sb.name, "\"egress_denied\"", "\"tenant\":\"acme\"",
				NULL),
		  "enroll: the restarted agent adopts it: the denial is attributed to the sandbox",
		  "no event naming %s", sb.name);
	/* An event after the restart: the ids come from the pins. */
	st = run_in(&sb, child_net, &connect_tcp4);
	at_result(
		returned(st, EPERM) && at_event_seen(&env, 5000, ids_of(&sb, ids, sizeof(ids)),
						     "\"egress_denied\"", NULL),
		"ids: an event of a sandbox enrolled while the agent was down carries its run and "
		"batch ids",
		"%s; no egress_denied line with %s", describe(st), ids);
	c = agent_connect(env.sock);
	killed = agent_kill_verdict(c, cgid, &rule, 2000);
	agent_close(c);
	at_result(killed == 0 && rule == SG_RULE_EGRESS && sg_pinned_kill_rule(cgid, &rule) == 0,
		  "verdict: the restarted agent does not claim it killed a sandbox that had ended",
		  "verdict %d rule %d", killed, rule);
	at_sandbox_free(&sb);
	at_sandbox_free(&strict);
}

/* Event identity, for on-call: every event line of a sandbox carries the
 * run and batch ids its executor enrolled it with. They come from the
 * pins (sg_sandbox_ids), not from the best-effort notification: here the
 * executor does not notify the agent at all. */
static void test_ids(void)
{
	struct sg_enroll_result res;
	struct at_sandbox sb;
	char ids[512];
	int err, st;

	at_enroll_notify = false;
	err = at_sandbox_enroll(&env, "strict", &sb, false, &res);
	at_enroll_notify = true;
	if (err || !res.enforced)
		return at_result(false, "ids: enrolled without a notification", "not enrolled: %s",
				 res.detail);
	st = run_in(&sb, child_net,
		    &(struct net_arg){ .family = AF_INET,
				       .type = SOCK_STREAM,
				       .port = port_tcp4,
				       .then_sleep = true });
	ids_of(&sb, ids, sizeof(ids));
	at_result(!res.notified && sigkilled(st) &&
			  at_event_seen(&env, 5000, ids, "\"type\":\"egress_denied\"", NULL) &&
			  at_event_seen(&env, 5000, ids, "\"type\":\"sandbox_killed\"", NULL),
		  "ids: the events of a sandbox the agent was never told about carry its run and "
		  "batch ids (from the pins)",
		  "notified %d, %s; no egress_denied and sandbox_killed lines with %s",
		  res.notified, describe(st), ids);
	at_sandbox_free(&sb);
	err = sg_pinned_sandbox_ids(0, &(struct sg_sandbox_ids){ 0 });
	at_result(err == 0, "ids: no entry for a cgroup nobody enrolled", "got %d", err);
}

/* The scratch identity each sandbox's entry carries (sg_sandboxes), 0
 * when there is none. */
static uint64_t entry_scratch_ino(const struct at_sandbox *sb)
{
	struct sg_sandbox e = { 0 };
	uint64_t cgid = 0;
	int fd = sg_pinned_map("sg_sandboxes");

	if (fd < 0)
		return 0;
	if (cgroup_id_of(sb->cg, &cgid) || bpf_map_lookup_elem(fd, &cgid, &e))
		e.scratch_ino = 0;
	close(fd);
	return e.scratch_ino;
}

/* An executor's thread resolves a sandbox's scratch once and keeps it for
 * the sandbox's next enrollments: two sandboxes enrolled one after the
 * other on one thread each carry their own scratch. */
static void test_scratch_identity(void)
{
	struct sg_enroll_result res;
	struct at_sandbox a, b;
	struct stat sa = { 0 }, sb = { 0 };
	uint64_t ia = 0, ib = 0;
	bool stats;

	if (at_sandbox_enroll(&env, "acme", &a, false, &res) || !res.enforced)
		return at_result(false, "scratch identity: enrolled", "%s", res.detail);
	if (at_sandbox_enroll(&env, "acme", &b, false, &res) || !res.enforced) {
		at_sandbox_free(&a);
		return at_result(false, "scratch identity: enrolled", "%s", res.detail);
	}
	ia = entry_scratch_ino(&a);
	ib = entry_scratch_ino(&b);
	stats = stat(a.scratch, &sa) == 0 && stat(b.scratch, &sb) == 0;
	at_result(stats && ia == sa.st_ino && ib == sb.st_ino && ia != ib,
		  "scratch identity: two sandboxes enrolled by one thread each carry their own",
		  "entries %llu %llu, scratches %llu %llu", (unsigned long long)ia,
		  (unsigned long long)ib, (unsigned long long)sa.st_ino,
		  (unsigned long long)sb.st_ino);
	at_sandbox_free(&a);
	at_sandbox_free(&b);
}

/* The fallback's file programs are attached only while a sandbox exists
 * (src/control/ondemand.h): detached once none is left, attached by the
 * executor's enrollment before the sandbox's first instruction, and never
 * detached under a live sandbox, even by a detacher racing every
 * enrollment. */
static volatile bool detacher_stop;
static int detaches;

static void *detacher(void *arg)
{
	while (!detacher_stop)
		if (sg_ondemand_detach_if_idle() > 0)
			detaches++;
	return NULL;
}

/* One enrollment as the executor does it, checked: the programs are
 * attached when it returns, and an open outside the policy is refused. */
static bool enroll_watched(double *took_ms)
{
	struct sg_enroll_result res;
	struct at_sandbox sb;
	uint64_t cgid = 0;
	double t0 = now_ms();
	int attached, st;
	bool ok;

	if (at_sandbox_enroll(&env, "acme", &sb, false, &res) || !res.enforced) {
		at_sandbox_free(&sb);
		return false;
	}
	*took_ms = now_ms() - t0;
	attached = sg_ondemand_attached();
	st = run_in(&sb, child_open, &(struct open_arg){ .path = "/etc/hostname" });
	ok = attached == 1 && refused(st);
	if (!ok)
		fprintf(stderr, "enroll_test: attached %d, open: %s\n", attached, describe(st));
	cgroup_id_of(sb.cg, &cgid);
	at_sandbox_free(&sb);
	sg_enroll_release(cgid);
	return ok;
}

static void test_on_demand(void)
{
	double took, worst = 0;
	int bad = 0, n = 100, attached = -1;
	pthread_t t;

	if (lsm)
		return at_skipped(
			"ondemand: file programs",
			"LSM mode: the file programs stay attached (on the sandguard root where the kernel has lsm_cgroup), nothing is on demand");
	/* The agent detaches them on its tick once it has no sandbox. */
	for (double end = now_ms() + 10000; now_ms() < end; usleep(50000))
		if ((attached = sg_ondemand_attached()) == 0)
			break;
	at_result(attached == 0, "ondemand: with no sandbox left, the file programs are detached",
		  "attached: %d", attached);
	at_result(enroll_watched(&took),
		  "ondemand: an enrollment attaches them before the sandbox's first instruction",
		  "see stderr");
	printf("# enrollment that attached the file programs: %.1f ms\n", took);

	detacher_stop = false;
	detaches = 0;
	if (pthread_create(&t, NULL, detacher, NULL))
		return at_result(false, "ondemand: race", "no thread: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		bad += !enroll_watched(&took);
		if (took > worst)
			worst = took;
	}
	detacher_stop = true;
	pthread_join(t, NULL);
	printf("# %d enrollments racing a detacher: %d detaches, slowest enrollment %.1f ms\n", n,
	       detaches, worst);
	at_result(bad == 0 && detaches > 0,
		  "ondemand: enrollments racing a detacher: every sandbox watched from its first "
		  "instruction",
		  "%d of %d sandboxes unwatched (%d detaches in between)", bad, n, detaches);
}

/* A kill the agent carried out is reported as one. */
static void test_verdict_kill(void)
{
	struct sg_enroll_result res;
	struct at_sandbox sb;
	struct agent_conn *c;
	uint64_t cgid = 0;
	int st, rule = -1, trip = -1, killed;

	at_sandbox_enroll(&env, "strict", &sb, false, &res);
	cgroup_id_of(sb.cg, &cgid);
	st = run_in(&sb, child_net,
		    &(struct net_arg){ .family = AF_INET,
				       .type = SOCK_STREAM,
				       .port = port_tcp4,
				       .then_sleep = true });
	c = agent_connect(env.sock);
	killed = agent_kill_verdict(c, cgid, &rule, 2000);
	agent_close(c);
	at_result(sigkilled(st) && killed == 1 && sg_pinned_kill_rule(cgid, &trip) == 1 &&
			  trip == SG_RULE_EGRESS,
		  "verdict: a kill the agent carried out is reported, by it and by the pins",
		  "%s, verdict %d", describe(st), killed);
	at_sandbox_free(&sb);
}

/* Registrations (enroll with its notification), timed; returns how many
 * the agent acknowledged and the slowest in *max_ms. */
static int registrations(int n, double *median_ms, double *max_ms)
{
	double took[64];
	int ok = 0;

	*max_ms = 0;
	for (int i = 0; i < n && i < 64; i++) {
		struct sg_enroll_result res;
		struct at_sandbox sb;
		double t0 = now_ms();

		if (!at_sandbox_enroll(&env, "acme", &sb, false, &res) && res.notified)
			ok++;
		took[i] = now_ms() - t0;
		if (took[i] > *max_ms)
			*max_ms = took[i];
		at_sandbox_free(&sb);
	}
	for (int i = 1; i < n && i < 64; i++) /* insertion sort for the median */
		for (int j = i; j > 0 && took[j] < took[j - 1]; j--) {
			double t = took[j];
			took[j] = took[j - 1];
			took[j - 1] = t;
		}
	*median_ms = took[(n < 64 ? n : 64) / 2];
	return ok;
}

/* Item 2 of issue 12: a client that never reads its replies. */
static void test_stuck_client(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char req[] = "{\"op\":\"status\"}\n";
	double med0, max0, med1, max1;
	int fd, ok0, ok1, sent = 0, idle[300], idle_n;
	char files[32];

	ok0 = registrations(20, &med0, &max0);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", env.sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		return at_result(false, "control: stuck client", "cannot connect: %s",
				 strerror(errno));
	/* Requests until the socket is full: the agent's replies pile up. */
	while (sent < 100000 && send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) > 0)
		sent++;
	ok1 = registrations(20, &med1, &max1);
	printf("# registration with its notification: median %.1f ms (max %.1f) alone, "
	       "median %.1f ms (max %.1f) with a client that sent %d requests and reads nothing\n",
	       med0, max0, med1, max1, sent);
	at_result(ok0 == 20 && ok1 == 20,
		  "control: a client that never reads leaves registration working",
		  "acknowledged %d of 20 alone, %d of 20 with the stuck client", ok0, ok1);
	at_result(at_agent_mode(&env, files, sizeof(files)) == 0,
		  "control: ... and the status answers", "no status");
	close(fd);

	/* 300 idle clients ("too many clients" in issue 12). */
	for (idle_n = 0; idle_n < 300; idle_n++) {
		idle[idle_n] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (idle[idle_n] < 0 ||
		    connect(idle[idle_n], (struct sockaddr *)&addr, sizeof(addr))) {
			if (idle[idle_n] >= 0)
				close(idle[idle_n]);
			break;
		}
	}
	ok1 = registrations(20, &med1, &max1);
	printf("# registration with %d idle clients connected: median %.1f ms (max %.1f)\n", idle_n,
	       med1, max1);
	at_result(idle_n == 300 && ok1 == 20,
		  "control: 300 idle clients leave registration working",
		  "%d idle clients connected; acknowledged %d of 20", idle_n, ok1);
	while (idle_n-- > 0)
		close(idle[idle_n]);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "sandguard", required_argument, NULL, 's' },
					      { "tenants", required_argument, NULL, 't' },
					      { "prefix", required_argument, NULL, 'p' },
					      { 0 } };
	const char *sandguard = NULL;
	char ro_dir[PATH_MAX + 8], cmd[2 * PATH_MAX + 16], files[32];
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's')
			sandguard = optarg;
		else if (c == 't')
			n_invented = atoi(optarg);
		else if (c == 'p')
			at_prefix = optarg;
		else
			return 64;
	}
	if (!sandguard) {
		fprintf(stderr, "usage: enroll_test --sandguard PATH [--tenants N] [--prefix T]\n");
		return 64;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The agent detaches the on-demand programs as soon as it has no
	 * sandbox: every case runs through attach and detach. */
	setenv("SANDGUARD_DETACH_AFTER_IDLE_MS", "0", 1);
	if (getuid() != 0) {
		printf("SKIP: enroll: needs root\n");
		return 0;
	}
	if (readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1) < 0 ||
	    at_env_init(&env, sandguard, "auto")) {
		printf("FAIL: enroll: setup: %s\n", strerror(errno));
		return 1;
	}
	snprintf(busybox, sizeof(busybox), "%s",
		 access("/bin/busybox", X_OK) == 0 ? "/bin/busybox" : "/usr/bin/busybox");
	snprintf(forbidden_exe, sizeof(forbidden_exe), "%s/forbidden-exe", env.dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", busybox, forbidden_exe);
	snprintf(ro_dir, sizeof(ro_dir), "%s/ro", env.dir);
	mkdir(ro_dir, 0755);
	l_tcp4 = listen_on(AF_INET, SOCK_STREAM, &port_tcp4);
	l_allowed = listen_on(AF_INET, SOCK_STREAM, &port_allowed);
	connect_tcp4.port = port_tcp4;
	if (system(cmd) != 0 || l_tcp4 < 0 || l_allowed < 0 ||
	    write_policy("default", "deny", "deny", false) || write_policies() ||
	    at_agent_start(&env)) {
		at_result(false, "enroll: setup", "see %s", env.dir);
	} else {
		at_agent_mode(&env, files, sizeof(files));
		lsm = !strcmp(files, "lsm");
		test_default_slot();
		test_invented_tenants();
		test_no_pins();
		test_verdict_kill();
		test_ids();
		test_scratch_identity();
		test_on_demand();
		test_stuck_client();
		test_agent_down();
	}
	at_env_fini(&env);
	printf("enroll: %d passed, %d failed, %d skipped\n", at_pass, at_fail, at_skip);
	return at_fail ? 1 : 0;
}
