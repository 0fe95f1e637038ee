/* The interpreter forkserver: the executor's side of a sandbox's
 * forkserver parent (see src/interp/interp.h), called by the sandbox's
 * runs through interp_hook (src/sandbox/sandbox_interp.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_landlock.h"
#include "interp.h"
#include "interp_call.h"
#include "interp_state.h"

#define START_MS       10000 /* interpreter start and preloads; past it, a platform error */
#define LANDLOCK_SCOPE 6     /* the ABI that scopes signals and abstract sockets */
/* A verifier's parent serves any script: its refusals have this name. */
#define VERIFY_KEY "(verifier tests)"

/* src/interp/interp_bootstrap.py, linked in by interp_bootstrap.S. */
extern const char interp_bootstrap_start[];

/* sb's parent's channel; -1: none runs (or none was ever started). */
static int channel_of(const struct sandbox *sb)
{
	const struct sb_interp *w = sandbox_interp(sb);

	return w ? w->sock : -1;
}

static int channel(const struct sb_interp *w)
{
	return w->sock;
}

/* sb's state, made at its first start: only a sandbox that ever ran an
 * interpreter pays for its ~8 KiB. NULL when out of memory. */
static struct sb_interp *state_of(struct sandbox *sb)
{
	struct sb_interp *w = sandbox_interp(sb);

	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->sock = -1;
	sb_cgroup_leaf_init(&w->home);
	sandbox_interp_set(sb, w);
	return w;
}

bool interp_verify_mode(const struct sandbox_spec *spec)
{
	return spec->mode && !strcmp(spec->mode, "verify");
}

/* What a parent is started for, and its refusals named by: the script
 * for batch calls, any script for a verifier's tests. */
static const char *warm_key(const struct sandbox_spec *spec)
{
	return interp_verify_mode(spec) ? VERIFY_KEY : spec->argv[1];
}

static bool is_interpreter(const char *cmd, uint8_t interp)
{
	const char *base = strrchr(cmd, '/');

	base = base ? base + 1 : cmd;
	return interp == SG_WARM_PYTHON3 && !strcmp(base, "python3");
}

/* A script `python3 SCRIPT` would run: a .py path, not an option. */
static bool is_script(const char *arg)
{
	size_t n = strlen(arg);

	return arg[0] && arg[0] != '-' && n > 3 && !strcmp(arg + n - 3, ".py") &&
	       n < sizeof(((struct sb_interp *)0)->script);
}

/* Whether the CALL's strings hold the command: the call's directory (the
 * longest it can be) replaces the interpreter of a cold START, whose
 * strings have the same bound; one that does not fit runs cold. */
static bool fits_a_call(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	size_t len = strlen(sandbox_scratch_path(sb)) + sizeof("/call-4294967295");

	for (char *const *a = spec->argv + 1; *a; a++)
		len += strlen(*a) + 1;
	return len <= INTERP_CALL_MAX;
}

/* All that interp_wanted() asks but the parent's state and refusals. */
static bool eligible(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	const struct sg_warm *w = &sandbox_policy(sb)->warm;
	static int abi = -1; /* the kernel's: the same for every thread that asks */
	bool verify = interp_verify_mode(spec);
	/* A sandbox's init ends with the thread that prepared it: a
	 * verifier's worker keeps the one it prepared for all its tests. */
	bool lives = sandbox_kept(sb) || (verify && sandbox_prepared_here(sb));

	if (w->interpreter == SG_WARM_OFF || spec->cold || !lives || !spec->mode ||
	    (strcmp(spec->mode, "batch") && !(verify && w->verify)) || spec->n_files ||
	    spec->n_fetch || sandbox_relays(sb) || !spec->argv[0] || !spec->argv[1] ||
	    !is_interpreter(spec->argv[0], w->interpreter) || !is_script(spec->argv[1]))
		return false;
	if (!fits_a_call(sb, spec))
		return false;
	if (abi < 0)
		abi = landlock_abi();
	return abi >= LANDLOCK_SCOPE;
}

static bool wanted(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	const struct sb_interp *w = sandbox_interp(sb);

	if (!eligible(sb, spec))
		return false;
	/* A running parent serves the command it was started as, and not
	 * once its kind is refused (a parent died during a call: the next
	 * ones run cold, where the tenant's own failure is its own). */
	if (w && w->sock >= 0)
		return w->verify == interp_verify_mode(spec) &&
		       !strcmp(w->script, warm_key(spec)) &&
		       !strcmp(w->interpreter, spec->argv[0]) &&
		       !interp_refused(sb, warm_key(spec), NULL, 0);
	/* Its first run: the parent can start, unless one could not lately. */
	return sandbox_runs(sb) == 1 && !interp_refused(sb, warm_key(spec), NULL, 0);
}

