/* Warm interpreters: the executor's side of a sandbox's forkserver parent
 * (see src/sandbox/sandbox_warm.h). */
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
#include "sandbox_internal.h"
#include "sandbox_landlock.h"
#include "sandbox_warm.h"

#define START_MS       10000         /* interpreter start and preloads; past it, a platform error */
#define LANDLOCK_SCOPE 6             /* the ABI that scopes signals and abstract sockets */
#define PREFAULT_MAX   (64ull << 20) /* of the parent's memory, per waiting child */
#define PREFAULT_SHARE 4             /* and at most 1/4 of the sandbox's memory limit */
/* A verifier's parent serves any script: its refusals have this name. */
#define VERIFY_KEY "(verifier tests)"

/* src/sandbox/warm_bootstrap.py, linked in by warm_bootstrap.S. */
extern const char sb_warm_bootstrap_start[];

void sb_warm_init(struct sb_warm *w)
{
	/* w is zeroed memory already (sandbox_warm.h): clearing its three
	 * paths again would fault in three pages for nothing. */
	w->sock = -1;
	w->home.dir_fd = w->home.procs_fd = -1;
	w->owner = pthread_self();
}

bool sb_warm_verify_mode(const struct sandbox_spec *spec)
{
	return spec->mode && !strcmp(spec->mode, "verify");
}

/* What a parent is started for, and its refusals named by: the script
 * for batch calls, any script for a verifier's tests. */
static const char *warm_key(const struct sandbox_spec *spec)
{
	return sb_warm_verify_mode(spec) ? VERIFY_KEY : spec->argv[1];
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
	       n < sizeof(((struct sb_warm *)0)->script);
}

/* Whether the CALL's strings hold the command: the call's directory (the
 * longest it can be) replaces the interpreter of a cold START, whose
 * strings have the same bound; one that does not fit runs cold. */
static bool fits_a_call(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	size_t len = strlen(sb->scratch) + sizeof("/call-4294967295");

	for (char *const *a = spec->argv + 1; *a; a++)
		len += strlen(*a) + 1;
	return len <= SB_WARM_CALL_MAX;
}

/* All that sb_warm_wanted() asks but the parent's state and refusals. */
static bool eligible(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	const struct sg_warm *w = &sb->policy.warm;
	static int abi = -1; /* the kernel's: the same for every thread that asks */
	bool verify = sb_warm_verify_mode(spec);
	/* A sandbox's init ends with the thread that prepared it: a
	 * verifier's worker keeps the one it prepared for all its tests. */
	bool lives = sb->warm.keep || (verify && pthread_equal(sb->warm.owner, pthread_self()));

	if (w->interpreter == SG_WARM_OFF || spec->cold || !lives || !spec->mode ||
	    (strcmp(spec->mode, "batch") && !(verify && w->verify)) || spec->n_files ||
	    spec->n_fetch || sb->relay || !spec->argv[0] || !spec->argv[1] ||
	    !is_interpreter(spec->argv[0], w->interpreter) || !is_script(spec->argv[1]))
		return false;
	if (!fits_a_call(sb, spec))
		return false;
	if (abi < 0)
		abi = landlock_abi();
	return abi >= LANDLOCK_SCOPE;
}

bool sb_warm_wanted(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	if (!eligible(sb, spec))
		return false;
	/* A running parent serves the command it was started as, and not
	 * once its kind is refused (a parent died during a call: the next
	 * ones run cold, where the tenant's own failure is its own). */
	if (sb->warm.sock >= 0)
		return sb->warm.verify == sb_warm_verify_mode(spec) &&
		       !strcmp(sb->warm.script, warm_key(spec)) &&
		       !strcmp(sb->warm.interpreter, spec->argv[0]) &&
		       !sb_warm_refused(sb, warm_key(spec), NULL, 0);
	/* Its first run: the parent can start, unless one could not lately. */
	return sb->runs == 1 && !sb_warm_refused(sb, warm_key(spec), NULL, 0);
}

