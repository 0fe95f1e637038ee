/* A sandbox's life around its runs: prepare, its enrollment with the
 * kernel's enforcer, and destroy (see src/sandbox/sandbox.h; init's READY
 * and a run's start are sandbox_start.c, a run sandbox_exec.c, the reset
 * between runs sandbox_reuse.c).
 *
 * Order matters: the in-flight record exists before anything it names, so
 * a killed executor leaves nothing the next one cannot find. The node
 * agent finds a sandbox by its cgroup and its scratch by convention, so the
 * scratch exists before the cgroup, the cgroup before the agent hears of
 * it, and the kernel enforces the policy on it before any of its code
 * runs. The sandbox's init is started last, inside its cgroup. Teardown
 * runs whatever happened, in reverse: everything in it killed, the agent
 * told, cgroups removed, scratch unmounted, slot released, record gone. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_forker.h"
#include "sandbox_internal.h"
#include "sandbox_landlock.h"

#define HOSTNAME         "sandbox" /* the same for every sandbox: nothing of the node */
#define SLOT_WAIT_MAX_MS 30000     /* a run waiting for a free uid slot, at most */

int sb_fail(char *detail, size_t dlen, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, dlen, fmt, ap);
	va_end(ap);
	return err;
}

/* The process's interpreter forkserver (sandbox_interp.h); NULL: none. */
static const struct sb_interp_ops *interp_hook;

void sandbox_use_interp(const struct sb_interp_ops *ops)
{
	interp_hook = ops;
}

static int check_spec(const struct sandbox_spec *s, char *detail, size_t dlen)
{
	struct sigaction chld;

	/* The tenant name becomes a directory name in two trees. */
	if (!s->policy || !s->tenant || !tenant_name_valid(s->tenant))
		return sb_fail(detail, dlen, -EINVAL,
			       "invalid sandbox spec: no policy or bad tenant name");
	if (!s->policy->limits.output_bytes)
		return sb_fail(detail, dlen, -EINVAL, "invalid policy: limits.output_bytes is 0");
	if (!s->policy->scratch_root[0] || s->policy->scratch_root[0] != '/')
		return sb_fail(detail, dlen, -EINVAL,
			       "invalid policy: scratch_root must be an absolute path");
	if (sigaction(SIGCHLD, NULL, &chld) == 0 &&
	    (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT)))
		return sb_fail(detail, dlen, -EINVAL,
			       "SIGCHLD is ignored in this process: "
			       "the sandbox's exit status would be lost");
	/* A spec's maker names its enforcer, or none: a zero one is a spec
	 * left unfilled, never a sandbox the kernel silently does not guard. */
	if (!s->enforcer.ops && !s->enforcer.none)
		return sb_fail(detail, dlen, -EINVAL, "invalid sandbox spec: no enforcer named");
	if (s->policy->require_agent && !sb_enforcer_has_agent(&s->enforcer))
		return sb_fail(detail, dlen, -ENOTCONN,
			       "policy requires the sandguard agent, and none is connected");
	return 0;
}

/* The sandbox's record, before anything of it exists. */
static int record(struct sandbox *sb, char *detail, size_t dlen)
{
	struct sb_record rec = { .kind = SB_RECORD_SANDBOX, .executor = getpid() };
	int err;

	snprintf(rec.tenant, sizeof(rec.tenant), "%s", sb->tenant);
	snprintf(rec.sandbox, sizeof(rec.sandbox), "%s", sb->id);
	snprintf(rec.outcome, sizeof(rec.outcome), "%s", sb->id);
	snprintf(rec.scratch_root, sizeof(rec.scratch_root), "%s", sb->policy.scratch_root);
	rec.started_ms = clock_ms(CLOCK_REALTIME);
	err = sb_cgroup_root(rec.cgroup_root, sizeof(rec.cgroup_root));
	if (err)
		return sb_fail(detail, dlen, err, "cannot find the sandguard cgroup root: %s",
			       strerror(-err));
	return sb_record_open(&rec, &sb->record, detail, dlen);
}

