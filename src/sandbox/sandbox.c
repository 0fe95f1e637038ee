/* One run of tenant code in a fresh sandbox (see src/sandbox/sandbox.h).
 *
 * Order matters: the in-flight record exists before anything it names, so
 * a killed executor leaves nothing the next one cannot find. The node
 * agent finds a sandbox by its cgroup and its scratch by convention, so the
 * scratch exists before the cgroup, the cgroup before the agent hears of
 * it, and the agent enforces before any tenant code runs. Teardown runs
 * whatever happened, in reverse: cgroup emptied, files fetched, verdict
 * asked, agent told, cgroups removed, scratch unmounted, slot released;
 * the record goes when the caller has booked the attempt. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "lib/fs_util.h"
#include "lib/clock.h"
#include "control/agent_client.h"
#include "control/enroll.h"
#include "lib/log.h"
#include "sandbox.h"
#include "sandbox_cgroup.h"
#include "sandbox_child.h"
#include "sandbox_cpu.h"
#include "sandbox_io.h"
#include "sandbox_landlock.h"
#include "sandbox_scratch.h"
#include "sandbox_seccomp.h"
#include "sandbox_slots.h"

#define LINGER_MS         100  /* pipe data after the main process exited */
#define AGENT_REGISTER_MS 250  /* the notification only: enforcement is already in place */
#define AGENT_COMPILE_MS  2000 /* a tenant's policy file the agent has not compiled yet */
#define AGENT_VERDICT_MS  200  /* bounds the round trip, and a kill notice in flight */
#define KILL_WAIT_MS      2000
#define PIPE_BYTES        (256 * 1024)
#define HOSTNAME          "sandbox" /* the same for every sandbox: nothing of the node */

/* Everything one run holds, so teardown can undo exactly what was done. */
struct run {
	const struct sandbox_spec *spec;
	struct sandbox_result *res;
	struct sb_slot slot;
	char scratch[PATH_MAX];
	bool scratch_made;
	struct sb_cgroup cg;
	bool cgroup_made;
	bool registered;
	bool enrolled; /* our entries are in the pinned maps */
	int landlock_fd;
	uint64_t proc_read; /* Landlock rights on the sandbox's /proc paths */
	struct sb_seccomp seccomp;
	bool have_seccomp;
	struct sb_root_plan root;
	struct sb_net_plan net;
	bool relay; /* the policy allows TCP egress: a relay in the sandbox */
	int in[2], out[2], err[2], report[2], status_pipe[2];
	pid_t pid; /* the sandbox's init */
	bool reaped;
	int status;                 /* init's wait status */
	struct sb_init_status init; /* main's, as init reported it */
	bool init_reported;
	char home[PATH_MAX + 8];
	char *envp[4];
	char exec_buf[2][PATH_MAX];
	uint64_t timeout_ms;
};

static int fail(struct run *r, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct run *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->res->detail, sizeof(r->res->detail), fmt, ap);
	va_end(ap);
	return err;
}

static int check_spec(struct run *r)
{
	const struct sandbox_spec *s = r->spec;
	struct sigaction chld;

	/* The tenant name becomes a directory name in two trees. */
	if (!s->policy || !s->tenant || !tenant_name_valid(s->tenant))
		return fail(r, -EINVAL, "invalid sandbox spec: no policy or bad tenant name");
	if (!s->argv || !s->argv[0] || !*s->argv[0])
		return fail(r, -EINVAL, "invalid sandbox spec: empty command");
	if ((s->stdin_len && !s->stdin_data) || (s->n_files && !s->files) ||
	    (s->n_fetch && !s->fetch))
		return fail(r, -EINVAL, "invalid sandbox spec: missing data");
	r->timeout_ms = s->timeout_ms ? s->timeout_ms : s->policy->limits.timeout_ms;
	r->res->timeout_ms = r->timeout_ms;
	if (!r->timeout_ms)
		return fail(r, -EINVAL,
			    "invalid sandbox spec: no timeout (limits.timeout_ms is 0)");
	if (!s->policy->limits.output_bytes)
		return fail(r, -EINVAL, "invalid policy: limits.output_bytes is 0");
	if (!s->policy->scratch_root[0] || s->policy->scratch_root[0] != '/')
		return fail(r, -EINVAL, "invalid policy: scratch_root must be an absolute path");
	if (sigaction(SIGCHLD, NULL, &chld) == 0 &&
	    (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT)))
		return fail(r, -EINVAL,
			    "SIGCHLD is ignored in this process: "
			    "the sandbox's exit status would be lost");
	if (s->policy->require_agent && !s->agent)
		return fail(r, -ENOTCONN,
			    "policy requires the sandguard agent, and none is connected");
	return 0;
}

