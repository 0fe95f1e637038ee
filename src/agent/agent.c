/* The agent's loop: ring-buffer events become event lines, ledger counts
 * and kill decisions; inotify and SIGHUP reload policies and track
 * sandboxes; the outcome journal is folded into the ledger as it grows; a
 * 1 s tick reports drops and saves the ledger's checkpoint. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <jansson.h>
#include "lib/clock.h"
#include "agent.h"
#include "agent_health.h"
#include "agent_metrics.h"
#include "lib/cgroup.h"
#include "control/control_server.h"
#include "control/ondemand.h"
#include "telemetry/event_json.h"
#include "telemetry/event_log.h"
#include "health/health.h"
#include "telemetry/ledger.h"
#include "lib/log.h"
#include "probe.h"
#include "lib/rule_names.h"

enum {
	TAG_RINGBUF = 1,
	TAG_INOTIFY,
	TAG_SIGNAL,
	TAG_TIMER,
	TAG_CONTROL,
	TAG_JOURNAL,
	TAG_DRAIN,
};

#define KILL_WAIT_MS 100
/* The on-demand programs stay attached this long after the last sandbox
 * is gone (attaching them again costs the next launch; the environment
 * variable is for tests). */
#define DETACH_AFTER_IDLE_MS 5000
/* A tenant over its share of the event file gets one events_dropped line
 * per file, and at least one a minute while its lines are dropped (the
 * environment variable is for tests). */
#define EVENTS_SUMMARY_MS 60000

/* Lines are batched (event_log.h) and written once per turn of the loop,
 * so a busy ring-buffer drain costs one write, not one per event. Each
 * line is charged to its tenant's budget, so that one tenant's flood
 * cannot rotate another's evidence out. */
static void emit(struct agent *a, const char *tenant, const char *line, size_t len)
{
	/* a failed write is counted by the event log (agent_events_lost), a
	 * line over its tenant's budget too (event_log_foreach_dropped) */
	event_log_append_tenant(a->events, tenant, line, len);
}

void agent_emit_line(struct agent *a, const char *tenant, const char *line)
{
	emit(a, tenant, line, strlen(line));
}

/* Whose a sandbox is: its own record, else (not adopted yet) the name of
 * the policy slot the kernel reported. */
static const char *tenant_of(struct agent *a, const struct sg_sandbox_entry *s, uint32_t slot)
{
	struct sg_tenant *t = registry_tenant_by_idx(&a->reg, slot);

	return s ? s->tenant : t ? t->name : NULL;
}

static const char *id_or_null(const char *id)
{
	return id[0] ? id : NULL;
}

static void event_context(struct agent *a, struct sg_sandbox_entry *s, uint32_t slot,
			  struct event_ctx *ctx)
{
	if (s)
		registry_event_ids(&a->reg, s);
	ctx->node = a->opts.node;
	ctx->tenant = tenant_of(a, s, slot);
	ctx->sandbox = s ? s->name : NULL;
	ctx->batch_id = s ? id_or_null(s->batch_id) : NULL;
	ctx->run_id = s ? id_or_null(s->run_id) : NULL;
	ctx->boot_to_real_ns = a->boot_to_real_ns;
}

/* cgroup.kill where the kernel has it (5.14+); else freeze the cgroup and
 * SIGKILL each task. */
static int empty_sandbox(struct agent *a, const char *path, int timeout_ms)
{
	if (a->features->f[SG_FEAT_CGROUP_KILL].ok)
		return cgroup_kill(path, timeout_ms);
	return cgroup_kill_by_freezing(path, timeout_ms);
}