void sb_warm_why_cold(const struct sandbox *sb, const struct sandbox_spec *spec, char *why,
		      size_t len)
{
	why[0] = '\0';
	if (sb->warm.sock < 0 && eligible(sb, spec))
		sb_warm_refused(sb, warm_key(spec), why, len);
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

static int read_msg(struct sandbox *sb, struct sb_warm_msg *m, int timeout_ms)
{
	struct pollfd pfd = { .fd = sb->warm.sock, .events = POLLIN };
	ssize_t n;
	int ready;

	do
		ready = poll(&pfd, 1, timeout_ms);
	while (ready < 0 && errno == EINTR);
	if (ready <= 0)
		return ready < 0 ? -errno : 0;
	n = recv(sb->warm.sock, m, sizeof(*m), MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(*m) || m->magic != SB_WARM_MSG_MAGIC) {
		sb->broken = true;
		return -EPIPE;
	}
	return 1;
}

/* The parent's argv: the interpreter, the bootstrap, the script, the
 * preloads; a verifier's: the interpreter, the bootstrap, --verify. */
static char **parent_argv(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	const struct sg_warm *w = &sb->policy.warm;
	char **argv = calloc((size_t)w->n_preload + 5, sizeof(*argv));
	int n = 0;

	if (!argv)
		return NULL;
	argv[n++] = spec->argv[0];
	argv[n++] = "-c";
	argv[n++] = (char *)sb_warm_bootstrap_start;
	if (sb_warm_verify_mode(spec)) {
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
		return sb_fail(detail, dlen, -ENOMEM, "warm interpreter: out of memory or fds");
	}
	ps.argv = argv;
	ps.timeout_ms = (uint64_t)sb->policy.warm.max_age_s * 1000;
	ret = sb_start_main(sb, &ps, theirs, out, err, detail, dlen);
	free(argv);
	return ret;
}

/* The tenant's exec rule refused the interpreter itself (LSM mode: its
 * execve failed; fallback: it was killed at it): the start is no platform
 * fault to retry warm. The tenant's calls of the script run cold for a
 * while, where the same refusal of the same interpreter is booked as the
 * tenant's policy violation. */
static void refuse_if_exec_rule(struct sandbox *sb)
{
	if (!sb_exec_refusal_recorded(sb))
		return;
	sb->warm.refused = true;
	sb_warm_refuse(sb, "the policy's exec rule refuses its interpreter");
}

int sb_warm_start(struct sandbox *sb, const struct sandbox_spec *spec, char *detail, size_t dlen)
{
	struct sb_warm *w = &sb->warm;
	struct sb_warm_msg m;
	int sv[2], got, err;

	if (w->sock >= 0)
		return 0;
	sb->broken = true; /* until the parent said READY */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return sb_fail(detail, dlen, -errno, "warm interpreter: socketpair: %s",
			       strerror(errno));
	snprintf(w->script, sizeof(w->script), "%s", warm_key(spec));
	snprintf(w->interpreter, sizeof(w->interpreter), "%s", spec->argv[0]);
	w->verify = sb_warm_verify_mode(spec);
	/* Not ours until its main runs: init's READY may come first. */
	err = start_parent(sb, spec, sv[1], detail, dlen);
	if (err) {
		close(sv[0]);
		refuse_if_exec_rule(sb);
		return err;
	}
	w->sock = sv[0];
	/* The parent keeps run-1; each call gets a cgroup of its own. */
	w->home = sb->leaf;
	sb->leaf = (struct sb_leaf){ .dir_fd = -1, .procs_fd = -1 };
	got = read_msg(sb, &m, START_MS);
	if (got == 1 && m.type == SB_WARM_FAILED) {
		char why[sizeof(m.text) + 1];

		snprintf(why, sizeof(why), "%.*s", (int)sizeof(m.text), m.text);
		w->refused = true;
		sb_warm_refuse(sb, why);
		return sb_fail(detail, dlen, -ENOEXEC,
			       "sandbox %s: the warm interpreter for %s could not start: %.*s",
			       sb->id, w->script, (int)sizeof(m.text), m.text);
	}
	if (got != 1 || m.type != SB_WARM_READY) {
		refuse_if_exec_rule(sb);
		return sb_fail(detail, dlen, got == 0 ? -ETIMEDOUT : -EPIPE,
			       "sandbox %s: the warm interpreter for %s %s", sb->id, w->script,
			       got == 0 ? "was not ready within 10 s" : "ended during its start");
	}
	w->pid = lone_process(w->home.path);
	w->base_rss_kb = w->pid ? rss_kb(w->pid) : 0;
	w->started_ms = clock_ms(CLOCK_MONOTONIC);
	err = sb_cgroup_leaf_make(&sb->cg, sb->runs + 1, &sb->leaf, detail, dlen);
	err = err ?: sb_warm_prefork(sb, detail, dlen);
	if (err == -E2BIG) {
		/* Its preloads keep shared memory its calls cannot each get a
		 * private copy of: the tenant's calls of it run cold. */
		w->refused = true;
		sb_warm_refuse(sb, "a preload keeps writable shared memory that calls would share");
		return -ENOEXEC;
	}
	if (err)
		return err;
	sb->broken = false;
	return 0;
}

/* The parent's mappings a PREP names, from its /proc/<pid>/maps (which
 * the sandbox may not read): first every writable shared one (flagged:
 * each child makes it private before any tenant code, so no call writes
 * memory the next one sees), then, when `left` > 0, its private writable
 * ones (heap, the interpreter's arenas, data) up to `left` bytes in all:
 * what a child would otherwise copy page by page, one fault each, while
 * the call waits. A private mapping larger than what is left (a preloaded
 * model's weights) is left to copy-on-write. Returns how many, or
 * -E2BIG when the shared ones do not fit (or their copies would take
 * more than `shared_max` bytes), -errno when the maps cannot be read. */
static int parent_ranges(pid_t pid, unsigned long long left, unsigned long long shared_max,
			 struct sb_warm_range *range)
{
	char path[64], line[512], perms[8];
	unsigned long long start, end;
	int n = 0, err = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = pid ? fopen(path, "re") : NULL;
	if (!f)
		return pid ? -errno : -ESRCH;
	for (int pass = 0; pass < 2 && !err; pass++) {
		rewind(f);
		while (!err && fgets(line, sizeof(line), f)) {
			bool shared;

			if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) != 3 ||
			    perms[1] != 'w')
				continue;
			shared = perms[3] == 's';
			if (pass == 0 && shared) {
				/* Only what the child can copy and map back as it was. */
				if (n == SB_WARM_PREP_MAX || end - start > shared_max ||
				    strcmp(perms, "rw-s"))
					err = -E2BIG;
				else
					range[n++] = (struct sb_warm_range){
						.start = start,
						.len = (end - start) | SB_WARM_RANGE_SHARED
					};
				shared_max -= err ? 0 : end - start;
			} else if (pass == 1 && !shared && !strcmp(perms, "rw-p") &&
				   end - start <= left && n < SB_WARM_PREP_MAX) {
				range[n++] = (struct sb_warm_range){ .start = start,
								     .len = end - start };
				left -= end - start;
			}
		}
	}
	fclose(f);
	return err ? err : n;
}