/* The in-flight record of sandbox `id`, before anything of it exists. */
static int record(struct run *r, char *detail, size_t dlen)
{
	const struct sandbox_spec *s = r->spec;
	struct sb_record rec = { .attempt = s->attempt, .executor = getpid() };
	int err;

	snprintf(rec.tenant, sizeof(rec.tenant), "%s", s->tenant);
	snprintf(rec.run_id, sizeof(rec.run_id), "%s", s->run_id ? s->run_id : "");
	snprintf(rec.batch_id, sizeof(rec.batch_id), "%s", s->batch_id ? s->batch_id : "");
	snprintf(rec.mode, sizeof(rec.mode), "%s", s->mode ? s->mode : "");
	snprintf(rec.sandbox, sizeof(rec.sandbox), "%s", r->res->sandbox_id);
	snprintf(rec.scratch_root, sizeof(rec.scratch_root), "%s", s->policy->scratch_root);
	rec.started_ms = clock_ms(CLOCK_REALTIME);
	err = sb_cgroup_root(rec.cgroup_root, sizeof(rec.cgroup_root));
	if (err) {
		snprintf(detail, dlen, "cannot find the sandguard cgroup root: %s", strerror(-err));
		return err;
	}
	return sb_record_open(&rec, &r->res->record, detail, dlen);
}

/* Slot, id, record and scratch: a fresh random id until its scratch is new. */
static int make_scratch(struct run *r)
{
	const struct sg_policy *p = r->spec->policy;
	struct sb_scratch_spec sp = { .root = p->scratch_root,
				      .tenant = r->spec->tenant,
				      .size_mb = p->scratch_mb,
				      .inodes = p->scratch_inodes,
				      .exec = r->spec->allow_exec_in_scratch };
	char detail[256];
	int err;

	err = sb_slot_acquire(&r->slot, detail, sizeof(detail));
	if (err)
		return fail(r, err, "%s", detail);
	r->res->uid = (uint32_t)r->slot.uid;
	sp.uid = r->slot.uid;
	sp.gid = r->slot.gid;
	sp.id = r->res->sandbox_id;
	for (int attempt = 0; attempt < 8; attempt++) {
		uint32_t rnd;

		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return fail(r, -errno, "getrandom: %s", strerror(errno));
		snprintf(r->res->sandbox_id, sizeof(r->res->sandbox_id), "%08x-%d", rnd,
			 (int)getpid());
		err = record(r, detail, sizeof(detail));
		if (!err)
			err = sb_scratch_create(&sp, r->scratch, sizeof(r->scratch), detail,
						sizeof(detail));
		if (err != -EEXIST)
			break;
		sb_record_release(&r->res->record);
	}
	if (err)
		return fail(r, err, "%s", err == -EEXIST ? "no unused sandbox id" : detail);
	r->scratch_made = true;
	err = sb_scratch_write_files(r->scratch, r->spec->files, r->spec->n_files, r->slot.uid,
				     r->slot.gid, detail, sizeof(detail));
	if (err)
		return fail(r, err, "%s", detail);
	return 0;
}

/* The kernel enforces the tenant's policy on the sandbox before any of
 * its code runs, or the run is refused: the executor writes the
 * sandbox's entries into the agent's pinned maps itself and tells the
 * agent after (src/control/enroll.h). No pins at all (no agent on this
 * node): the executor's own layers, unless the policy requires the agent. */