static void why_cold(const struct sandbox *sb, const struct sandbox_spec *spec, char *why,
		     size_t len)
{
	why[0] = '\0';
	if (channel_of(sb) < 0 && eligible(sb, spec))
		interp_refused(sb, warm_key(spec), why, len);
}

/* The only process in a cgroup: its pid, or 0 when there is not exactly
 * one. */
static pid_t lone_process(const char *cgroup)
{
	char path[PATH_MAX];
	int n = 0, p, first = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%d", &p) == 1)
		if (n++ == 0)
			first = p;
	fclose(f);
	return n == 1 ? first : 0;
}

static uint64_t rss_kb(pid_t pid)
{
	char path[64];
	unsigned long size, resident;
	FILE *f;
	int got;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	got = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	return got == 2 ? (uint64_t)resident * ((uint64_t)sysconf(_SC_PAGESIZE) / 1024) : 0;
}

/* The parent's argv: the interpreter, the bootstrap, the script, the
 * preloads; a verifier's: the interpreter, the bootstrap, --verify. */
static char **parent_argv(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	const struct sg_warm *w = &sandbox_policy(sb)->warm;
	char **argv = calloc((size_t)w->n_preload + 5, sizeof(*argv));
	int n = 0;

	if (!argv)
		return NULL;
	argv[n++] = spec->argv[0];
	argv[n++] = "-c";
	argv[n++] = (char *)interp_bootstrap_start;
	if (interp_verify_mode(spec)) {
		argv[n++] = "--verify";
		return argv;
	}
	argv[n++] = spec->argv[1];
	for (int i = 0; i < w->n_preload; i++)
		argv[n++] = (char *)w->preload[i];
	return argv;
}

/* The parent, through init like any run; its stdout and stderr go to
 * /dev/null (it reports on its channel). */
static int start_parent(struct sandbox *sb, const struct sandbox_spec *spec, int theirs,
			char *detail, size_t dlen)
{
	struct sandbox_spec ps = *spec;
	char **argv = parent_argv(sb, spec);
	int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int err = out >= 0 ? fcntl(out, F_DUPFD_CLOEXEC, 0) : -1, ret;

	if (!argv || out < 0 || err < 0) {
		free(argv);
		fs_close(&out);
		fs_close(&err);
		close(theirs);
		return interp_fail(detail, dlen, -ENOMEM, "warm interpreter: out of memory or fds");
	}
	ps.argv = argv;
	ps.timeout_ms = (uint64_t)sandbox_policy(sb)->warm.max_age_s * 1000;
	ret = sandbox_start_main(sb, &ps, theirs, out, err, detail, dlen);
	free(argv);
	return ret;
}

/* The tenant's exec rule refused the interpreter itself (LSM mode: its
 * execve failed; fallback: it was killed at it): the start is no platform
 * fault to retry warm. The tenant's calls of the script run cold for a
 * while, where the same refusal of the same interpreter is booked as the
 * tenant's policy violation. */
static void refuse_if_exec_rule(struct sandbox *sb, struct sb_interp *w)
{
	if (!sandbox_exec_refused(sb))
		return;
	w->refused = true;
	interp_note_refusal(sb, w->script, "the policy's exec rule refuses its interpreter");
}

