/* One run in a prepared sandbox, and the reset between two runs (see
 * src/sandbox/sandbox.h).
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
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "lib/cgroup_cpu.h"
#include "lib/node_idle.h"
#include "sandbox_internal.h"
#include "sandbox_io.h"
#include "sandbox_run.h"

#define LINGER_MS  100 /* pipe data after the main process exited */
#define PIPE_BYTES (256 * 1024)

static int check_run(struct run *r)
{
	const struct sandbox_spec *s = r->spec;

	if (!s->argv || !s->argv[0] || !*s->argv[0])
		return sb_run_fail(r, -EINVAL, "invalid sandbox spec: empty command");
	if ((s->stdin_len && !s->stdin_data) || (s->n_files && !s->files) ||
	    (s->n_fetch && !s->fetch))
		return sb_run_fail(r, -EINVAL, "invalid sandbox spec: missing data");
	if (!sandbox_fits(r->sb, s))
		return sb_run_fail(r, -EINVAL,
				   "sandbox %s was prepared for another tenant or policy",
				   r->sb->id);
	r->timeout_ms = s->timeout_ms ? s->timeout_ms : s->policy->limits.timeout_ms;
	r->res->timeout_ms = r->timeout_ms;
	if (!r->timeout_ms)
		return sb_run_fail(r, -EINVAL,
				   "invalid sandbox spec: no timeout (limits.timeout_ms is 0)");
	if (r->sb->broken || r->sb->used)
		return sb_run_fail(r, -EIO, "sandbox %s cannot take a run (%s)", r->sb->id,
				   r->sb->broken ? "broken" : "not reset since its last run");
	return 0;
}

/* The run's run and batch ids, for the agent's event lines: a sandbox is
 * enrolled when prepared, before anyone knows which request it serves. */
static int name_run(struct run *r)
{
	char why[256];
	int err = sb_enroll_name_run(r->sb, r->spec->run_id, r->spec->batch_id, why, sizeof(why));

	return err ? sb_run_fail(r, err, "sandbox %s: %s", r->sb->id, why) : 0;
}

/* The run's record, before it starts: an executor killed before it
 * booked the run leaves it for the next one to book. */
static int record_run(struct run *r)
{
	const struct sandbox_spec *s = r->spec;
	struct sb_run_record own, *rr = s->record;
	struct sb_record next, *rec = &next;
	struct sandbox *sb = r->sb;
	char detail[256];
	int err;

	/* Zeroed only when used: 13 KiB of stack is 4 page faults, at tens
	 * of microseconds each, on a batch's path that never touches it. */
	if (!rr) {
		own = (struct sb_run_record){ .owes_final = true };
		rr = &own;
	}
	next = rr->rec;
	/* A batch's record (exec_owed_init()) names its batch already; only
	 * a record of our own needs its identity. */
	if (rr == &own) {
		rec->kind = SB_RECORD_RUN;
		rec->executor = getpid();
		snprintf(rec->tenant, sizeof(rec->tenant), "%s", sb->tenant);
		snprintf(rec->run_id, sizeof(rec->run_id), "%s", s->run_id ? s->run_id : "");
		snprintf(rec->batch_id, sizeof(rec->batch_id), "%s",
			 s->batch_id ? s->batch_id : "");
		snprintf(rec->mode, sizeof(rec->mode), "%s", s->mode ? s->mode : "");
	}
	rec->attempt = s->attempt;
	snprintf(rec->sandbox, sizeof(rec->sandbox), "%s", sb->id);
	snprintf(rec->outcome, sizeof(rec->outcome), "%s", r->res->attempt_id);
	snprintf(rec->final_id, sizeof(rec->final_id), "%s",
		 rr->owes_final ? r->res->attempt_id : "");
	snprintf(rec->cgroup_root, sizeof(rec->cgroup_root), "%s", sb->cg.root);
	snprintf(rec->scratch_root, sizeof(rec->scratch_root), "%s", sb->policy.scratch_root);
	rec->started_ms = clock_ms(CLOCK_REALTIME);
	err = sb_run_record_write(rr, rec, detail, sizeof(detail));
	if (!err && rr == &own)
		r->res->record = own.lk;
	return err ? sb_run_fail(r, err, "%s", detail) : 0;
}