static int register_with_agent(struct run *r)
{
	const struct sandbox_spec *s = r->spec;
	struct sg_enroll_request req = {
		.tenant = s->tenant,
		.sandbox = r->res->sandbox_id,
		.run_id = s->run_id,
		.batch_id = s->batch_id,
		.cgroup_id = r->cg.id,
		.scratch = r->scratch,
		.policy = s->policy,
		.agent = s->agent,
		.compile_timeout_ms = AGENT_COMPILE_MS,
		.notify_timeout_ms = AGENT_REGISTER_MS,
	};
	struct sg_enroll_result res;
	int err = sg_enroll_sandbox(&req, &res);

	if (err)
		return fail(r, err, "sandbox %s not started: %s", r->res->sandbox_id, res.detail);
	r->registered = res.notified;
	r->enrolled = res.enforced;
	r->res->agent_enforced = res.enforced;
	if (!res.enforced) {
		sg_warn("sandbox %s: %s", r->res->sandbox_id, res.detail);
		return 0;
	}
	/* The agent kills a fork bomb at max_tasks and books it as a fork
	 * violation; pids.max stays as the kernel's backstop, a little above,
	 * so that the agent's limit is the one that trips. */
	err = sb_cgroup_pids_backstop(&r->cg, &s->policy->limits);
	if (err)
		return fail(r, err, "cannot raise pids.max for sandbox %s: %s", r->res->sandbox_id,
			    strerror(-err));
	return 0;
}

static int make_cgroup(struct run *r)
{
	const struct sandbox_spec *s = r->spec;
	char detail[256];
	int err;

	err = sb_cgroup_create(&r->cg, s->tenant, r->res->sandbox_id, s->policy, detail,
			       sizeof(detail));
	if (err)
		return fail(r, err, "%s", detail);
	r->cgroup_made = true;
	r->res->cgroup_id = r->cg.id;
	return register_with_agent(r);
}

/* Whether the egress allowlist lets any UDP out (a UDP or any-protocol
 * entry): only then may the sandbox create UDP sockets at all. */
static bool egress_has_udp(const struct sg_policy *p)
{
	for (int i = 0; i < p->n_egress; i++)
		if (p->egress[i].proto == 0 || p->egress[i].proto == IPPROTO_UDP)
			return true;
	return false;
}

static int make_layers(struct run *r)
{
	const struct sg_policy *p = r->spec->policy;
	struct sb_seccomp_rules rules = { .allow_unix = p->allow_unix,
					  .allow_udp = egress_has_udp(p),
					  .allow_listen = p->allow_listen };
	struct landlock_delegation to_agent = { 0 };
	char detail[256];
	int fd, err;

	/* The agent's cgroup hooks refuse connects in every mode; opens only
	 * in BPF LSM mode (in fallback mode it sees them after the fact). */
	if (r->res->agent_enforced) {
		to_agent.tcp_connect = true;
		to_agent.reads = agent_files_preventive(r->spec->agent);
	}
	fd = landlock_ruleset_build(p, r->scratch, r->spec->allow_exec_in_scratch, &to_agent,
				    &r->proc_read, detail, sizeof(detail));
	if (fd == -EOPNOTSUPP) {
		sg_warn("this kernel has no Landlock; sandbox %s runs without its filesystem layer",
			r->res->sandbox_id);
	} else if (fd < 0) {
		return fail(r, fd, "%s", detail);
	}
	r->landlock_fd = fd;
	err = seccomp_filter_build(&r->seccomp, &rules);
	if (err == -EOPNOTSUPP)
		sg_warn("no seccomp filter for this architecture");
	else if (err)
		return fail(r, err, "cannot build the seccomp filter: %s", strerror(-err));
	r->have_seccomp = !err;
	err = fs_mkdir_p(SB_ROOT_BASE, 0755);
	if (err)
		return fail(r, err, "cannot create %s: %s", SB_ROOT_BASE, strerror(-err));
	err = sb_root_plan(&r->root, p, r->scratch, SB_ROOT_BASE, r->spec->allow_exec_in_scratch,
			   detail, sizeof(detail));
	if (err)
		return fail(r, err, "%s", detail);
	r->relay = sb_net_plan(&r->net, p);
	return 0;
}

/* Keep every fd we hand the child above stderr, so that its dup2() onto
 * 0, 1 and 2 cannot clobber one of them (the caller may have closed its
 * stdin). */
static int above_stdio(int *fd)
{
	int moved;

	if (*fd > 2)
		return 0;
	moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (moved < 0)
		return -errno;
	close(*fd);
	*fd = moved;
	return 0;
}