int agent_kill_sandbox(struct agent *a, struct sg_sandbox_entry *s, int rule, uint32_t trigger_type,
		       uint32_t trigger_pid, uint64_t violation_ns)
{
	struct event_kill k = { .rule = rule, .trigger = trigger_type, .trigger_pid = trigger_pid };
	uint32_t killed_rule = rule + 1;
	char path[PATH_MAX], line[EVENT_JSON_MAX];
	struct event_ctx ctx;
	double latency_s;
	int err, n;

	if (s->kill_handled)
		return 0;
	registry_cgroup_path(&a->reg, s, path, sizeof(path));
	/* Found tripped after its last task ended (the agent was down, or
	 * the verdict came first): nobody killed it, and nobody will say so.
	 * A kill in answer to the violation's own event is the kill the
	 * policy asked for, even when the last task wins the race. */
	if (!trigger_type && cgroup_is_empty(path)) {
		s->kill_handled = true;
		s->kill_rule = rule;
		sg_info("sandbox %s/%s: tripped on %s, but its last task had ended: not killed",
			s->tenant, s->name, rule_name(rule));
		return 0;
	}
	k.method = a->features->f[SG_FEAT_CGROUP_KILL].ok     ? "cgroup.kill"
		   : a->features->f[SG_FEAT_CGROUP_FREEZE].ok ? "cgroup.freeze+sigkill"
							      : "cgroup.procs";
	/* Bounded: the loop must not stall on a slow-dying sandbox (events
	 * would pile up). One not empty yet is killed again on every tick. */
	err = empty_sandbox(a, path, KILL_WAIT_MS);
	/* The record a verdict read from the pins trusts (pinned.h). */
	if (bpf_map_update_elem(a->bpf.killed_fd, &s->cgid, &killed_rule, BPF_ANY))
		sg_warn("sandbox %s/%s: cannot record its kill: %s", s->tenant, s->name,
			strerror(errno));
	s->kill_latency_ns = clock_ns(CLOCK_BOOTTIME) - violation_ns;
	latency_s = (double)s->kill_latency_ns / 1e9;
	s->killed = s->kill_handled = true;
	s->kill_rule = rule;
	if (err)
		sg_warn("sandbox %s/%s: not empty %d ms after the kill for %s (%s); killing again every second",
			s->tenant, s->name, KILL_WAIT_MS, rule_name(rule), strerror(-err));
	k.latency_ms = err ? -1 : latency_s * 1000.0;

	pthread_mutex_lock(&a->lock);
	ledger_book_kill(a->ledger, s->tenant, rule);
	a->kills++;
	if (!err) {
		a->kill_latency_count++;
		a->kill_latency_sum_s += latency_s;
		agent_metrics_observe_kill_latency(a, latency_s);
	}
	pthread_mutex_unlock(&a->lock);
	a->ledger_dirty = true;

	event_context(a, s, 0, &ctx);
	n = event_kill_json(&ctx, clock_ns(CLOCK_REALTIME), &k, line, sizeof(line));
	if (n > 0)
		emit(a, ctx.tenant, line, (size_t)n);
	else
		a->events_lost++;
	return err;
}

/* The policy action for a rule of the sandbox's tenant. */
static int tenant_action(struct agent *a, const struct sg_sandbox_entry *s, int rule)
{
	struct sg_tenant *t = registry_tenant_by_idx(&a->reg, s->slot);

	if (!t || !t->policy || rule < 0 || rule >= SG_RULE__COUNT)
		return SG_POLICY_KILL; /* fail closed, as the kernel side does */
	return t->policy->action[rule];
}

static bool is_violation(const struct sg_event *e)
{
	switch (e->type) {
	case SG_EV_EGRESS_DENIED:
	case SG_EV_FORK_LIMIT:
	case SG_EV_EXEC_DENIED:
	case SG_EV_FILE_DENIED:
	case SG_EV_FILE_TRIPPED:
		return e->action != SG_ACTION_LOGGED;
	default:
		return false;
	}
}

static int on_ring_event(void *ctx_, void *data, size_t size)
{
	struct agent *a = ctx_;
	const struct sg_event *e = data;
	struct sg_sandbox_entry *s;
	const char *tenant;
	struct event_ctx ctx;
	char line[EVENT_JSON_MAX];
	int n;

	if (size < sizeof(*e)) {
		a->events_lost++;
		return 0;
	}
	a->events_seen++;
	s = registry_find(&a->reg, e->cgroup_id);
	event_context(a, s, e->tenant, &ctx);
	n = event_to_json(e, &ctx, line, sizeof(line));
	if (n > 0) {
		emit(a, ctx.tenant, line, (size_t)n);
	} else {
		a->events_lost++;
		sg_warn("event of type %u action %u could not be encoded", e->type, e->action);
	}

	tenant = tenant_of(a, s, e->tenant);
	if (tenant) {
		pthread_mutex_lock(&a->lock);
		ledger_book_event(a->ledger, tenant, e->type, e->action);
		pthread_mutex_unlock(&a->lock);
		a->ledger_dirty = true;
	}
	/* Kill decisions: the whole sandbox goes when the tenant's policy
	 * says kill for this rule (fork limits always kill unless logged). */
	if (s && !s->kill_handled && is_violation(e) &&
	    (e->type == SG_EV_FORK_LIMIT || tenant_action(a, s, e->rule) == SG_POLICY_KILL))
		agent_kill_sandbox(a, s, e->rule, e->type, e->pid, e->ts_ns);
	return 0;
}

