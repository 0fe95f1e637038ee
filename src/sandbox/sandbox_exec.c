/* One run in a prepared sandbox (see src/sandbox/sandbox.h; the reset
 * between two runs is sandbox_reset.c).
 *
 * A run: its record, the request's files in the scratch, pipes, one START
 * to the sandbox's init with the run's fds; init starts main (and the
 * relay) inside the run's cgroup. The deadline counts from main's execve
 * (the report pipe's EOF). When main ends (init's DONE) or the deadline
 * or stdout's cap is hit, the run's cgroup is killed at once: nothing
 * outlives the main process. Then what ended the run, and the outputs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "control/agent_client.h"
#include "control/enroll.h"
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_cpu.h"
#include "sandbox_internal.h"
#include "sandbox_io.h"

#define LINGER_MS        100 /* pipe data after the main process exited */
#define AGENT_VERDICT_MS 200 /* bounds the round trip, and a kill notice in flight */
#define PIPE_BYTES       (256 * 1024)

/* Everything one run holds. */
struct run {
	struct sandbox *sb;
	const struct sandbox_spec *spec;
	struct sandbox_result *res;
	uint64_t timeout_ms;
	int in[2], out[2], err[2], report[2];
	struct sb_child_report done; /* init's DONE */
	bool done_read;
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

static int check_run(struct run *r)
{
	const struct sandbox_spec *s = r->spec;

	if (!s->argv || !s->argv[0] || !*s->argv[0])
		return fail(r, -EINVAL, "invalid sandbox spec: empty command");
	if ((s->stdin_len && !s->stdin_data) || (s->n_files && !s->files) ||
	    (s->n_fetch && !s->fetch))
		return fail(r, -EINVAL, "invalid sandbox spec: missing data");
	if (!sandbox_fits(r->sb, s))
		return fail(r, -EINVAL, "sandbox %s was prepared for another tenant or policy",
			    r->sb->id);
	r->timeout_ms = s->timeout_ms ? s->timeout_ms : s->policy->limits.timeout_ms;
	r->res->timeout_ms = r->timeout_ms;
	if (!r->timeout_ms)
		return fail(r, -EINVAL,
			    "invalid sandbox spec: no timeout (limits.timeout_ms is 0)");
	if (r->sb->broken || r->sb->used)
		return fail(r, -EIO, "sandbox %s cannot take a run (%s)", r->sb->id,
			    r->sb->broken ? "broken" : "not reset since its last run");
	return 0;
}

/* The run's run and batch ids, for the agent's event lines: a sandbox is
 * enrolled when prepared, before anyone knows which request it serves. */
static int name_run(struct run *r)
{
	const struct sandbox_spec *s = r->spec;
	struct sg_enroll_request req = { .tenant = r->sb->tenant,
					 .sandbox = r->sb->id,
					 .cgroup_id = r->sb->cg.id,
					 .run_id = s->run_id,
					 .batch_id = s->batch_id };
	char why[256];
	int err;

	if (!r->sb->enrolled)
		return 0;
	err = sg_enroll_ids(&req, why, sizeof(why));
	return err ? fail(r, err, "sandbox %s: %s", r->sb->id, why) : 0;
}

/* The run's record, before it starts: an executor killed before it
 * booked the run leaves it for the next one to book. */
static int record_run(struct run *r)
{
	const struct sandbox_spec *s = r->spec;
	struct sandbox *sb = r->sb;
	struct sb_record rec = { .kind = SB_RECORD_RUN,
				 .attempt = s->attempt,
				 .executor = getpid() };
	char detail[256];
	int err;

	snprintf(rec.tenant, sizeof(rec.tenant), "%s", sb->tenant);
	snprintf(rec.run_id, sizeof(rec.run_id), "%s", s->run_id ? s->run_id : "");
	snprintf(rec.batch_id, sizeof(rec.batch_id), "%s", s->batch_id ? s->batch_id : "");
	snprintf(rec.mode, sizeof(rec.mode), "%s", s->mode ? s->mode : "");
	snprintf(rec.sandbox, sizeof(rec.sandbox), "%s", sb->id);
	snprintf(rec.outcome, sizeof(rec.outcome), "%s", r->res->attempt_id);
	snprintf(rec.cgroup_root, sizeof(rec.cgroup_root), "%s", sb->cg.root);
	snprintf(rec.scratch_root, sizeof(rec.scratch_root), "%s", sb->policy.scratch_root);
	rec.started_ms = clock_ms(CLOCK_REALTIME);
	err = sb_record_open(&rec, &r->res->record, detail, sizeof(detail));
	return err ? fail(r, err, "%s", detail) : 0;
}

static int make_pipes(struct run *r)
{
	int *pairs[] = { r->in, r->out, r->err, r->report };

	for (int i = 0; i < 4; i++)
		if (pipe2(pairs[i], O_CLOEXEC))
			return fail(r, -errno, "pipe: %s", strerror(errno));
	/* Our ends never block; bigger pipes mean fewer wakeups on a flood. */
	fcntl(r->in[1], F_SETFL, O_NONBLOCK);
	fcntl(r->out[0], F_SETFL, O_NONBLOCK);
	fcntl(r->err[0], F_SETFL, O_NONBLOCK);
	fcntl(r->out[0], F_SETPIPE_SZ, PIPE_BYTES);
	fcntl(r->err[0], F_SETPIPE_SZ, PIPE_BYTES);
	return 0;
}

static void add_rlimit(struct sb_start *m, int resource, rlim_t value)
{
	m->rlimits[m->n_rlimits].resource = resource;
	m->rlimits[m->n_rlimits].lim.rlim_cur = value;
	m->rlimits[m->n_rlimits].lim.rlim_max = value;
	m->n_rlimits++;
}

static int add_string(struct sb_start *m, const char *a, const char *b)
{
	size_t la = strlen(a), lb = b ? strlen(b) : 0;

	if (m->len + la + lb + 1 > sizeof(m->strings))
		return -E2BIG;
	memcpy(m->strings + m->len, a, la);
	memcpy(m->strings + m->len + la, b ? b : "", lb);
	m->strings[m->len + la + lb] = '\0';
	m->len += (uint32_t)(la + lb + 1);
	return 0;
}

/* The run's part of main's plan: argv, where argv[0] is found, rlimits. */
static int encode(struct run *r, struct sb_start *m)
{
	const struct sg_limits *lim = &r->sb->policy.limits;
	const struct sb_cgroup *cg = &r->sb->cg;
	const char *cmd = r->spec->argv[0];
	int err = 0;

	memset(m, 0, offsetof(struct sb_start, strings));
	m->magic = SB_START_MAGIC;
	for (char *const *a = r->spec->argv; *a && !err; a++, m->argc++)
		err = m->argc < SB_START_ARGS ? add_string(m, *a, NULL) : -E2BIG;
	if (strchr(cmd, '/')) {
		err = err ?: add_string(m, cmd, NULL);
		m->n_exec_paths = 1;
	} else {
		err = err ?: add_string(m, "/usr/bin/", cmd);
		err = err ?: add_string(m, "/bin/", cmd);
		m->n_exec_paths = 2;
	}
	if (err)
		return fail(r, err,
			    "the command is too long for the sandbox (%d arguments, %d bytes)",
			    SB_START_ARGS, SB_START_STRINGS);
	/* No core dumps: they would land in the scratch. */
	add_rlimit(m, RLIMIT_CORE, 0);
	add_rlimit(m, RLIMIT_NOFILE, lim->open_files);
	add_rlimit(m, RLIMIT_FSIZE, (rlim_t)lim->file_size_mb << 20);
	/* The last resort where no cgroup controller is usable. */
	if (cg->where[SB_CTRL_PIDS] == SB_WHERE_RLIMIT && lim->max_tasks)
		add_rlimit(m, RLIMIT_NPROC, lim->max_tasks); /* per uid = per slot */
	if (cg->where[SB_CTRL_MEMORY] == SB_WHERE_RLIMIT && lim->memory_mb)
		add_rlimit(m, RLIMIT_AS, (rlim_t)lim->memory_mb << 20);
	if (cg->where[SB_CTRL_CPU] == SB_WHERE_RLIMIT && lim->cpu > 0)
		add_rlimit(m, RLIMIT_CPU,
			   (rlim_t)ceil(lim->cpu * (double)r->timeout_ms / 1000.0) + 1);
	return 0;
}

static int send_start(struct run *r)
{
	struct sandbox *sb = r->sb;
	int fds[SB_START_FDS] = { r->in[0], r->out[1], r->err[1], r->report[1],
				  sb->plan.clone3 ? sb->leaf.dir_fd : sb->leaf.procs_fd };
	char cbuf[CMSG_SPACE(sizeof(fds))] = { 0 };
	struct sb_start *m = malloc(sizeof(*m));
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	int err;

	if (!m)
		return fail(r, -ENOMEM, "out of memory");
	err = encode(r, m);
	if (!err) {
		iov = (struct iovec){ .iov_base = m,
				      .iov_len = offsetof(struct sb_start, strings) + m->len };
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(c), fds, sizeof(fds));
		if (sendmsg(sb->ctl, &mh, MSG_NOSIGNAL) < 0) {
			err = fail(r, -errno, "sandbox %s: cannot start the run: %s", sb->id,
				   strerror(errno));
			sb->broken = true;
		}
	}
	free(m);
	/* The run's ends are init's (and its processes') now. */
	fs_close(&r->in[0]);
	fs_close(&r->out[1]);
	fs_close(&r->err[1]);
	fs_close(&r->report[1]);
	return err;
}

