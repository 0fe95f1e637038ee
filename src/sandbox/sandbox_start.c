/* Starting things in a prepared sandbox, from the executor's side (see
 * src/sandbox/sandbox.h): its init's READY, each run's START to init (or,
 * in a warm call, the call's fds to the interpreter), the wait for main's
 * execve, and init's DONE at the run's end.
 *
 * One file because it is one conversation: init's control socket
 * (sb->ctl) carries READY, DONE and FAILED one way and START the other,
 * and the run's report pipe says how main's execve went. The run around
 * it (its record, files, pipes, watch) is sandbox_exec.c's; init's own end
 * is sandbox_init.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "sandbox_internal.h"
#include "sandbox_run.h"

int sb_read_init(struct sandbox *sb, struct sb_child_report *msg, int timeout_ms)
{
	struct pollfd pfd = { .fd = sb->ctl, .events = POLLIN };
	ssize_t n;
	int ready;

	if (sb->ctl < 0)
		return -EPIPE;
	do
		ready = poll(&pfd, 1, timeout_ms);
	while (ready < 0 && errno == EINTR);
	if (ready <= 0)
		return ready < 0 ? -errno : 0;
	n = recv(sb->ctl, msg, sizeof(*msg), MSG_DONTWAIT);
	if (n == (ssize_t)sizeof(*msg))
		return 1;
	/* EOF: init is gone. */
	sb->broken = true;
	return n < 0 && errno != ECONNRESET ? -errno : -EPIPE;
}

int sb_await_done(struct sandbox *sb, int wait_ms, struct sb_child_report *done)
{
	uint64_t until = clock_ms(CLOCK_MONOTONIC) + (uint64_t)wait_ms;

	for (;;) {
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		int got = sb_read_init(sb, done, now < until ? (int)(until - now) : 0);

		if (got <= 0 || done->type == SB_REPORT_DONE)
			return got;
	}
}

void sb_on_ready(struct sandbox *sb, bool note_scratch)
{
	char(*rel)[PATH_MAX] = NULL;
	size_t n;

	sb->ready = true;
	/* Not noted (a sandbox's only run: spec->one_run), sb->marked stays
	 * false and sandbox_reset() refuses it: the ~10 page faults of the
	 * noting, after init's clone, are spared on the way to the execve. */
	if (!note_scratch)
		return;
	/* Counted first, then only that many: a zeroed array for every
	 * possible entry is 32 pages, each a page fault (tens of
	 * microseconds here) between READY and the run's execve. */
	n = sb_root_in_scratch(&sb->root, NULL, 0);
	if (n > SB_SCRATCH_KEEP || (n && !(rel = malloc(n * sizeof(*rel)))))
		return;
	sb_root_in_scratch(&sb->root, rel, n);
	sb->marked = !sb_scratch_mark_kept(sb->scratch, rel, n, &sb->marks);
	free(rel);
}

int sandbox_wait_ready(struct sandbox *sb, int timeout_ms, char *detail, size_t dlen)
{
	struct sb_child_report msg;
	int got;

	if (sb->ready)
		return 0;
	got = sb_read_init(sb, &msg, timeout_ms);
	if (got == 1 && msg.type == SB_REPORT_READY) {
		sb_on_ready(sb, true);
		return 0;
	}
	sb->broken = true;
	if (got == 1 && msg.type == SB_REPORT_FAILED && msg.step == SB_STEP_ROOT && msg.op >= 0 &&
	    (size_t)msg.op < sb->root.n_ops)
		return sb_fail(detail, dlen, -msg.err,
			       "sandbox setup failed while %s (%s, at %s): %s",
			       sb_child_step_name(msg.step), sb->id,
			       sb_root_str(&sb->root, sb->root.ops[msg.op].path),
			       strerror(msg.err));
	if (got == 1 && msg.type == SB_REPORT_FAILED)
		return sb_fail(detail, dlen, -msg.err, "sandbox setup failed while %s (%s): %s",
			       sb_child_step_name(msg.step), sb->id, strerror(msg.err));
	if (got == 0)
		return sb_fail(detail, dlen, -ETIMEDOUT, "sandbox %s was not set up within %d ms",
			       sb->id, timeout_ms);
	return sb_fail(detail, dlen, got < 0 ? got : -EPROTO,
		       "sandbox %s: its init ended before it was set up", sb->id);
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

int sb_run_send_start(struct run *r)
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
int sb_run_send_call(struct run *r)
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

/* Main's execve of the tenant's own command (a session step's tool call)
 * failed for what the command is: not there, not executable, not a
 * program. That is the tool call's answer, as a shell gives it (127, 126,
 * and main's message on its stderr), not the platform's setup failure: a
 * model must not be able to turn a failing step into a platform_error,
 * which is retried and blamed on nobody. */
static bool exec_failed_tenants(struct run *r, const struct sb_child_report *rep)
{
	if (!r->tenant_command || !r->spec->command_is_tenants || rep->step != SB_STEP_EXEC)
		return false;
	switch (rep->err) {
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
	case ENAMETOOLONG:
	case EACCES:
	case ENOEXEC:
	case EISDIR:
		r->exec_failed = rep->err;
		return true;
	default:
		return false; /* ENOMEM, E2BIG, ETXTBSY...: not what the command is */
	}
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
	    (exec_refused_by_policy(r, &rep) || exec_failed_tenants(r, &rep)))
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
int sb_run_wait_exec(struct run *r, uint64_t deadline)
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
void sb_run_read_done(struct run *r, int wait_ms, bool owe)
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

/* The warm interpreter's parent process, started as a run's main is (see
 * sandbox_interp.h): a START and the wait for its execve, no more. It has
 * no record, watch or outputs of its own: the calls it serves have. */
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
		ret = sb_run_send_start(&r);
	ret = ret ?: sb_run_wait_exec(&r, clock_ms(CLOCK_MONOTONIC) + r.timeout_ms);
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