static void report_drops(struct agent *a)
{
	uint64_t drops = sg_bpf_drops(&a->bpf);

	if (drops > a->drops_reported) {
		sg_warn("ring buffer full: %llu events dropped in the kernel (%llu in total)",
			(unsigned long long)(drops - a->drops_reported), (unsigned long long)drops);
		a->drops_reported = drops;
	}
}

/* The kernel's record is the truth: a sandbox it marked tripped is killed
 * even when its event was lost (ring buffer full, or an agent that died
 * between the violation and the kill). Killed ones not yet empty are
 * killed again. Sandboxes whose cgroup is gone are forgotten; entries
 * executors wrote are adopted. */
static void sweep_sandboxes(struct agent *a)
{
	registry_sweep_maps(&a->reg);
	for (struct sg_sandbox_entry *s = NULL; (s = registry_next(&a->reg, s));) {
		struct sg_sandbox_state st;
		char path[PATH_MAX];
		struct stat sb;

		registry_cgroup_path(&a->reg, s, path, sizeof(path));
		if (stat(path, &sb) && errno == ENOENT) {
			registry_remove(&a->reg, s->cgid);
			continue;
		}
		if (s->kill_handled) {
			if (s->killed && !cgroup_is_empty(path))
				empty_sandbox(a, path, 0);
			continue;
		}
		if (bpf_map_lookup_elem(a->bpf.state_fd, &s->cgid, &st) == 0 &&
		    sg_state_kill_rule(&st) >= 0) {
			sg_warn("sandbox %s: tripped on %s with no kill event seen; killing it now",
				s->name, rule_name(sg_state_kill_rule(&st)));
			agent_kill_sandbox(a, s, sg_state_kill_rule(&st), 0, 0, st.first_ts_ns);
		}
	}
}

/* With no sandbox for a while, the on-demand programs (the fallback's
 * syscall tracepoints, which slow every task's system calls) are
 * detached; the next enrollment attaches them again
 * (src/control/ondemand.h). */
static void detach_when_idle(struct agent *a)
{
	uint64_t now = clock_ns(CLOCK_BOOTTIME);
	int n;

	if (a->reg.n_sandboxes) {
		a->idle_since_ns = 0;
		return;
	}
	if (!a->idle_since_ns)
		a->idle_since_ns = now;
	if (now - a->idle_since_ns < a->detach_after_idle_ns)
		return;
	n = sg_ondemand_detach_if_idle();
	if (n > 0)
		sg_info("no sandbox for %llu ms: the file programs are detached until the next one",
			(unsigned long long)(a->detach_after_idle_ns / 1000000));
	else if (n < 0)
		sg_warn("cannot detach the file programs: %s", strerror(-n));
}

/* Events submitted without a wakeup (execs, exits, logged ones) are read
 * every SG_DRAIN_MS while sandboxes exist; no timer otherwise. */
static void arm_drain(struct agent *a)
{
	bool want = a->reg.n_sandboxes > 0;
	struct itimerspec its = { 0 };

	if (want == a->draining)
		return;
	if (want) {
		its.it_interval.tv_nsec = SG_DRAIN_MS * 1000000L;
		its.it_value = its.it_interval;
	}
	if (timerfd_settime(a->drain_fd, 0, &its, NULL) == 0)
		a->draining = want;
}

static void on_drain(struct agent *a)
{
	uint64_t expirations;

	if (read(a->drain_fd, &expirations, sizeof(expirations)) < 0)
		return;
	ring_buffer__consume(a->rb);
}

static void on_tick(struct agent *a)
{
	uint64_t expirations;

	if (read(a->timer_fd, &expirations, sizeof(expirations)) < 0)
		return;
	report_drops(a);
	agent_outcomes_tick(a);
	agent_metrics_tick(a);
	sweep_sandboxes(a);
	detach_when_idle(a);
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->signal_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			sg_info("SIGHUP: reloading policies from %s", a->opts.policy_dir);
			registry_reload_policies(&a->reg, false);
		} else {
			sg_info("%s: stopping; programs stay pinned and enforcing",
				strsignal(si.ssi_signo));
			a->stop = true;
		}
	}
}