/* A message from init before main's execve: READY (it was still setting
 * up), DONE (main failed to start: its report says why), or FAILED. */
static int init_says(struct run *r)
{
	struct sandbox *sb = r->sb;
	struct sb_child_report msg;
	char detail[256];
	int got = sb_read_init(sb, &msg, 0), err;

	if (got == 1 && msg.type == SB_REPORT_READY) {
		sb_on_ready(sb);
		return 0;
	}
	if (got == 1 && msg.type == SB_REPORT_DONE) {
		r->done = msg;
		r->done_read = true;
		return 0;
	}
	if (got == 0)
		return 0;
	sb->broken = true;
	if (got == 1 && msg.type == SB_REPORT_FAILED && !sb->ready) {
		err = -msg.err;
		snprintf(detail, sizeof(detail), "sandbox setup failed while %s (%s): %s",
			 sb_child_step_name(msg.step), sb->id, strerror(msg.err));
		if (msg.step == SB_STEP_ROOT && msg.op >= 0 && (size_t)msg.op < sb->root.n_ops)
			snprintf(detail, sizeof(detail),
				 "sandbox setup failed while %s (%s, at %s): %s",
				 sb_child_step_name(msg.step), sb->id,
				 sb_root_str(&sb->root, sb->root.ops[msg.op].path),
				 strerror(msg.err));
		return fail(r, err, "%s", detail);
	}
	return fail(r, got < 0 ? got : -EPROTO, "sandbox %s: its init ended before the run started",
		    sb->id);
}

