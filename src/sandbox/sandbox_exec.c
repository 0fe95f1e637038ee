/* One run in a prepared sandbox (see src/sandbox/sandbox.h): the run's
 * record, the request's files in the scratch, pipes, its start
 * (sandbox_start.c: one START to the sandbox's init with the run's fds;
 * init starts main, and the relay, inside the run's cgroup), and the
 * watch. The deadline counts from main's execve (the report pipe's EOF).
 * When main ends (init's DONE) or the deadline or stdout's cap is hit, the
 * run's cgroup is killed at once: nothing outlives the main process. Then
 * what ended the run, and the outputs (sandbox_outcome.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	if (r->res->cpu_known && sb->leaf.cpu_stat_fd >= 0 &&
	    fs_pread_keyed(sb->leaf.cpu_stat_fd, "usage_usec", &cpu_us) == 1 &&
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
	ret = sb_interp_channel(sb) >= 0 ? sb_run_send_call(r) : sb_run_send_start(r);
	ret = ret ?: sb_run_wait_exec(r, setup_deadline(r, start));
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
	cgroup_cpu_read(sb->leaf.path, sb->leaf.dir_fd, sb->leaf.cpu_stat_fd, &cpu);
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
		sb_run_read_done(r, 0, false); /* queued: it is what ended the pump */
		ret = sb_pump_drain(pump, clock_ms(CLOCK_MONOTONIC) + LINGER_MS);
	} else {
		/* Our own kill decides the result (decide()): init's DONE only
		 * tells whether the sandbox can serve again. Init runs within
		 * the tenant's CPU limit, so at a small share its answer can
		 * take seconds: not on this caller's path. */
		sb_run_read_done(r, SB_KILL_WAIT_MS, true);
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