static int epoll_add(int epfd, int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static void loop_signals(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGHUP);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
}

static int setup_loop(struct agent *a)
{
	struct itimerspec its = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
	sigset_t mask;
	int err;

	loop_signals(&mask);
	a->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	a->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a->drain_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (a->signal_fd < 0 || a->timer_fd < 0 || a->drain_fd < 0 || a->epoll_fd < 0)
		return -errno;
	timerfd_settime(a->timer_fd, 0, &its, NULL);

	a->rb = ring_buffer__new(a->bpf.events_fd, on_ring_event, a, NULL);
	if (!a->rb) {
		sg_error("cannot open the event ring buffer: %s", strerror(errno));
		return -errno;
	}
	err = epoll_add(a->epoll_fd, ring_buffer__epoll_fd(a->rb), TAG_RINGBUF);
	if (!err)
		err = epoll_add(a->epoll_fd, a->reg.inotify_fd, TAG_INOTIFY);
	if (!err)
		err = epoll_add(a->epoll_fd, a->signal_fd, TAG_SIGNAL);
	if (!err)
		err = epoll_add(a->epoll_fd, a->timer_fd, TAG_TIMER);
	if (!err)
		err = epoll_add(a->epoll_fd, a->drain_fd, TAG_DRAIN);
	if (!err)
		err = epoll_add(a->epoll_fd, control_fd(a->control), TAG_CONTROL);
	if (!err && agent_outcomes_fd(a) >= 0)
		err = epoll_add(a->epoll_fd, agent_outcomes_fd(a), TAG_JOURNAL);
	return err;
}

static void loop(struct agent *a)
{
	struct epoll_event evs[16];

	while (!a->stop) {
		/* A journal still being caught up is folded a chunk per turn. */
		int n = epoll_wait(a->epoll_fd, evs, 16, agent_outcomes_pending(a) ? 0 : 1000);
		if (n < 0 && errno != EINTR) {
			sg_error("epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			switch (evs[i].data.u64) {
			case TAG_RINGBUF:
				ring_buffer__consume(a->rb);
				break;
			case TAG_INOTIFY:
				registry_handle_inotify(&a->reg);
				break;
			case TAG_SIGNAL:
				on_signal(a);
				break;
			case TAG_TIMER:
				on_tick(a);
				break;
			case TAG_CONTROL:
				control_handle(a->control);
				break;
			case TAG_JOURNAL:
				agent_outcomes_fold(a, true);
				break;
			case TAG_DRAIN:
				on_drain(a);
				break;
			}
		}
		if (n == 0 && agent_outcomes_pending(a))
			agent_outcomes_fold(a, false);
		event_log_flush(a->events);
		arm_drain(a);
	}
}

static void ensure_parent_dir(const char *path)
{
	char dir[PATH_MAX], *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir || !strcmp(path, "-"))
		return;
	*slash = 0;
	if (mkdir(dir, 0755) && errno != EEXIST)
		sg_warn("cannot create %s: %s", dir, strerror(errno));
}

/* Events lost in userspace: undecodable ring records plus lines the
 * event stream could not take. */
uint64_t agent_events_lost(struct agent *a)
{
	struct event_log_stats st = { 0 };

	if (a->events)
		event_log_get_stats(a->events, &st);
	return a->events_lost + st.failures;
}

static void write_ready_file(const char *path)
{
	FILE *f;

	if (!path[0])
		return;
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%d\n", getpid());
		fclose(f);
	}
}

static int set_event_budget(struct agent *a)
{
	struct event_log_budget b = { .share_pct = a->opts.events_tenant_share,
				      .node = a->opts.node,
				      .summary_ms = EVENTS_SUMMARY_MS };
	const char *env = getenv("SANDGUARD_EVENTS_SUMMARY_MS");
	int rc;

	if (env && *env)
		b.summary_ms = strtoull(env, NULL, 10);
	rc = event_log_set_budget(a->events, &b);
	if (rc)
		sg_error("cannot set the tenants' event budget: %s", strerror(-rc));
	else if (b.share_pct && b.share_pct < 100 && strcmp(a->opts.events_path, "-") &&
		 a->opts.events_max_bytes)
		sg_info("events: each tenant may fill %u%% of a %llu-byte event file", b.share_pct,
			(unsigned long long)a->opts.events_max_bytes);
	return rc;
}

