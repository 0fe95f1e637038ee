/* One call of a sandbox's forkserver parent (see interp.h): its child
 * forked ahead into the call's cgroup (PREP), the call's directory and
 * CALL, and its DONE. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/fs_util.h"
#include "lib/log.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_interp.h"
#include "interp_call.h"

#define MAPS_MAX_BYTES (16u << 20)   /* a parent's /proc/<pid>/maps, at most */
#define PREFAULT_MAX   (64ull << 20) /* of the parent's memory, per waiting child */
#define PREFAULT_SHARE 4             /* and at most 1/4 of the sandbox's memory limit */

int interp_fail(char *detail, size_t dlen, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, dlen, fmt, ap);
	va_end(ap);
	return err;
}

int interp_read_msg(const struct sb_interp *w, struct interp_msg *m, int timeout_ms)
{
	struct pollfd pfd = { .fd = w->sock, .events = POLLIN };
	ssize_t n;
	int ready;

	do
		ready = poll(&pfd, 1, timeout_ms);
	while (ready < 0 && errno == EINTR);
	if (ready <= 0)
		return ready < 0 ? -errno : 0;
	n = recv(w->sock, m, sizeof(*m), MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(*m) || m->magic != INTERP_MSG_MAGIC)
		return -EPIPE;
	return 1;
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
/* One line of /proc/<pid>/maps: "start-end perms ...". */
static bool maps_line(const char *line, unsigned long long *start, unsigned long long *end,
		      char perms[8])
{
	char *p;
	size_t n = 0;

	if (!isxdigit((unsigned char)line[0])) /* strtoull() would skip to the next line */
		return false;
	*start = strtoull(line, &p, 16);
	if (p == line || *p != '-')
		return false;
	line = p + 1;
	*end = strtoull(line, &p, 16);
	if (p == line || *p != ' ')
		return false;
	for (p++; n < 7 && p[n] && p[n] != ' ' && p[n] != '\n'; n++)
		perms[n] = p[n];
	perms[n] = '\0';
	return n > 0;
}

static int parent_ranges(pid_t pid, unsigned long long left, unsigned long long shared_max,
			 struct interp_range *range)
{
	char path[64], perms[8], *text = NULL;
	unsigned long long start, end;
	size_t len;
	int n = 0, err;

	/* Read once, by read() (a test's path: stdio's line by line, twice,
	 * was a tenth of the executor's CPU per warm test). */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	err = pid ? fs_read_all(path, MAPS_MAX_BYTES, &text, &len) : -ESRCH;
	if (err)
		return err;
	for (int pass = 0; pass < 2 && !err; pass++) {
		for (const char *line = text, *nl; !err && *line;
		     line = nl ? nl + 1 : line + strlen(line)) {
			bool shared;

			nl = strchr(line, '\n');
			if (!maps_line(line, &start, &end, perms) || perms[1] != 'w')
				continue;
			shared = perms[3] == 's';
			if (pass == 0 && shared) {
				/* Only what the child can copy and map back as it was. */
				if (n == INTERP_PREP_MAX || end - start > shared_max ||
				    strcmp(perms, "rw-s"))
					err = -E2BIG;
				else
					range[n++] =
						(struct interp_range){ .start = start,
								       .len = (end - start) |
									      INTERP_RANGE_SHARED };
				shared_max -= err ? 0 : end - start;
			} else if (pass == 1 && !shared && !strcmp(perms, "rw-p") &&
				   end - start <= left && n < INTERP_PREP_MAX) {
				range[n++] =
					(struct interp_range){ .start = start, .len = end - start };
				left -= end - start;
			}
		}
	}
	free(text);
	return err ? err : n;
}

int interp_prefork(struct sandbox *sb, char *detail, size_t dlen)
{
	struct sb_interp *w = sandbox_interp(sb);
	struct interp_prep *m = malloc(sizeof(*m));
	/* The copy counts against the memory limit the call shares with
	 * the parent: a bounded share of it. */
	uint64_t share = (sandbox_policy(sb)->limits.memory_mb << 20) / PREFAULT_SHARE;
	int procs = -1, err, n;

	if (!m)
		return interp_fail(detail, dlen, -ENOMEM, "warm interpreter: out of memory");
	m->magic = INTERP_PREP_MAGIC;
	/* No prefault for a verifier's parent: its children run small
	 * programs, which touch few of its pages (measured: about 690 faults
	 * in all, where copying every range took 1640), and a test waits for
	 * its child's copy when it follows the previous one at once. */
	n = parent_ranges(w->pid, w->verify ? 0 : (share < PREFAULT_MAX ? share : PREFAULT_MAX),
			  share, m->range);
	if (n < 0) {
		free(m);
		return interp_fail(
			detail, dlen, n,
			"sandbox %s: its warm interpreter's writable shared memory cannot "
			"be made private for the next call: %s",
			sandbox_id(sb), strerror(-n));
	}
	m->n = (uint32_t)n;
	/* Opened here, as root: the child, which may not open it, joins its
	 * cgroup by writing to it (docs/warm-interpreters.md: why not clone3). */
	err = sb_cgroup_open(sandbox_leaf_path(sb), "cgroup.procs", O_WRONLY, &procs, detail, dlen);
	if (!err) {
		err = sandbox_send_fds(w->sock, m,
				       offsetof(struct interp_prep, range) +
					       m->n * sizeof(m->range[0]),
				       &procs, 1);
		close(procs);
		if (err)
			err = interp_fail(detail, dlen, err,
					  "sandbox %s: cannot have its warm interpreter fork the "
					  "next call's child: %s",
					  sandbox_id(sb), strerror(-err));
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

	snprintf(name, sizeof(name), "call-%u", sandbox_runs(sb));
	snprintf(dir, len, "%s/%s", sandbox_scratch_path(sb), name);
	/* By descriptor, never by path: the parent's code can write the
	 * scratch, and could swap the new directory for a symlink to a host
	 * file between a mkdir and a chown by path (24-warm-attacks
	 * warm-call-dir-swap-chowns-nothing-of-the-host). */
	root = open(sandbox_scratch_path(sb), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0 || mkdirat(root, name, 0700))
		err = -errno;
	if (!err && (fd = openat(root, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		err = -errno;
	if (!err && fstat(fd, &st))
		err = -errno;
	if (!err && (st.st_uid != 0 || !S_ISDIR(st.st_mode)))
		err = -EBUSY; /* not the one made: swapped */
	if (!err && fchown(fd, sandbox_uid(sb), sandbox_gid(sb)))
		err = -errno;
	fs_close(&fd);
	fs_close(&root);
	if (err)
		return interp_fail(detail, dlen, err, "sandbox %s: cannot make %s: %s",
				   sandbox_id(sb), dir, strerror(-err));
	return 0;
}

static int add(char *buf, uint32_t *len, const char *s)
{
	size_t n = strlen(s) + 1;

	if (*len + n > INTERP_CALL_MAX)
		return -E2BIG;
	memcpy(buf + *len, s, n);
	*len += (uint32_t)n;
	return 0;
}

static int send_call(const struct sb_interp *w, const char *dir, char *const *argv,
		     const int fds[4])
{
	struct interp_call *m = malloc(sizeof(*m) + INTERP_CALL_MAX);
	char *strings = (char *)(m + 1);
	int err;

	if (!m)
		return -ENOMEM;
	*m = (struct interp_call){ .magic = INTERP_CALL_MAGIC };
	err = add(strings, &m->len, dir);
	for (char *const *a = argv; *a && !err; a++, m->argc++)
		err = add(strings, &m->len, *a);
	err = err ?: sandbox_send_fds(w->sock, m, sizeof(*m) + m->len, fds, 4);
	free(m);
	return err;
}

int interp_call(struct sandbox *sb, const struct sandbox_spec *spec, const int fds[4], char *detail,
		size_t dlen)
{
	struct sb_interp *w = sandbox_interp(sb);
	char dir[PATH_MAX];
	int err = 0;

	/* A verifier's test has the sandbox's scratch as a cold run does
	 * (it is reset between tests): the sandbox's domain is its limit. */
	if (w->verify)
		snprintf(dir, sizeof(dir), "%s", sandbox_scratch_path(sb));
	else
		err = make_call_dir(sb, dir, sizeof(dir), detail, dlen);
	if (err)
		return err;
	err = send_call(w, dir, spec->argv + 1, fds);
	if (err)
		return interp_fail(detail, dlen, err,
				   "sandbox %s: cannot hand the call to its warm "
				   "interpreter: %s",
				   sandbox_id(sb), strerror(-err));
	w->calls++;
	return 0;
}

int interp_read_done(struct sandbox *sb, int *status, int timeout_ms)
{
	struct interp_msg m;
	int got = interp_read_msg(sandbox_interp(sb), &m, timeout_ms);

	if (got != 1)
		return got;
	if (m.type != INTERP_DONE) {
		if (m.type == INTERP_FAILED)
			sg_warn("sandbox %s: its warm interpreter failed: %.*s", sandbox_id(sb),
				(int)sizeof(m.text), m.text);
		return -EPIPE;
	}
	*status = m.status;
	return 1;
}