/* Slot, id, record and scratch: a fresh random id until its scratch is new. */
static int make_scratch(struct sandbox *sb, uint64_t slot_wait_ms, char *detail, size_t dlen)
{
	const struct sg_policy *p = &sb->policy;
	struct sb_scratch_spec sp = { .root = p->scratch_root,
				      .tenant = sb->tenant,
				      .id = sb->id,
				      .size_mb = p->scratch_mb,
				      .inodes = p->scratch_inodes,
				      .exec = sb->exec_in_scratch };
	int err = sb_slot_acquire(&sb->slot, slot_wait_ms, detail, dlen);

	if (err)
		return err;
	sp.uid = sb->slot.uid;
	sp.gid = sb->slot.gid;
	for (int attempt = 0; attempt < 8; attempt++) {
		uint32_t rnd;

		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return sb_fail(detail, dlen, -errno, "getrandom: %s", strerror(errno));
		snprintf(sb->id, sizeof(sb->id), "%08x-%d", rnd, (int)getpid());
		err = record(sb, detail, dlen);
		if (!err)
			err = sb_scratch_create(&sp, sb->scratch, sizeof(sb->scratch), detail,
						dlen);
		if (err != -EEXIST)
			break;
		sb_record_release(&sb->record);
	}
	if (err)
		return err == -EEXIST ? sb_fail(detail, dlen, err, "no unused sandbox id") : err;
	sb->scratch_made = true;
	err = sb_scratch_mark(sb->scratch, sb->slot.uid, sb->slot.gid, &sb->marks);
	if (err)
		return sb_fail(detail, dlen, err, "cannot look at scratch %s: %s", sb->scratch,
			       strerror(-err));
	return 0;
}

static struct sb_enrollment enrollment_of(const struct sandbox *sb)
{
	return (struct sb_enrollment){ .tenant = sb->tenant,
				       .sandbox = sb->id,
				       .cgroup_id = sb->cg.id,
				       .cgroup_root = sb->cg.root,
				       .scratch = sb->scratch,
				       .policy = &sb->policy };
}

int sb_enroll(struct sandbox *sb, bool notify, char *detail, size_t dlen)
{
	struct sb_enrollment who = enrollment_of(sb);
	struct sb_enrolled res = { 0 };
	int err;

	if (!sb_enforcer_present(&sb->enforcer))
		return 0; /* own layers only (check_spec() refused a policy that requires more) */
	err = sb->enforcer.ops->enroll(sb->enforcer.ctx, &who, notify, &res);
	if (err)
		return sb_fail(detail, dlen, err, "sandbox %s not started: %s", sb->id, res.detail);
	sb->registered = sb->registered || res.notified;
	sb->enrolled = res.enforced;
	sb->agent_enforced = res.enforced;
	if (!res.enforced)
		sg_warn("sandbox %s: %s", sb->id, res.detail);
	return 0;
}

void sb_enroll_release(struct sandbox *sb)
{
	if (!sb->enrolled)
		return;
	sb->enforcer.ops->release(sb->enforcer.ctx, sb->cg.id);
	sb->enrolled = false;
}

int sb_enroll_name_run(struct sandbox *sb, const char *run_id, const char *batch_id, char *detail,
		       size_t dlen)
{
	struct sb_enrollment who = enrollment_of(sb);

	if (!sb->enrolled)
		return 0;
	who.run_id = run_id;
	who.batch_id = batch_id;
	return sb->enforcer.ops->name_run(sb->enforcer.ctx, &who, detail, dlen);
}

/* The kernel enforces the tenant's policy on the sandbox before any of
 * its code runs, or the run is refused: the enforcer (the executor's
 * src/control/enforcer.c) writes the sandbox's entries into the agent's
 * pinned maps and tells the agent after. No pins at all (no agent on this
 * node): the executor's own layers, unless the policy requires the agent. */