int sb_warm_prefork(struct sandbox *sb, char *detail, size_t dlen)
{
	struct sb_warm_prep *m = malloc(sizeof(*m));
	/* The copy counts against the memory limit the call shares with
	 * the parent: a bounded share of it. */
	uint64_t share = (sb->policy.limits.memory_mb << 20) / PREFAULT_SHARE;
	int procs = -1, err, n;

	if (!m)
		return sb_fail(detail, dlen, -ENOMEM, "warm interpreter: out of memory");
	m->magic = SB_WARM_PREP_MAGIC;
	/* No prefault for a verifier's parent: its children run small
	 * programs, which touch few of its pages (measured: about 690 faults
	 * in all, where copying every range took 1640), and a test waits for
	 * its child's copy when it follows the previous one at once. */
	n = parent_ranges(sb->warm.pid,
			  sb->warm.verify ? 0 : (share < PREFAULT_MAX ? share : PREFAULT_MAX),
			  share, m->range);
	if (n < 0) {
		free(m);
		sb->broken = true;
		return sb_fail(detail, dlen, n,
			       "sandbox %s: its warm interpreter's writable shared memory cannot "
			       "be made private for the next call: %s",
			       sb->id, strerror(-n));
	}
	m->n = (uint32_t)n;
	/* Opened here, as root: the child, which may not open it, joins its
	 * cgroup by writing to it (docs/sandbox.md: why not clone3). */
	err = sb_cgroup_open(sb->leaf.path, "cgroup.procs", O_WRONLY, &procs, detail, dlen);
	if (!err) {
		err = sb_send_fds(sb->warm.sock, m,
				  offsetof(struct sb_warm_prep, range) + m->n * sizeof(m->range[0]),
				  &procs, 1);
		close(procs);
		if (err) {
			sb->broken = true;
			err = sb_fail(detail, dlen, err,
				      "sandbox %s: cannot have its warm interpreter fork the "
				      "next call's child: %s",
				      sb->id, strerror(-err));
		}
	}
	free(m);
	return err;
}