static int make_pipes(struct run *r)
{
	int *pairs[] = { r->in, r->out, r->err, r->report };

	for (int i = 0; i < 4; i++)
		if (pipe2(pairs[i], O_CLOEXEC))
			return sb_run_fail(r, -errno, "pipe: %s", strerror(errno));
	/* Our ends never block; bigger pipes mean fewer wakeups on a flood,
	 * and a stdin that fits its pipe is all there before the deadline
	 * starts (watch()). */
	fcntl(r->in[1], F_SETFL, O_NONBLOCK);
	fcntl(r->in[1], F_SETPIPE_SZ, PIPE_BYTES);
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
		return sb_run_fail(
			r, err, "the command is too long for the sandbox (%d arguments, %d bytes)",
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

int sandbox_send_fds(int sock, const void *buf, size_t len, const int *fds, int n)
{
	char cbuf[CMSG_SPACE(8 * sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	if (n < 1 || n > 8)
		return -EINVAL;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static int send_start(struct run *r)
{
	struct sandbox *sb = r->sb;
	int fds[SB_START_FDS] = { r->in[0], r->out[1], r->err[1], r->report[1],
				  sb->plan.clone3 ? sb->leaf.dir_fd : sb->leaf.procs_fd };
	struct sb_start *m = malloc(sizeof(*m));
	int err;

	if (!m)
		return sb_run_fail(r, -ENOMEM, "out of memory");
	err = encode(r, m);
	if (!err) {
		/* The first run's to its main, forked ahead (sandbox_child.c);
		 * the others' to init. */
		err = sandbox_send_fds(sb->pre >= 0 ? sb->pre : sb->ctl, m,
				       offsetof(struct sb_start, strings) + m->len, fds,
				       SB_START_FDS);
		fs_close(&sb->pre);
		if (err) {
			err = sb_run_fail(r, err, "sandbox %s: cannot start the run: %s", sb->id,
					  strerror(-err));
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

/* A warm call: its fds to the sandbox's warm interpreter, which forks the
 * call's process (sandbox_interp.h). */
static int send_call(struct run *r)
{
	int fds[4] = { r->in[0], r->out[1], r->err[1], r->report[1] };
	char detail[256];
	int err = r->sb->interp_ops->send_call(r->sb, r->spec, fds, detail, sizeof(detail));

	fs_close(&r->in[0]);
	fs_close(&r->out[1]);
	fs_close(&r->err[1]);
	fs_close(&r->report[1]);
	return err ? sb_run_fail(r, err, "%s", detail) : 0;
}

/* The warm interpreter's DONE: the call's process ended (a fresh child
 * reports like init's DONE). */
static void warm_done(struct run *r, int wait_ms)
{
	int status, got = r->done_read ? 0 : r->sb->interp_ops->read_done(r->sb, &status, wait_ms);

	if (got == 1) {
		r->done = (struct sb_child_report){ .type = SB_REPORT_DONE,
						    .main_ran = 1,
						    .wait_status = status };
		r->done_read = true;
	} else if (!r->done_read) {
		r->sb->broken = true; /* silent or gone: not reused */
	}
}

/* A message from init before main's execve: READY (it was still setting
 * up), DONE (main failed to start: its report says why), or FAILED. In a
 * warm call, the interpreter's DONE, or its end. */
static int init_says(struct run *r)
{
	struct sandbox *sb = r->sb;
	struct sb_child_report msg;
	char detail[256];
	int got, err;

	if (sb_interp_channel(sb) >= 0) {
		warm_done(r, 0);
		r->ctl_gone = !r->done_read;
		return 0;
	}
	got = sb_read_init(sb, &msg, 0);

	if (got == 1 && msg.type == SB_REPORT_READY) {
		sb_on_ready(sb, !r->spec->one_run);
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
	/* Gone without a word: whoever killed init (the agent at main's
	 * execve, a limit) killed main too, and main's report pipe says
	 * whether that was before or after the tenant's code started. */
	if (got < 0) {
		r->ctl_gone = true;
		return 0;
	}
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
		return sb_run_fail(r, err, "%s", detail);
	}
	return sb_run_fail(r, -EPROTO, "sandbox %s: init sent message %d before the run started",
			   sb->id, msg.type);
}

/* Main's execve failed with EACCES or EPERM: was it the tenant's exec
 * rule? In BPF LSM mode bprm_check_security refuses a command that no
 * exec.allow glob matches, and books the violation in the sandbox's
 * sg_state within that execve, before main can write FAILED. The state is
 * written afresh for every run (enrolled at the sandbox's start and at
 * each reset), and nothing of the tenant's ran before this execve, so an
 * exec violation there is this one: the tenant's command against its own
 * policy, booked as fallback mode books the same command (killed at its
 * exec), never as the platform's setup failure (retried, never blamed). */
static bool exec_refused_by_policy(struct run *r, const struct sb_child_report *rep)
{
	if (!r->tenant_command || rep->step != SB_STEP_EXEC ||
	    (rep->err != EACCES && rep->err != EPERM) || !sb_exec_refusal_recorded(r->sb))
		return false;
	r->exec_refused = true;
	r->sb->broken = !r->sb->keep_scratch; /* see sandbox_outcome.c */
	return true;
}

/* What main said on the report pipe, read once every writer is gone:
 * EXEC then EOF, it exec'd; FAILED, a setup step failed (a platform
 * error); EOF alone, it ended before its execve. */
static int read_start_reports(struct run *r)
{
	struct sb_child_report rep;
	bool exec_next = false;
	ssize_t n;

	for (;;) {
		n = read(r->report[0], &rep, sizeof(rep));
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rep) || rep.type != SB_REPORT_EXEC)
			break;
		exec_next = true;
	}
	if (n == 0 && !r->sb->ready)
		return sb_run_fail(r, -EPROTO,
				   "sandbox %s: the run started before its init was ready",
				   r->sb->id);
	if (n == 0 && exec_next)
		return 0;
	if (n == (ssize_t)sizeof(rep) && rep.type == SB_REPORT_FAILED &&
	    exec_refused_by_policy(r, &rep))
		return 0;
	r->sb->broken = true;
	/* In a warm call, what writes EXEC (or FAILED) is Python code in the
	 * interpreter the tenant's preloads ran in, and can rebind: a call
	 * that ends without EXEC may be the tenant's failure dressed as the
	 * platform's. Its retries, and its next calls for a while, run cold,
	 * where EXEC comes from sandguard's own C (24-warm-attacks
	 * `warm-preload-cannot-withhold-exec`). */
	if (sb_interp_channel(r->sb) >= 0)
		r->sb->interp_ops->refuse(r->sb,
					  "its warm call ended before the tenant's code started");
	/* Killed from outside before any of the tenant's code ran: a
	 * node-wide OOM kill, a stray signal, init's end. */
	if (n == 0)
		return sb_run_fail(r, -ECHILD,
				   "sandbox %s: the run's process ended before it started the "
				   "tenant's code (killed from outside the sandbox)",
				   r->sb->id);
	if (n != (ssize_t)sizeof(rep) || rep.type != SB_REPORT_FAILED)
		return sb_run_fail(r, -EIO, "sandbox %s: short report from the run", r->sb->id);
	return sb_run_fail(r, -rep.err, "sandbox setup failed while %s (%s): %s",
			   sb_child_step_name(rep.step),
			   rep.step == SB_STEP_EXEC ? r->spec->argv[0] : r->sb->id,
			   strerror(rep.err));
}

/* Wait for main's execve: the report pipe's hang-up (main's last copy
 * closed at its execve or its end) says how it went. Only the hang-up
 * is polled: main's EXEC just before its execve wakes nobody. */
static int wait_for_exec(struct run *r, uint64_t deadline)
{
	for (;;) {
		int chan = sb_interp_channel(r->sb);
		struct pollfd pfd[2] = { { .fd = r->report[0], .events = 0 },
					 { .fd = chan >= 0 ? chan : r->sb->ctl,
					   .events = POLLIN } };
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		uint64_t left = now < deadline ? deadline - now : 0;
		int ready = poll(pfd, r->done_read || r->ctl_gone ? 1 : 2,
				 left > INT_MAX ? INT_MAX : (int)left),
		    err;

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			return sb_run_fail(r, -ETIMEDOUT,
					   "sandbox %s did not start before its deadline",
					   r->sb->id);
		/* init's messages first: its READY is queued before main
		 * can exist, let alone exec. */
		if (!r->done_read && !r->ctl_gone && pfd[1].revents) {
			err = init_says(r);
			if (err)
				return err;
			continue;
		}
		if (pfd[0].revents)
			return read_start_reports(r);
	}
}

/* Main ended, or is being killed: init's DONE, waiting at most wait_ms.
 * Without it by then, the sandbox is not reused; or, when the result does
 * not need it (owe, init's sandboxes), sandbox_reset() waits for it before
 * another run. */
static void read_done(struct run *r, int wait_ms, bool owe)
{
	int got;

	if (sb_interp_channel(r->sb) >= 0)
		return warm_done(r, wait_ms);
	if (r->done_read)
		return;
	got = sb_await_done(r->sb, owe ? 0 : wait_ms, &r->done);
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
	return sb_run_fail(r, -ETIME,
			   "sandbox %s could not start the tenant's code by the time its caller "
			   "gave it (setup took too long on this node)",
			   r->sb->id);
}

/* The run's interpreter (sandbox_interp.h): started when the run wants
 * one, or why it runs cold. A sandbox whose interpreter serves another
 * command is a pool's mistake: never run it. No hook: cold. */
static int interp_or_cold(struct run *r)
{
	struct sandbox *sb = r->sb;
	const struct sb_interp_ops *ops = sb->interp_ops;

	if (ops && ops->wanted(sb, r->spec))
		return ops->start(sb, r->spec, r->res->detail, sizeof(r->res->detail));
	if (sb_interp_channel(sb) >= 0)
		return sb_run_fail(r, -EINVAL,
				   "sandbox %s runs a warm interpreter for another command",
				   sb->id);
	if (ops)
		ops->why_cold(sb, r->spec, r->res->warm_fallback, sizeof(r->res->warm_fallback));
	return 0;
}

static int watch(struct run *r, struct sb_pump *pump, uint64_t start);

static int start_and_watch(struct run *r, struct sb_pump *pump)
{
	struct sandbox *sb = r->sb;
	uint64_t cpu_us, start = clock_ms(CLOCK_MONOTONIC);
	int ret, mem_peak = sb_cgroup_mem_peak_open(&sb->cg);

	ret = watch(r, pump, start);
	/* The run's cost, once it is over, killed or not: its cgroup's own
	 * counters stay readable until the cgroup is removed (at the next
	 * reset or the sandbox's end). */
	r->res->mem_peak_known = sb_cgroup_mem_peak_close(mem_peak, &r->res->mem_peak_bytes);
	if (r->res->cpu_known && sb->leaf.path[0] &&
	    fs_read_keyed(sb->leaf.path, "cpu.stat", "usage_usec", &cpu_us) == 1 &&
	    cpu_us > r->res->cpu_us)
		r->res->cpu_us = cpu_us;
	return ret;
}

static int watch(struct run *r, struct sb_pump *pump, uint64_t start)
{
	struct sandbox *sb = r->sb;
	struct cgroup_cpu_stats cpu;
	struct node_idle idle_at_start, idle_at_end;
	uint64_t throttled = sb_cgroup_cpu_throttled_us(&sb->cg);
	int ret;

	/* Setting up is the platform's time: the deadline counts from the
	 * tenant's execve, and bounds the setup too, as does the caller's
	 * start_by: a run that starts later cannot be answered in time. */
	if (r->spec->start_by_ms && start >= r->spec->start_by_ms)
		return late(r);
	ret = sb_interp_channel(sb) >= 0 ? send_call(r) : send_start(r);
	ret = ret ?: wait_for_exec(r, setup_deadline(r, start));
	if (ret == -ETIMEDOUT && r->spec->start_by_ms &&
	    clock_ms(CLOCK_MONOTONIC) >= r->spec->start_by_ms)
		return late(r);
	if (ret)
		return ret;
	/* Its only run (a cold sandbox): the host's scratch mount goes while
	 * the tenant's code runs. A warm interpreter's calls use the host's
	 * path. */
	if (r->spec->one_run && sb_interp_channel(sb) < 0)
		sb_scratch_detach(sb);
	/* Its stdin, as much as the pipe holds (all of a test's input, as a
	 * rule), before its deadline starts: the program does not wait on the
	 * executor's pump, which a busy node may be slow to schedule, in the
	 * time that is the tenant's. */
	pump->in = (struct sb_feed){ .fd = r->in[1],
				     .data = r->spec->stdin_data,
				     .len = r->spec->stdin_len };
	r->in[1] = -1;
	sb_feed(&pump->in);
	start = clock_ms(CLOCK_MONOTONIC);
	node_idle_read(&idle_at_start);
	/* Main can end before its execve is seen here (a program that fails at
	 * once, a slow executor): its DONE, read above, then never comes again
	 * on the socket, and the pump must not wait for it until the deadline
	 * (which would book a platform delay as the tenant's timeout). Nor
	 * when init, or the warm interpreter, is already gone. */
	pump->end_fd = r->done_read || r->ctl_gone  ? -1
		       : sb_interp_channel(sb) >= 0 ? sb_interp_channel(sb)
						    : sb->ctl;
	pump->out = (struct sb_capture){ .fd = r->out[0], .limit = sb->policy.limits.output_bytes };
	pump->err = (struct sb_capture){ .fd = r->err[0], .limit = sb->policy.limits.output_bytes };
	r->out[0] = r->err[0] = -1; /* the pump owns them now */
	pump->deadline_ms = start + r->timeout_ms;
	ret = sb_pump_run(pump);
	if (ret < 0)
		return sb_run_fail(r, ret, "sandbox %s: watching the run failed: %s", sb->id,
				   strerror(-ret));
	r->res->wall_ms = pump->end_ms - start;
	/* The node's room over the run, from outside the sandbox: what the
	 * executor weighs against the run's share before it calls a timeout
	 * final (src/exec/exec_confirm.c). Only a run that timed out needs
	 * it: no second read of /proc/stat on every run's path. */
	if (ret == SB_PUMP_DEADLINE || r->res->wall_ms > r->timeout_ms) {
		node_idle_read(&idle_at_end);
		r->res->node_idle_known =
			node_idle_between(&idle_at_start, &idle_at_end, &r->res->node_idle_ms);
		r->res->node_cpus = idle_at_end.cpus;
	}
	/* Before the kill: schedstat needs the tasks alive. */
	cgroup_cpu_read(sb->leaf.path, &cpu);
	r->res->cpu_known = cpu.usage_known;
	r->res->cpu_ms = cpu.usage_us / 1000;
	r->res->cpu_us = cpu.usage_us;
	/* The sandbox's own quota holding it back is not the node's
	 * overload, but PSI counts it as waiting: take it out. */
	throttled = sb_cgroup_cpu_throttled_us(&sb->cg) - throttled;
	r->res->cpu_throttled_ms = throttled / 1000;
	r->res->cpu_wait_known = cpu.wait_known;
	r->res->cpu_wait_ms = (cpu.wait_us > throttled ? cpu.wait_us - throttled : 0) / 1000;
	/* Early exit or not, nothing outlives the main process. */
	sb_cgroup_leaf_kill(&sb->leaf);
	if (ret == SB_PUMP_EXITED) {
		read_done(r, 0, false); /* queued: it is what ended the pump */
		ret = sb_pump_drain(pump, clock_ms(CLOCK_MONOTONIC) + LINGER_MS);
	} else {
		/* Our own kill decides the result (decide()): init's DONE only
		 * tells whether the sandbox can serve again. Init runs within
		 * the tenant's CPU limit, so at a small share its answer can
		 * take seconds: not on this caller's path. */
		read_done(r, SB_KILL_WAIT_MS, true);
	}
	return ret;
}

static int files_in(struct run *r)
{
	char detail[256];
	int err = sb_scratch_write_files(r->sb->scratch, r->spec->files, r->spec->n_files,
					 r->sb->slot.uid, r->sb->slot.gid, detail, sizeof(detail));

	return err ? sb_run_fail(r, err, "%s", detail) : 0;
}

int sandbox_exec(struct sandbox *sb, const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sb_pump pump = { .end_fd = -1, .in.fd = -1, .out.fd = -1, .err.fd = -1 };
	struct run r = { .sb = sb, .spec = spec, .res = res, .tenant_command = true };
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
	/* The ids first: the agent attributes the warm interpreter's start to
	 * the call that started it. */
	ret = ret ?: name_run(&r);
	ret = ret ?: interp_or_cold(&r);
	res->warm = !ret && sb_interp_channel(sb) >= 0;
	ret = ret ?: record_run(&r);
	ret = ret ?: files_in(&r);
	ret = ret ?: make_pipes(&r);
	ret = ret ?: start_and_watch(&r, &pump);
	if (ret > 0)
		ret = sb_run_decide(&r, ret);
	if (ret >= 0)
		ret = sb_run_take_outputs(&r, &pump);
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
		sb_run_free_outputs(res);
		sg_debug("sandbox_exec: %s", res->detail);
	}
	sb_sigpipe_restore(&guard);
	return ret < 0 ? ret : 0;
}

int sandbox_start_main(struct sandbox *sb, const struct sandbox_spec *spec, int in, int out,
		       int err, char *detail, size_t dlen)
{
	struct sandbox_result *res = calloc(1, sizeof(*res));
	struct run r = { .sb = sb, .spec = spec, .res = res, .timeout_ms = spec->timeout_ms };
	int ret;

	r.in[0] = in;
	r.out[1] = out;
	r.err[1] = err;
	r.in[1] = r.out[0] = r.err[0] = r.report[0] = r.report[1] = -1;
	if (!res) {
		fs_close(&r.in[0]);
		fs_close(&r.out[1]);
		fs_close(&r.err[1]);
		snprintf(detail, dlen, "out of memory");
		return -ENOMEM;
	}
	if (pipe2(r.report, O_CLOEXEC))
		ret = sb_run_fail(&r, -errno, "pipe: %s", strerror(errno));
	else
		ret = send_start(&r);
	ret = ret ?: wait_for_exec(&r, clock_ms(CLOCK_MONOTONIC) + r.timeout_ms);
	fs_close(&r.in[0]);
	fs_close(&r.out[1]);
	fs_close(&r.err[1]);
	fs_close(&r.report[0]);
	fs_close(&r.report[1]);
	if (ret) {
		sb->broken = true;
		snprintf(detail, dlen, "%s", res->detail);
	}
	free(res);
	return ret;
}

/* One whole run in a fresh sandbox, destroyed after. */
int sandbox_run(const struct sandbox_spec *spec, struct sandbox_result *res)
{
	struct sandbox *sb;
	int ret;

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	ret = sandbox_prepare(spec, &sb, res->detail, sizeof(res->detail));
	if (ret)
		return ret;
	ret = sandbox_exec(sb, spec, res);
	sandbox_destroy(sb);
	return ret;
}