/* Wait for main's execve: EOF on the report pipe means it happened, a
 * report means a setup step failed (a platform error). */
static int wait_for_exec(struct run *r, uint64_t deadline)
{
	struct sb_child_report rep;
	ssize_t n;

	for (;;) {
		struct pollfd pfd[2] = { { .fd = r->report[0], .events = POLLIN },
					 { .fd = r->sb->ctl, .events = POLLIN } };
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		uint64_t left = now < deadline ? deadline - now : 0;
		int ready = poll(pfd, r->done_read ? 1 : 2, left > INT_MAX ? INT_MAX : (int)left),
		    err;

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			return fail(r, -ETIMEDOUT, "sandbox %s did not start before its deadline",
				    r->sb->id);
		/* init's messages first: its READY is queued before main
		 * can exist, let alone exec. */
		if (!r->done_read && pfd[1].revents) {
			err = init_says(r);
			if (err)
				return err;
			continue;
		}
		n = read(r->report[0], &rep, sizeof(rep));
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (n == 0 && r->sb->ready)
		return 0;
	if (n == 0)
		return fail(r, -EPROTO, "sandbox %s: the run started before its init was ready",
			    r->sb->id);
	r->sb->broken = true;
	if (n != (ssize_t)sizeof(rep))
		return fail(r, -EIO, "sandbox %s: short report from the run", r->sb->id);
	return fail(r, -rep.err, "sandbox setup failed while %s (%s): %s",
		    sb_child_step_name(rep.step),
		    rep.step == SB_STEP_EXEC ? r->spec->argv[0] : r->sb->id, strerror(rep.err));
}

/* Main ended, or is being killed: init's DONE if it is there. Without it,
 * the sandbox is not reused; or, when the result does not need it (owe),
 * sandbox_reset() waits for it before another run. */
static void read_done(struct run *r, bool owe)
{
	int got;

	if (r->done_read)
		return;
	got = sb_await_done(r->sb, 0, &r->done);
	r->done_read = got == 1;
	if (got == 0 && owe)
		r->sb->done_owed = true;
	else if (got == 0)
		r->sb->broken = true; /* no answer: not reused */
}

static uint64_t setup_deadline(const struct run *r, uint64_t start)
{
	uint64_t by = start + r->timeout_ms;

	return r->spec->start_by_ms && r->spec->start_by_ms < by ? r->spec->start_by_ms : by;
}

static int late(struct run *r)
{
	return fail(r, -ETIME,
		    "sandbox %s could not start the tenant's code by the time its caller gave it "
		    "(setup took too long on this node)",
		    r->sb->id);
}

static int start_and_watch(struct run *r, struct sb_pump *pump)
{
	struct sandbox *sb = r->sb;
	struct sb_cpu_stats cpu;
	uint64_t start = clock_ms(CLOCK_MONOTONIC), throttled = sb_cgroup_cpu_throttled_us(&sb->cg);
	int ret;

	/* Setting up is the platform's time: the deadline counts from the
	 * tenant's execve, and bounds the setup too, as does the caller's
	 * start_by: a run that starts later cannot be answered in time. */
	if (r->spec->start_by_ms && start >= r->spec->start_by_ms)
		return late(r);
	ret = send_start(r);
	ret = ret ?: wait_for_exec(r, setup_deadline(r, start));
	if (ret == -ETIMEDOUT && r->spec->start_by_ms &&
	    clock_ms(CLOCK_MONOTONIC) >= r->spec->start_by_ms)
		return late(r);
	if (ret)
		return ret;
	start = clock_ms(CLOCK_MONOTONIC);
	pump->end_fd = sb->ctl;
	pump->in = (struct sb_feed){ .fd = r->in[1],
				     .data = r->spec->stdin_data,
				     .len = r->spec->stdin_len };
	pump->out = (struct sb_capture){ .fd = r->out[0], .limit = sb->policy.limits.output_bytes };
	pump->err = (struct sb_capture){ .fd = r->err[0], .limit = sb->policy.limits.output_bytes };
	r->in[1] = r->out[0] = r->err[0] = -1; /* the pump owns them now */
	pump->deadline_ms = start + r->timeout_ms;
	ret = sb_pump_run(pump);
	if (ret < 0)
		return fail(r, ret, "sandbox %s: watching the run failed: %s", sb->id,
			    strerror(-ret));
	r->res->wall_ms = pump->end_ms - start;
	/* Before the kill: schedstat needs the tasks alive. */
	sb_cpu_read(sb->leaf.path, &cpu);
	r->res->cpu_known = cpu.usage_known;
	r->res->cpu_ms = cpu.usage_us / 1000;
	/* The sandbox's own quota holding it back is not the node's
	 * overload, but PSI counts it as waiting: take it out. */
	throttled = sb_cgroup_cpu_throttled_us(&sb->cg) - throttled;
	r->res->cpu_throttled_ms = throttled / 1000;
	r->res->cpu_wait_known = cpu.wait_known;
	r->res->cpu_wait_ms = (cpu.wait_us > throttled ? cpu.wait_us - throttled : 0) / 1000;
	/* Early exit or not, nothing outlives the main process. */
	sb_cgroup_leaf_kill(&sb->leaf);
	if (ret == SB_PUMP_EXITED) {
		read_done(r, false); /* queued: it is what ended the pump */
		ret = sb_pump_drain(pump, clock_ms(CLOCK_MONOTONIC) + LINGER_MS);
	} else {
		/* Our own kill decides the result (decide()): init's DONE only
		 * tells whether the sandbox can serve again. Init runs within
		 * the tenant's CPU limit, so at a small share its answer can
		 * take seconds: not on this caller's path. */
		read_done(r, true);
	}
	return ret;
}

static uint64_t since(uint64_t now, uint64_t base)
{
	return now > base ? now - base : 0;
}

/* What ended the run. Our own kills (deadline, stdout) are certain, and
 * so is a run that ended past its deadline; else main's fate, explained
 * by the OOM and pids counters when it failed; and the agent's word on top
 * of everything, since its kill is what a SIGKILL or a timeout may really
 * have been. Returns 0, or -ECHILD when nothing explains an init that died
 * without a word (a platform error). */
static int decide(struct run *r, int pump_end)
{
	struct sandbox *sb = r->sb;
	struct sandbox_result *res = r->res;
	bool reported = r->done_read && r->done.main_ran;
	/* No report from init: it was killed, and main with it. */
	int status = reported ? r->done.wait_status : SIGKILL, rule = -1, verdict;

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
	} else if (since(sb_cgroup_oom_kills(&sb->cg), sb->oom_base) > 0) {
		res->end = SB_OOM;
		res->rule = SG_RULE_MEMORY;
	} else if (since(sb_cgroup_pids_max_hits(&sb->cg), sb->pids_base) > 0) {
		res->end = SB_FORK_LIMIT;
		res->rule = SG_RULE_FORK;
	} else {
		res->end = WIFSIGNALED(status) ? SB_SIGNALED : SB_EXITED;
	}
	if (sb->agent) {
		verdict = agent_kill_verdict(sb->agent, sb->cg.id, &rule, AGENT_VERDICT_MS);
		if (verdict == 1) {
			res->end = SB_KILLED_BY_AGENT;
			res->rule = rule;
			sb->broken = true;
			return 0;
		}
		if (verdict < 0)
			sg_debug("sandbox %s: no kill verdict from the agent: %s", sb->id,
				 strerror(-verdict));
	}
	if (!reported && res->end != SB_TIMEOUT && res->end != SB_OUTPUT_OVERSIZE &&
	    res->end != SB_OOM && res->end != SB_FORK_LIMIT)
		return fail(r, -ECHILD,
			    "sandbox %s: its init was killed from outside (no agent kill, no limit "
			    "hit)",
			    sb->id);
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
		if (sb_scratch_fetch(r->sb->scratch, s->fetch[i], r->sb->slot.uid,
				     s->policy->limits.output_bytes, &res->fetched[i]))
			return fail(r, -ENOMEM, "out of memory fetching %s", s->fetch[i]);
	return 0;
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

static int files_in(struct run *r)
{
	char detail[256];
	int err = sb_scratch_write_files(r->sb->scratch, r->spec->files, r->spec->n_files,
					 r->sb->slot.uid, r->sb->slot.gid, detail, sizeof(detail));

	return err ? fail(r, err, "%s", detail) : 0;
}

int sandbox_exec(struct sandbox *sb, const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sb_pump pump = { .end_fd = -1, .in.fd = -1, .out.fd = -1, .err.fd = -1 };
	struct run r = { .sb = sb, .spec = spec, .res = res };
	struct sb_sigpipe_guard guard;
	int ret;

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	for (int i = 0; i < 2; i++)
		r.in[i] = r.out[i] = r.err[i] = r.report[i] = -1;
	snprintf(res->sandbox_id, sizeof(res->sandbox_id), "%s", sb->id);
	if (sb->runs)
		snprintf(res->attempt_id, sizeof(res->attempt_id), "%s.%u", sb->id, sb->runs + 1);
	else
		snprintf(res->attempt_id, sizeof(res->attempt_id), "%s", sb->id);
	res->cgroup_id = sb->cg.id;
	res->agent_enforced = sb->agent_enforced;
	res->uid = (uint32_t)sb->slot.uid;
	res->init_pid = sb->init;

	sb_sigpipe_block(&guard);
	ret = check_run(&r);
	if (!ret) {
		sb->used = true;
		sb->runs++;
	}
	ret = ret ?: name_run(&r);
	ret = ret ?: record_run(&r);
	ret = ret ?: files_in(&r);
	ret = ret ?: make_pipes(&r);
	ret = ret ?: start_and_watch(&r, &pump);
	if (ret > 0)
		ret = decide(&r, ret);
	if (ret >= 0)
		ret = take_outputs(&r, &pump);
	sb_pump_close(&pump);
	free(pump.out.data);
	free(pump.err.data);
	for (int i = 0; i < 2; i++) {
		fs_close(&r.in[i]);
		fs_close(&r.out[i]);
		fs_close(&r.err[i]);
		fs_close(&r.report[i]);
	}
	if (ret < 0) {
		/* A platform error carries its detail and ids, no output; the
		 * run's processes go. */
		sb_cgroup_leaf_kill(&sb->leaf);
		sb->broken = true;
		free_outputs(res);
		sg_debug("sandbox_exec: %s", res->detail);
	}
	sb_sigpipe_restore(&guard);
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