static int make_pipes(struct run *r)
{
	int *pairs[] = { r->in, r->out, r->err, r->report, r->status_pipe };

	for (int i = 0; i < 5; i++) {
		if (pipe2(pairs[i], O_CLOEXEC))
			return fail(r, -errno, "pipe: %s", strerror(errno));
		for (int end = 0; end < 2; end++)
			if (above_stdio(&pairs[i][end]))
				return fail(r, -errno, "fcntl: %s", strerror(errno));
	}
	for (int i = 0; i < 1 + SB_CTRL__COUNT; i++)
		if (r->cg.join_fd[i] >= 0 && above_stdio(&r->cg.join_fd[i]))
			return fail(r, -errno, "fcntl: %s", strerror(errno));
	if (r->landlock_fd >= 0 && above_stdio(&r->landlock_fd))
		return fail(r, -errno, "fcntl: %s", strerror(errno));
	/* Our ends never block; bigger pipes mean fewer wakeups on a flood. */
	fcntl(r->in[1], F_SETFL, O_NONBLOCK);
	fcntl(r->out[0], F_SETFL, O_NONBLOCK);
	fcntl(r->err[0], F_SETFL, O_NONBLOCK);
	fcntl(r->out[0], F_SETPIPE_SZ, PIPE_BYTES);
	fcntl(r->err[0], F_SETPIPE_SZ, PIPE_BYTES);
	fcntl(r->status_pipe[0], F_SETFL, O_NONBLOCK);
	return 0;
}

static void add_rlimit(struct sb_child_plan *plan, int resource, rlim_t value)
{
	plan->rlimits[plan->n_rlimits].resource = resource;
	plan->rlimits[plan->n_rlimits].lim.rlim_cur = value;
	plan->rlimits[plan->n_rlimits].lim.rlim_max = value;
	plan->n_rlimits++;
}

/* Everything the child needs, prepared before fork: after it, the child
 * may not allocate. */
static void make_plan(struct run *r, struct sb_child_plan *plan)
{
	const struct sg_limits *lim = &r->spec->policy->limits;
	const char *cmd = r->spec->argv[0];

	memset(plan, 0, sizeof(*plan));
	plan->cg = &r->cg;
	plan->stdio[0] = r->in[0];
	plan->stdio[1] = r->out[1];
	plan->stdio[2] = r->err[1];
	plan->report_fd = r->report[1];
	plan->status_fd = r->status_pipe[1];
	plan->uid = r->slot.uid;
	plan->gid = r->slot.gid;
	plan->scratch = r->scratch;
	plan->landlock_fd = r->landlock_fd;
	plan->proc_read = r->proc_read;
	plan->seccomp = r->have_seccomp ? &r->seccomp : NULL;
	/* Its own everything (the PID namespace comes with init's clone):
	 * a minimal root, a host name that says nothing of the node, SysV
	 * IPC that dies with it, and a network with nothing in it but what
	 * the relay lets through. */
	plan->unshare_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET;
	plan->hostname = HOSTNAME;
	plan->root = &r->root;
	plan->net = r->relay ? &r->net : NULL;
	/* No core dumps: they would land in the scratch. */
	add_rlimit(plan, RLIMIT_CORE, 0);
	add_rlimit(plan, RLIMIT_NOFILE, lim->open_files);
	add_rlimit(plan, RLIMIT_FSIZE, (rlim_t)lim->file_size_mb << 20);
	/* The last resort where no cgroup controller is usable. */
	if (r->cg.where[SB_CTRL_PIDS] == SB_WHERE_RLIMIT && lim->max_tasks)
		add_rlimit(plan, RLIMIT_NPROC, lim->max_tasks); /* per uid = per slot */
	if (r->cg.where[SB_CTRL_MEMORY] == SB_WHERE_RLIMIT && lim->memory_mb)
		add_rlimit(plan, RLIMIT_AS, (rlim_t)lim->memory_mb << 20);
	if (r->cg.where[SB_CTRL_CPU] == SB_WHERE_RLIMIT && lim->cpu > 0)
		add_rlimit(plan, RLIMIT_CPU,
			   (rlim_t)ceil(lim->cpu * (double)r->timeout_ms / 1000.0) + 1);
	snprintf(r->home, sizeof(r->home), "HOME=%s", r->scratch);
	r->envp[0] = "PATH=/usr/bin:/bin";
	r->envp[1] = "LANG=C.UTF-8";
	r->envp[2] = r->home;
	r->envp[3] = NULL;
	plan->envp = r->envp;
	plan->argv = r->spec->argv;
	if (strchr(cmd, '/')) {
		plan->exec_paths[plan->n_exec_paths++] = cmd;
	} else {
		snprintf(r->exec_buf[0], PATH_MAX, "/usr/bin/%s", cmd);
		snprintf(r->exec_buf[1], PATH_MAX, "/bin/%s", cmd);
		plan->exec_paths[plan->n_exec_paths++] = r->exec_buf[0];
		plan->exec_paths[plan->n_exec_paths++] = r->exec_buf[1];
	}
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++) {
		if (p[i] >= 0)
			close(p[i]);
		p[i] = -1;
	}
}