/* The call's scratch, <scratch>/call-<n>, the slot's own (mode 0700). */
static int make_call_dir(struct sandbox *sb, char *dir, size_t len, char *detail, size_t dlen)
{
	char name[32];
	struct stat st;
	int root, fd = -1, err = 0;

	snprintf(name, sizeof(name), "call-%u", sb->runs);
	snprintf(dir, len, "%s/%s", sb->scratch, name);
	/* By descriptor, never by path: the parent's code can write the
	 * scratch, and could swap the new directory for a symlink to a host
	 * file between a mkdir and a chown by path (24-warm-attacks
	 * warm-call-dir-swap-chowns-nothing-of-the-host). */
	root = open(sb->scratch, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0 || mkdirat(root, name, 0700))
		err = -errno;
	if (!err && (fd = openat(root, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		err = -errno;
	if (!err && fstat(fd, &st))
		err = -errno;
	if (!err && (st.st_uid != 0 || !S_ISDIR(st.st_mode)))
		err = -EBUSY; /* not the one made: swapped */
	if (!err && fchown(fd, sb->slot.uid, sb->slot.gid))
		err = -errno;
	fs_close(&fd);
	fs_close(&root);
	if (err) {
		sb->broken = true;
		return sb_fail(detail, dlen, err, "sandbox %s: cannot make %s: %s", sb->id, dir,
			       strerror(-err));
	}
	return 0;
}

static int add(char *buf, uint32_t *len, const char *s)
{
	size_t n = strlen(s) + 1;

	if (*len + n > SB_WARM_CALL_MAX)
		return -E2BIG;
	memcpy(buf + *len, s, n);
	*len += (uint32_t)n;
	return 0;
}

static int send_call(struct sandbox *sb, const char *dir, char *const *argv, const int fds[4])
{
	struct sb_warm_call *m = malloc(sizeof(*m) + SB_WARM_CALL_MAX);
	char *strings = (char *)(m + 1);
	int err;

	if (!m)
		return -ENOMEM;
	*m = (struct sb_warm_call){ .magic = SB_WARM_CALL_MAGIC };
	err = add(strings, &m->len, dir);
	for (char *const *a = argv; *a && !err; a++, m->argc++)
		err = add(strings, &m->len, *a);
	err = err ?: sb_send_fds(sb->warm.sock, m, sizeof(*m) + m->len, fds, 4);
	free(m);
	return err;
}

int sb_warm_send_call(struct sandbox *sb, const struct sandbox_spec *spec, const int fds[4],
		      char *detail, size_t dlen)
{
	char dir[PATH_MAX];
	int err = 0;

	/* A verifier's test has the sandbox's scratch as a cold run does
	 * (it is reset between tests): the sandbox's domain is its limit. */
	if (sb->warm.verify)
		snprintf(dir, sizeof(dir), "%s", sb->scratch);
	else
		err = make_call_dir(sb, dir, sizeof(dir), detail, dlen);
	if (err)
		return err;
	err = send_call(sb, dir, spec->argv + 1, fds);
	if (err) {
		sb->broken = true;
		return sb_fail(detail, dlen, err,
			       "sandbox %s: cannot hand the call to its warm "
			       "interpreter: %s",
			       sb->id, strerror(-err));
	}
	sb->warm.calls++;
	return 0;
}

int sb_warm_read_done(struct sandbox *sb, int *status, int timeout_ms)
{
	struct sb_warm_msg m;
	int got = read_msg(sb, &m, timeout_ms);

	if (got != 1)
		return got;
	if (m.type != SB_WARM_DONE) {
		if (m.type == SB_WARM_FAILED)
			sg_warn("sandbox %s: its warm interpreter failed: %.*s", sb->id,
				(int)sizeof(m.text), m.text);
		sb->broken = true;
		return -EPIPE;
	}
	*status = m.status;
	return 1;
}

bool sandbox_warm_expired(const struct sandbox *sb)
{
	return sb->warm.sock >= 0 && clock_ms(CLOCK_MONOTONIC) - sb->warm.started_ms >=
					     (uint64_t)sb->policy.warm.max_age_s * 1000;
}

int sb_warm_check(struct sandbox *sb, char *detail, size_t dlen)
{
	const struct sg_warm *p = &sb->policy.warm;
	struct sb_warm *w = &sb->warm;
	uint64_t rss;
	struct pollfd pfd = { .fd = w->sock, .events = POLLIN };

	if (poll(&pfd, 1, 0) != 0)
		return sb_fail(detail, dlen, -EPIPE,
			       "its warm interpreter spoke out of turn or ended");
	if (!w->pid || lone_process(w->home.path) != w->pid)
		return sb_fail(
			detail, dlen, -EBUSY,
			"its warm interpreter is not alone in its cgroup (an escaped child?)");
	rss = rss_kb(w->pid);
	if (rss > w->base_rss_kb + (uint64_t)p->max_growth_mb * 1024)
		return sb_fail(detail, dlen, -ENOMEM,
			       "its warm interpreter grew from %llu to %llu KiB (max_growth_mb %u)",
			       (unsigned long long)w->base_rss_kb, (unsigned long long)rss,
			       p->max_growth_mb);
	if (w->calls >= p->max_calls)
		return sb_fail(detail, dlen, -ESTALE, "its warm interpreter served max_calls (%u)",
			       p->max_calls);
	if (sandbox_warm_expired(sb))
		return sb_fail(detail, dlen, -ESTALE, "its warm interpreter is past max_age_s (%u)",
			       p->max_age_s);
	return 0;
}

void sb_warm_close(struct sandbox *sb)
{
	fs_close(&sb->warm.sock);
	fs_close(&sb->warm.home.dir_fd);
	fs_close(&sb->warm.home.procs_fd);
}

/* The warm side of a sandbox, for its pool and executor. */
bool sandbox_warm_for(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	/* Not kept (a verifier's sandbox its request's thread prepared): its
	 * parent ends with that thread, so no pool may keep it. */
	if (sb->warm.sock < 0 || sb->broken || !sb->warm.keep)
		return false;
	return !spec || (spec->argv && sandbox_fits(sb, spec) && sb_warm_wanted(sb, spec));
}

bool sandbox_warm_ran(const struct sandbox *sb)
{
	return sb->warm.script[0] != '\0';
}

bool sandbox_warm_refused(const struct sandbox *sb)
{
	return sb->warm.refused;
}

void sandbox_warm_refuse(const struct sandbox *sb, const char *why)
{
	if (sb->warm.script[0])
		sb_warm_refuse(sb, why);
}

void sandbox_may_keep(struct sandbox *sb)
{
	sb->warm.keep = true;
}