static int make_cgroup(struct sandbox *sb, char *detail, size_t dlen)
{
	int err = sb_cgroup_create(&sb->cg, sb->tenant, sb->id, &sb->policy, detail, dlen);

	if (err)
		return err;
	sb->cgroup_made = true;
	/* Its counters, kept open for its life (sandbox_cgroup_run.c); here,
	 * not in sb_cgroup_create(), so that the cgroup's making calls
	 * nothing of the runs' file. */
	sb_cgroup_stat_open(&sb->cg);
	err = sb_cgroup_leaf_make(&sb->cg, 1, &sb->leaf, detail, dlen);
	err = err ?: sb_enroll(sb, true, detail, dlen);
	if (err || !sb->agent_enforced)
		return err;
	/* The agent kills a fork bomb at max_tasks and books it as a fork
	 * violation; pids.max stays as the kernel's backstop, a little above,
	 * so that the agent's limit is the one that trips. */
	err = sb_cgroup_pids_backstop(&sb->cg, &sb->policy.limits);
	if (err)
		return sb_fail(detail, dlen, err, "cannot raise pids.max for sandbox %s: %s",
			       sb->id, strerror(-err));
	return 0;
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

static int make_layers(struct sandbox *sb, char *detail, size_t dlen)
{
	const struct sg_policy *p = &sb->policy;
	struct sb_seccomp_rules rules = { .allow_unix = p->allow_unix,
					  .allow_udp = egress_has_udp(p),
					  .allow_listen = p->allow_listen,
					  /* make_plan() unshares it, always */
					  .own_netns = true };
	struct landlock_delegation to_agent = { 0 };
	uint64_t proc_read = 0;
	int fd, err;

	/* The agent's cgroup hooks refuse connects in every mode; opens only
	 * in BPF LSM mode (in fallback mode it sees them after the fact). */
	if (sb->agent_enforced) {
		to_agent.tcp_connect = true;
		to_agent.reads = sb->enforcer.ops->files_preventive(sb->enforcer.ctx);
	}
	fd = landlock_ruleset_build(p, sb->scratch, sb->exec_in_scratch, &to_agent, &proc_read,
				    detail, dlen);
	if (fd == -EOPNOTSUPP)
		sg_warn("this kernel has no Landlock; sandbox %s runs without its filesystem layer",
			sb->id);
	else if (fd < 0)
		return fd;
	sb->landlock_fd = fd;
	sb->plan.proc_read = proc_read;
	err = seccomp_filter_build(&sb->seccomp, &rules);
	if (err == -EOPNOTSUPP)
		sg_warn("no seccomp filter for this architecture");
	else if (err)
		return sb_fail(detail, dlen, err, "cannot build the seccomp filter: %s",
			       strerror(-err));
	sb->plan.child.seccomp = err ? NULL : &sb->seccomp;
	err = fs_mkdir_p(SB_ROOT_BASE, 0755);
	if (err)
		return sb_fail(detail, dlen, err, "cannot create %s: %s", SB_ROOT_BASE,
			       strerror(-err));
	err = sb_root_plan(&sb->root, p, sb->scratch, SB_ROOT_BASE, sb->exec_in_scratch, detail,
			   dlen);
	if (err)
		return err;
	sb->relay = sb_net_plan(&sb->net, p);
	return 0;
}

/* Everything init needs, prepared before the clone: after it, init may
 * not allocate. */
static void make_plan(struct sandbox *sb, int ctl)
{
	struct sb_init_plan *plan = &sb->plan;
	struct sb_child_plan *c = &plan->child;

	plan->cg = &sb->cg;
	/* A relay's listeners are made outside the sandbox's cgroup: that
	 * init is born outside, and moves in. */
	plan->clone3 = sb_clone3_works();
	plan->migrate = sb->relay || !plan->clone3;
	plan->ctl = ctl;
	/* Its own everything (the PID namespace comes with init's clone):
	 * a minimal root, a host name that says nothing of the node, SysV
	 * IPC that dies with the run, and a network with nothing in it but
	 * what the relay lets through. */
	plan->unshare_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET;
	/* Listeners live on the namespace's own loopback, never the host's. */
	plan->loopback = sb->policy.allow_listen;
	plan->hostname = HOSTNAME;
	plan->root = &sb->root;
	plan->pre_chan = plan->pre_cgroup = -1;
	c->report_fd = c->cgroup_procs_fd = -1;
	c->stdio[0] = c->stdio[1] = c->stdio[2] = -1;
	c->uid = sb->slot.uid;
	c->gid = sb->slot.gid;
	c->scratch = sb->scratch;
	c->landlock_fd = sb->landlock_fd;
	c->net = sb->relay ? &sb->net : NULL;
	snprintf(sb->home, sizeof(sb->home), "HOME=%s", sb->scratch);
	sb->envp[0] = "PATH=/usr/bin:/bin";
	sb->envp[1] = "LANG=C.UTF-8";
	sb->envp[2] = sb->home;
	sb->envp[3] = NULL;
	c->envp = sb->envp;
}

/* The first run's main forked ahead of its START (sandbox_child.c):
 * where init is born in the sandbox's cgroup and the run's main can be
 * born in the run's (clone3), and no relay is started with main. */
static int plan_prerun(struct sandbox *sb, char *detail, size_t dlen)
{
	int pair[2];

	if (!sb->plan.clone3 || sb->plan.migrate || sb->relay || sb->leaf.dir_fd < 0)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		return sb_fail(detail, dlen, -errno, "socketpair: %s", strerror(errno));
	sb->pre = pair[0];
	sb->plan.pre_chan = pair[1];
	sb->plan.pre_cgroup = sb->leaf.dir_fd;
	return 0;
}

static int start_init(struct sandbox *sb, char *detail, size_t dlen)
{
	int pair[2], err;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		return sb_fail(detail, dlen, -errno, "socketpair: %s", strerror(errno));
	make_plan(sb, pair[1]);
	err = plan_prerun(sb, detail, dlen);
	if (err) {
		close(pair[0]);
		close(pair[1]);
		return err;
	}
	/* Cloned by the init forker where it runs (sandbox_forker.h). */
	if (!sb_forker_clone_init(&sb->plan, sb->cg.dir_fd, &sb->init)) {
		sb->init = sb->plan.migrate ? sb_clone(CLONE_NEWPID)
					    : sb_clone_into(CLONE_NEWPID, sb->cg.dir_fd);
		if (sb->init == 0)
			sb_init_run(&sb->plan);
	}
	err = sb->init < 0 ? errno : 0;
	close(pair[1]);
	fs_close(&sb->plan.pre_chan);
	sb->ctl = pair[0];
	if (sb->init < 0) {
		pid_t late;

		sb->init = 0;
		/* The forker failed after it had the request: this sandbox
		 * (whose init it may have made, on this control socket, then
		 * the cgroup's one process: killed and reaped with the
		 * sandbox) is torn down and made again, by the executor's
		 * own clone (sandbox_prepare()). */
		if (err == EAGAIN) {
			if (sb_cgroup_own_procs(&sb->cg, &late) == 1)
				sb->init = late;
			return sb_fail(detail, dlen, -EAGAIN,
				       "the init forker failed; the sandbox is made again");
		}
		return sb_fail(detail, dlen, -err, "clone: %s", strerror(err));
	}
	/* The join files, and the ruleset, are init's business now. */
	sb_cgroup_close_join_fds(&sb->cg);
	fs_close(&sb->landlock_fd);
	return 0;
}

/* The slot's NSS check (a cold process's first lookup loads the NSS
 * modules: ~2 ms) runs while init sets up, which needs no identity; the
 * first run's main waits for its word, and no START goes before it. */
static int clear_slot(struct sandbox *sb, char *detail, size_t dlen)
{
	static const uint32_t cleared = SB_SLOT_CLEARED_MAGIC;
	int err = sb_slot_check(&sb->slot, detail, dlen);

	if (err || sb->pre < 0)
		return err;
	if (send(sb->pre, &cleared, sizeof(cleared), MSG_NOSIGNAL) != (ssize_t)sizeof(cleared))
		return sb_fail(detail, dlen, -errno, "sandbox %s: cannot clear its slot: %s",
			       sb->id, strerror(errno));
	return 0;
}

/* One sandbox. A slot that names an account (-EUSERS) is handed back in
 * *refused, still locked, for the next attempt to pass over. */
/* How long a run may wait for a uid slot while the node has none free:
 * until it must start (its caller's bound), else its policy's
 * queue_timeout_ms, at most SLOT_WAIT_MAX_MS. */
static uint64_t slot_wait(const struct sandbox_spec *spec)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC), wait = spec->policy->limits.queue_timeout_ms;

	if (spec->start_by_ms)
		return spec->start_by_ms > now ? spec->start_by_ms - now : 0;
	return wait < SLOT_WAIT_MAX_MS ? wait : SLOT_WAIT_MAX_MS;
}