/* Any error leaves sb broken (the sandbox's run marks it so). */
static int start(struct sandbox *sb, const struct sandbox_spec *spec, char *detail, size_t dlen)
{
	struct sb_interp *w = state_of(sb);
	struct interp_msg m;
	int sv[2], got, err;

	if (!w)
		return interp_fail(detail, dlen, -ENOMEM, "warm interpreter: out of memory");
	if (w->sock >= 0)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return interp_fail(detail, dlen, -errno, "warm interpreter: socketpair: %s",
				   strerror(errno));
	snprintf(w->script, sizeof(w->script), "%s", warm_key(spec));
	snprintf(w->interpreter, sizeof(w->interpreter), "%s", spec->argv[0]);
	w->verify = interp_verify_mode(spec);
	/* Not ours until its main runs: init's READY may come first. */
	err = start_parent(sb, spec, sv[1], detail, dlen);
	if (err) {
		close(sv[0]);
		refuse_if_exec_rule(sb, w);
		return err;
	}
	w->sock = sv[0];
	/* The parent keeps run-1; each call gets a cgroup of its own. */
	sandbox_leaf_take(sb, &w->home);
	got = interp_read_msg(w, &m, START_MS);
	if (got == 1 && m.type == INTERP_FAILED) {
		char why[sizeof(m.text) + 1];

		snprintf(why, sizeof(why), "%.*s", (int)sizeof(m.text), m.text);
		w->refused = true;
		interp_note_refusal(sb, w->script, why);
		return interp_fail(detail, dlen, -ENOEXEC,
				   "sandbox %s: the warm interpreter for %s could not start: %.*s",
				   sandbox_id(sb), w->script, (int)sizeof(m.text), m.text);
	}
	if (got != 1 || m.type != INTERP_READY) {
		refuse_if_exec_rule(sb, w);
		return interp_fail(
			detail, dlen, got == 0 ? -ETIMEDOUT : -EPIPE,
			"sandbox %s: the warm interpreter for %s %s", sandbox_id(sb), w->script,
			got == 0 ? "was not ready within 10 s" : "ended during its start");
	}
	w->pid = lone_process(w->home.path);
	w->base_rss_kb = w->pid ? rss_kb(w->pid) : 0;
	w->started_ms = clock_ms(CLOCK_MONOTONIC);
	err = sandbox_leaf_next(sb, detail, dlen);
	err = err ?: interp_prefork(sb, detail, dlen);
	if (err == -E2BIG) {
		/* Its preloads keep shared memory its calls cannot each get a
		 * private copy of: the tenant's calls of it run cold. */
		w->refused = true;
		interp_note_refusal(
			sb, w->script,
			"a preload keeps writable shared memory that calls would share");
		return -ENOEXEC;
	}
	return err;
}

bool interp_expired(const struct sandbox *sb)
{
	const struct sb_interp *w = sandbox_interp(sb);

	return w && w->sock >= 0 &&
	       clock_ms(CLOCK_MONOTONIC) - w->started_ms >=
		       (uint64_t)sandbox_policy(sb)->warm.max_age_s * 1000;
}

static int check(struct sandbox *sb, char *detail, size_t dlen)
{
	const struct sg_warm *p = &sandbox_policy(sb)->warm;
	struct sb_interp *w = sandbox_interp(sb);
	uint64_t rss;
	struct pollfd pfd = { .fd = w->sock, .events = POLLIN };

	if (poll(&pfd, 1, 0) != 0)
		return interp_fail(detail, dlen, -EPIPE,
				   "its warm interpreter spoke out of turn or ended");
	if (!w->pid || lone_process(w->home.path) != w->pid)
		return interp_fail(
			detail, dlen, -EBUSY,
			"its warm interpreter is not alone in its cgroup (an escaped child?)");
	rss = rss_kb(w->pid);
	if (rss > w->base_rss_kb + (uint64_t)p->max_growth_mb * 1024)
		return interp_fail(
			detail, dlen, -ENOMEM,
			"its warm interpreter grew from %llu to %llu KiB (max_growth_mb %u)",
			(unsigned long long)w->base_rss_kb, (unsigned long long)rss,
			p->max_growth_mb);
	if (w->calls >= p->max_calls)
		return interp_fail(detail, dlen, -ESTALE,
				   "its warm interpreter served max_calls (%u)", p->max_calls);
	if (interp_expired(sb))
		return interp_fail(detail, dlen, -ESTALE,
				   "its warm interpreter is past max_age_s (%u)", p->max_age_s);
	return 0;
}

static void end(struct sb_interp *w)
{
	fs_close(&w->sock);
	sb_cgroup_leaf_close(&w->home);
	free(w);
}

const struct sb_interp_ops interp_hook = { .wanted = wanted,
					   .start = start,
					   .why_cold = why_cold,
					   .channel = channel,
					   .send_call = interp_call,
					   .read_done = interp_read_done,
					   .check = check,
					   .prefork = interp_prefork,
					   .refuse = interp_refuse,
					   .end = end };

/* The warm side of a sandbox, for its pool and executor. */
bool interp_for(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	/* Not kept (a verifier's sandbox its request's thread prepared): its
	 * parent ends with that thread, so no pool may keep it. */
	if (channel_of(sb) < 0 || sandbox_broken(sb) || !sandbox_kept(sb))
		return false;
	return !spec || (spec->argv && sandbox_fits(sb, spec) && wanted(sb, spec));
}

bool interp_ran(const struct sandbox *sb)
{
	const struct sb_interp *w = sandbox_interp(sb);

	return w && w->script[0] != '\0';
}

bool interp_start_refused(const struct sandbox *sb)
{
	const struct sb_interp *w = sandbox_interp(sb);

	return w && w->refused;
}

void interp_refuse(const struct sandbox *sb, const char *why)
{
	const struct sb_interp *w = sandbox_interp(sb);

	if (w && w->script[0])
		interp_note_refusal(sb, w->script, why);
}