static void reap(struct run *r)
{
	while (!r->reaped && r->pid > 0) {
		if (waitpid(r->pid, &r->status, 0) == r->pid)
			r->reaped = true;
		else if (errno != EINTR)
			break;
	}
}

/* Empty the sandbox: cgroup.kill for everything in it, and the main
 * process directly in case it never made it into the cgroup. */
static void kill_all(struct run *r)
{
	int err;

	if (r->pid > 0 && !r->reaped)
		kill(r->pid, SIGKILL);
	err = sb_cgroup_kill(&r->cg, KILL_WAIT_MS);
	if (err)
		sg_error("sandbox %s: cgroup not empty after %d ms: %s", r->res->sandbox_id,
			 KILL_WAIT_MS, strerror(-err));
	reap(r);
}

/* Wait for the child's execve: EOF on the report pipe means it happened,
 * a report means a setup step failed (a platform error). */
static int wait_for_exec(struct run *r, uint64_t deadline)
{
	struct sb_child_report rep;
	ssize_t n;

	for (;;) {
		struct pollfd pfd = { .fd = r->report[0], .events = POLLIN };
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		uint64_t left = now < deadline ? deadline - now : 0;
		int ready = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			return fail(r, -ETIMEDOUT, "sandbox %s did not start before its deadline",
				    r->res->sandbox_id);
		n = read(r->report[0], &rep, sizeof(rep));
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (n == 0)
		return 0;
	if (n != (ssize_t)sizeof(rep))
		return fail(r, -EIO, "sandbox %s: short report from the child", r->res->sandbox_id);
	if (rep.step == SB_STEP_ROOT && rep.op >= 0 && (size_t)rep.op < r->root.n_ops)
		return fail(r, -rep.err, "sandbox setup failed while %s (%s, at %s): %s",
			    sb_child_step_name(rep.step), r->res->sandbox_id,
			    sb_root_str(&r->root, r->root.ops[rep.op].path), strerror(rep.err));
	return fail(r, -rep.err, "sandbox setup failed while %s (%s): %s",
		    sb_child_step_name(rep.step),
		    rep.step == SB_STEP_EXEC ? r->spec->argv[0] : r->res->sandbox_id,
		    strerror(rep.err));
}

/* How main ended, as init wrote it before exiting (nothing there when
 * init was killed: by the deadline, the agent, or someone else). */
static void read_init_status(struct run *r)
{
	ssize_t n = read(r->status_pipe[0], &r->init, sizeof(r->init));

	r->init_reported = n == (ssize_t)sizeof(r->init) && r->init.main_ran;
}

static int start_and_watch(struct run *r, struct sb_pump *pump)
{
	const struct sg_limits *lim = &r->spec->policy->limits;
	struct sb_child_plan plan;
	struct sb_cpu_stats cpu;
	uint64_t start;
	int ret;

	make_plan(r, &plan);
	start = clock_ms(CLOCK_MONOTONIC);
	r->pid = sb_clone(CLONE_NEWPID);
	if (r->pid < 0)
		return fail(r, -errno, "clone: %s", strerror(errno));
	if (r->pid == 0)
		sb_init_run(&plan);
	r->res->init_pid = r->pid;
	fs_close(&r->in[0]);
	fs_close(&r->out[1]);
	fs_close(&r->err[1]);
	fs_close(&r->report[1]);
	fs_close(&r->status_pipe[1]);
	fs_close(&r->landlock_fd);
	sb_cgroup_close_join_fds(&r->cg);

	/* Setting up is the platform's time: the deadline counts from the
	 * tenant's execve, and bounds the setup too. */
	ret = wait_for_exec(r, start + r->timeout_ms);
	if (ret)
		return ret;
	start = clock_ms(CLOCK_MONOTONIC);
	pump->pid = r->pid;
	pump->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
	pump->in = (struct sb_feed){ .fd = r->in[1],
				     .data = r->spec->stdin_data,
				     .len = r->spec->stdin_len };
	pump->out = (struct sb_capture){ .fd = r->out[0], .limit = lim->output_bytes };
	pump->err = (struct sb_capture){ .fd = r->err[0], .limit = lim->output_bytes };
	r->in[1] = r->out[0] = r->err[0] = -1; /* the pump owns them now */
	pump->deadline_ms = start + r->timeout_ms;
	pump->linger_ms = LINGER_MS;
	ret = sb_pump_run(pump);
	if (ret == SB_PUMP_EXITED) {
		r->status = pump->status;
		r->reaped = true;
	}
	if (ret < 0)
		return fail(r, ret, "sandbox %s: watching the run failed: %s", r->res->sandbox_id,
			    strerror(-ret));
	r->res->wall_ms = pump->end_ms - start;
	/* Before the kill: schedstat needs the tasks alive. */
	sb_cpu_read(&r->cg, &cpu);
	r->res->cpu_known = cpu.usage_known;
	r->res->cpu_ms = cpu.usage_us / 1000;
	r->res->cpu_wait_known = cpu.wait_known;
	r->res->cpu_wait_ms = cpu.wait_us / 1000;
	/* Early exit or not, nothing outlives the main process. */
	kill_all(r);
	read_init_status(r);
	return ret;
}

/* What ended the run. Our own kills (deadline, stdout) are certain, and
 * so is a run that ended past its deadline; else main's fate, explained
 * by the OOM and pids counters when it failed; and the agent's word on top
 * of everything, since its kill is what a SIGKILL or a timeout may really
 * have been. Returns 0, or -ECHILD when nothing explains an init that died
 * without a word (a platform error). */
static int decide(struct run *r, int pump_end)
{
	struct sandbox_result *res = r->res;
	/* No report from init: it was killed, and main with it. */
	int status = r->init_reported ? r->init.wait_status : SIGKILL, rule = -1, verdict;

	if (WIFEXITED(status))
		res->exit_code = WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		res->signal = WTERMSIG(status);
	res->rule = -1;
	if (pump_end == SB_PUMP_OVERSIZE) {
		res->end = SB_OUTPUT_OVERSIZE;
	} else if (pump_end == SB_PUMP_DEADLINE || res->wall_ms > r->timeout_ms) {
		res->end = SB_TIMEOUT;
	} else if (WIFEXITED(status) && res->exit_code == 0) {
		res->end = SB_EXITED;
	} else if (sb_cgroup_oom_kills(&r->cg) > 0) {
		res->end = SB_OOM;
		res->rule = SG_RULE_MEMORY;
	} else if (sb_cgroup_pids_max_hits(&r->cg) > 0) {
		res->end = SB_FORK_LIMIT;
		res->rule = SG_RULE_FORK;
	} else {
		res->end = WIFSIGNALED(status) ? SB_SIGNALED : SB_EXITED;
	}
	if (r->spec->agent) {
		verdict = agent_kill_verdict(r->spec->agent, r->cg.id, &rule, AGENT_VERDICT_MS);
		if (verdict == 1) {
			res->end = SB_KILLED_BY_AGENT;
			res->rule = rule;
			return 0;
		}
		if (verdict < 0)
			sg_debug("sandbox %s: no kill verdict from the agent: %s", res->sandbox_id,
				 strerror(-verdict));
	}
	if (!r->init_reported && res->end != SB_TIMEOUT && res->end != SB_OUTPUT_OVERSIZE &&
	    res->end != SB_OOM && res->end != SB_FORK_LIMIT)
		return fail(r, -ECHILD,
			    "sandbox %s: its init was killed from outside (no agent kill, no limit "
			    "hit)",
			    res->sandbox_id);
	return 0;
}

static int take_outputs(struct run *r, struct sb_pump *pump)
{
	const struct sandbox_spec *s = r->spec;
	struct sandbox_result *res = r->res;

	res->out = pump->out.data ? pump->out.data : strdup("");
	res->out_len = pump->out.len;
	res->out_truncated = pump->out.truncated;
	res->err = pump->err.data ? pump->err.data : strdup("");
	res->err_len = pump->err.len;
	res->err_truncated = pump->err.truncated;
	pump->out.data = pump->err.data = NULL;
	if (!res->out || !res->err)
		return fail(r, -ENOMEM, "out of memory");
	if (!s->n_fetch)
		return 0;
	res->fetched = calloc(s->n_fetch, sizeof(*res->fetched));
	if (!res->fetched)
		return fail(r, -ENOMEM, "out of memory");
	res->n_fetched = s->n_fetch;
	for (size_t i = 0; i < s->n_fetch; i++)
		if (sb_scratch_fetch(r->scratch, s->fetch[i], r->slot.uid,
				     s->policy->limits.output_bytes, &res->fetched[i]))
			return fail(r, -ENOMEM, "out of memory fetching %s", s->fetch[i]);
	return 0;
}

static void teardown(struct run *r)
{
	int cg_err = 0;

	if (r->pid > 0)
		kill_all(r);
	if (r->registered && agent_unregister(r->spec->agent, r->cg.id))
		sg_debug("sandbox %s: agent_unregister failed", r->res->sandbox_id);
	if (r->cgroup_made)
		cg_err = sb_cgroup_destroy(&r->cg);
	else
		sb_cgroup_close_join_fds(&r->cg);
	/* Our map entries go with the cgroup (the agent would sweep them,
	 * but there may be no agent). */
	if (r->enrolled && !cg_err)
		sg_enroll_release(r->cg.id);
	if (cg_err) {
		/* A process may still run as the slot's uid: keep the slot
		 * locked for this process's life rather than share the uid,
		 * and the scratch mounted; the in-flight record stays for a
		 * reaper to finish once the cgroup can be emptied. */
		sg_error("sandbox %s: slot uid %u stays reserved and scratch %s stays "
			 "(cgroup not removed)",
			 r->res->sandbox_id, (unsigned)r->slot.uid,
			 r->scratch_made ? r->scratch : "(none)");
		r->res->record.abandon = true;
	} else {
		if (r->scratch_made)
			sb_scratch_remove(r->spec->policy->scratch_root, r->spec->tenant,
					  r->res->sandbox_id);
		sb_slot_release(&r->slot);
	}
	close_pair(r->in);
	close_pair(r->out);
	close_pair(r->err);
	close_pair(r->report);
	close_pair(r->status_pipe);
	fs_close(&r->landlock_fd);
	sb_root_plan_free(&r->root);
}

static void free_outputs(struct sandbox_result *res)
{
	free(res->out);
	free(res->err);
	for (size_t i = 0; i < res->n_fetched; i++) {
		free(res->fetched[i].path);
		free(res->fetched[i].data);
	}
	free(res->fetched);
	res->out = res->err = NULL;
	res->out_len = res->err_len = 0;
	res->fetched = NULL;
	res->n_fetched = 0;
}

int sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sb_pump pump = { .pidfd = -1, .in.fd = -1, .out.fd = -1, .err.fd = -1 };
	struct sb_sigpipe_guard guard;
	struct run *r;
	int ret;

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(res->detail, sizeof(res->detail), "out of memory");
		return -ENOMEM;
	}
	r->spec = spec;
	r->res = res;
	r->slot.lock_fd = -1;
	r->landlock_fd = -1;
	for (int i = 0; i < 2; i++)
		r->in[i] = r->out[i] = r->err[i] = r->report[i] = r->status_pipe[i] = -1;
	for (int i = 0; i < 1 + SB_CTRL__COUNT; i++)
		r->cg.join_fd[i] = -1;

	sb_sigpipe_block(&guard);
	ret = check_spec(r);
	if (!ret)
		ret = make_scratch(r);
	if (!ret)
		ret = make_cgroup(r);
	if (!ret)
		ret = make_layers(r);
	if (!ret)
		ret = make_pipes(r);
	if (!ret)
		ret = start_and_watch(r, &pump);
	if (ret > 0)
		ret = decide(r, ret);
	if (ret >= 0)
		ret = take_outputs(r, &pump);
	sb_pump_close(&pump);
	free(pump.out.data);
	free(pump.err.data);
	teardown(r);
	sb_sigpipe_restore(&guard);
	free(r);
	if (ret < 0) {
		/* A platform error carries its detail and ids, no output. */
		free_outputs(res);
		sg_debug("sandbox_run: %s", res->detail);
	}
	return ret < 0 ? ret : 0;
}

void sandbox_result_free(struct sandbox_result *res)
{
	if (!res)
		return;
	free_outputs(res);
	sb_record_release(&res->record);
	memset(res, 0, sizeof(*res));
	res->rule = -1;
}