static int prepare_once(const struct sandbox_spec *spec, struct sandbox **out, int *refused,
			char *detail, size_t dlen)
{
	struct sandbox *sb;
	int err;

	*out = NULL;
	err = check_spec(spec, detail, dlen);
	if (err)
		return err;
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return sb_fail(detail, dlen, -ENOMEM, "out of memory");
	memcpy(&sb->policy, spec->policy, sizeof(sb->policy));
	snprintf(sb->tenant, sizeof(sb->tenant), "%s", spec->tenant);
	sb->exec_in_scratch = spec->allow_exec_in_scratch;
	sb->enforcer = spec->enforcer;
	sb->slot.lock_fd = sb->landlock_fd = sb->ctl = sb->pre = sb->scratch_fd = -1;
	sb->owner = pthread_self();
	sb->interp_ops = interp_hook;
	sb_cgroup_leaf_init(&sb->leaf);
	sb_cgroup_no_fds(&sb->cg);
	err = make_scratch(sb, slot_wait(spec), detail, dlen);
	err = err ?: make_cgroup(sb, detail, dlen);
	err = err ?: make_layers(sb, detail, dlen);
	err = err ?: start_init(sb, detail, dlen);
	err = err ?: clear_slot(sb, detail, dlen);
	if (err) {
		sg_debug("sandbox_prepare: %s", detail);
		if (err == -EUSERS) {
			*refused = sb->slot.lock_fd;
			sb->slot.lock_fd = -1;
		}
		sandbox_destroy(sb);
		return err;
	}
	*out = sb;
	return 0;
}