static int start(struct agent *a)
{
	char root[PATH_MAX], err[512];
	int rc;

	if (mkdir(a->opts.state_dir, 0755) && errno != EEXIST)
		sg_warn("cannot create %s: %s", a->opts.state_dir, strerror(errno));
	rc = sandguard_root(root, sizeof(root), true);
	if (rc)
		return rc;
	a->features = probe_features(root);
	rc = choose_modes(a->features, a->opts.mode, &a->modes, err, sizeof(err));
	if (rc) {
		sg_error("refusing to start: %s", err);
		return rc;
	}
	sg_info("files: %s (%s); execs: %s (%s)", enforce_mode_name(a->modes.files),
		a->modes.files_why, enforce_mode_name(a->modes.execs), a->modes.execs_why);
	print_probe_table(stderr, a->features, &a->modes); /* once, for the log */
	/* Half an enforcement would be worse than none that says so. */
	if (enforcement_degraded(a->features, &a->modes, err, sizeof(err))) {
		sg_error("refusing to start: this kernel cannot enforce every rule: %s", err);
		return -ENOTSUP;
	}
	rc = sg_bpf_load(&a->bpf, a->features, &a->modes, root);
	if (rc)
		return rc;
	/* Probing and CO-RE parsed the kernel's BTF (megabytes) and freed it;
	 * give those pages back, the agent runs for weeks. */
	malloc_trim(0);
	rc = registry_init(&a->reg, &a->bpf, root, a->opts.policy_dir, a->opts.host_root);
	if (rc)
		return rc;
	ensure_parent_dir(a->opts.events_path);
	a->events =
		event_log_open(a->opts.events_path, a->opts.events_max_bytes, a->opts.events_keep);
	if (!a->events) {
		sg_error("cannot open the event stream %s: %s", a->opts.events_path,
			 strerror(errno));
		return -errno;
	}
	rc = set_event_budget(a);
	if (rc)
		return rc;
	event_clock_offset(&a->boot_to_real_ns);
	a->ledger = ledger_new();
	if (!a->ledger)
		return -ENOMEM;
	rc = agent_outcomes_start(a);
	if (rc)
		return rc;
	rc = agent_metrics_start(a);
	if (rc)
		return rc;
	a->control = control_open(a->opts.socket_path, agent_control_ops, agent_control_n_ops, a);
	if (!a->control)
		return -errno;
	return setup_loop(a);
}

int agent_run(struct agent_opts *opts)
{
	struct agent *a = calloc(1, sizeof(*a));
	sigset_t mask;
	int rc;

	if (!a)
		return -ENOMEM;

	/* Before any thread exists (the metrics server has one): signals are
	 * read from a signalfd, so every thread must block them, or SIGTERM
	 * would kill the agent instead of stopping it. */
	loop_signals(&mask);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	a->opts = *opts;
	a->signal_fd = a->timer_fd = a->drain_fd = a->epoll_fd = -1;
	a->detach_after_idle_ns = (uint64_t)DETACH_AFTER_IDLE_MS * 1000000;
	if (getenv("SANDGUARD_DETACH_AFTER_IDLE_MS"))
		a->detach_after_idle_ns =
			strtoull(getenv("SANDGUARD_DETACH_AFTER_IDLE_MS"), NULL, 10) * 1000000;
	a->started_realtime_s = time(NULL);
	pthread_mutex_init(&a->lock, NULL);
	rc = start(a);
	if (!rc) {
		sweep_sandboxes(a); /* trips left by a previous agent */
		write_ready_file(opts->ready_file);
		sg_info("enforcing; events to %s", opts->events_path);
		loop(a);
		/* Events still queued belong in the stream before we go. */
		ring_buffer__consume(a->rb);
		event_log_flush(a->events);
	}
	agent_outcomes_stop(a); /* fold the rest, save the checkpoint */
	if (opts->ready_file[0])
		unlink(opts->ready_file);
	control_close(a->control);
	agent_metrics_stop(a);
	ring_buffer__free(a->rb);
	event_log_close(a->events);
	registry_free(&a->reg);
	sg_bpf_close(&a->bpf);
	agent_health_free(a);
	ledger_free(a->ledger);
	if (a->epoll_fd >= 0)
		close(a->epoll_fd);
	if (a->drain_fd >= 0)
		close(a->drain_fd);
	free(a);
	return rc;
}