/* A few slots that name accounts are passed over (each costs a sandbox
 * made and torn down); a range full of them is a misconfiguration. */
#define SB_ACCOUNT_SLOTS 8

int sandbox_prepare(const struct sandbox_spec *spec, struct sandbox **out, char *detail,
		    size_t dlen)
{
	int refused[SB_ACCOUNT_SLOTS], n = 0, again = 0, err;

	/* -EAGAIN: once more (a stuck forker, given up on; or a clone that
	 * met the node's task limit for a moment). */
	do
		err = prepare_once(spec, out, &refused[n], detail, dlen);
	while ((err == -EUSERS && ++n < SB_ACCOUNT_SLOTS) || (err == -EAGAIN && !again++));
	for (int i = 0; i < n; i++)
		close(refused[i]);
	return err;
}

void sandbox_stop(struct sandbox *sb)
{
	/* Not reaped yet, so the pid is still init's. */
	if (sb && sb->init > 0 && !sb->init_reaped)
		kill(sb->init, SIGKILL);
}

/* init, and with it the PID namespace, gone; reaped. The kill comes
 * before the control socket's close: an init that saw the hang-up first
 * would exit by itself, and its end would read differently from one
 * teardown to the next. */
static void end_init(struct sandbox *sb)
{
	sandbox_stop(sb);
	fs_close(&sb->pre);
	fs_close(&sb->ctl);
	if (sb->cgroup_made && sb_cgroup_kill(&sb->cg, SB_KILL_WAIT_MS))
		sg_error("sandbox %s: cgroup not empty after %d ms", sb->id, SB_KILL_WAIT_MS);
	while (sb->init > 0 && !sb->init_reaped) {
		if (waitpid(sb->init, NULL, 0) == sb->init || errno != EINTR)
			sb->init_reaped = true;
	}
}

void sandbox_destroy(struct sandbox *sb)
{
	int cg_err = 0;

	if (!sb)
		return;
	if (sb->interp)
		sb->interp_ops->end(sb->interp);
	end_init(sb);
	if (sb->registered && sb->enforcer.ops->unregister(sb->enforcer.ctx, sb->cg.id))
		sg_debug("sandbox %s: the agent was not told it is gone", sb->id);
	sb_cgroup_leaf_close(&sb->leaf);
	sb_cgroup_stat_close(&sb->cg);
	if (sb->cgroup_made)
		cg_err = sb_cgroup_destroy(&sb->cg);
	else
		sb_cgroup_close_join_fds(&sb->cg);
	/* Our map entries go with the cgroup (the agent would sweep them,
	 * but there may be no agent). */
	if (!cg_err)
		sb_enroll_release(sb);
	if (cg_err) {
		/* A process may still run as the slot's uid: keep the slot
		 * locked for this process's life rather than share the uid,
		 * and the scratch mounted; the record stays for a reaper to
		 * finish once the cgroup can be emptied. */
		sg_error("sandbox %s: slot uid %u stays reserved and scratch %s stays "
			 "(cgroup not removed)",
			 sb->id, (unsigned)sb->slot.uid, sb->scratch_made ? sb->scratch : "(none)");
		sb->record.abandon = true;
	} else {
		if (sb->scratch_made)
			sb_scratch_remove(sb->policy.scratch_root, sb->tenant, sb->id);
		sb_slot_release(&sb->slot);
	}
	fs_close(&sb->scratch_fd);
	sb_record_release(&sb->record);
	fs_close(&sb->landlock_fd);
	sb_root_plan_free(&sb->root);
	free(sb);
}

void sb_scratch_detach(struct sandbox *sb)
{
	int fd;

	if (!sb->scratch_made || sb->scratch_fd >= 0)
		return;
	fd = open(sb->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return; /* removed at the teardown, as any other */
	/* Mounted or not, the fd is the scratch's root: the fetch goes through
	 * it. Where the removal failed, the teardown tries again. */
	sb->scratch_fd = fd;
	if (!sb_scratch_remove(sb->policy.scratch_root, sb->tenant, sb->id))
		sb->scratch_made = false;
}
