/* Sandbox pieces, mostly without root: scratch path validation,
 * fetching without following symlinks, the minimal root's plan (symlinks
 * recreated, nested paths bound once, private paths left alone), and, as
 * root, the tmpfs scratch's teardown of a deep tree. The seccomp filter's
 * tests are in test_sandbox_seccomp.c. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <limits.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_landlock.h"
#include "sandbox/sandbox_root.h"
#include "sandbox/sandbox_scratch.h"
#include "sandbox/sandbox_seccomp.h"

/* ---- scratch paths --------------------------------------------------------- */

static void test_scratch_path_valid(void **state)
{
	static const char *const good[] = { "a",    "out.txt", "sub/inner.txt", "a/b/c", ".hidden",
					    "a..b", "..x" };
	static const char *const bad[] = { "",  "/etc/passwd", "..",   "../x", "a/../b", "a/..",
					   ".", "./a",         "a//b", "a/",   "a/./b" };

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(sb_scratch_path_valid(good[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (sb_scratch_path_valid(bad[i]))
			fail_msg("'%s' accepted", bad[i]);
	assert_false(sb_scratch_path_valid(NULL));
	/* A component the filesystem cannot hold is a bad path, not a
	 * platform error when writing it. */
	{
		char name[300];

		memset(name, 'a', sizeof(name) - 1);
		name[sizeof(name) - 1] = '\0';
		name[255] = '\0';
		assert_true(sb_scratch_path_valid(name));
		name[255] = 'a';
		name[256] = '\0';
		assert_false(sb_scratch_path_valid(name));
	}
}

static void test_scratch_paths_conflict(void **state)
{
	assert_true(sb_scratch_paths_conflict("x", "x/y"));
	assert_true(sb_scratch_paths_conflict("x/y/z", "x"));
	assert_true(sb_scratch_paths_conflict("a/b", "a/b"));
	assert_false(sb_scratch_paths_conflict("x", "xy/z"));
	assert_false(sb_scratch_paths_conflict("x/y", "x/z"));
	assert_false(sb_scratch_paths_conflict("ab", "a"));
}

/* ---- fetch and remove ------------------------------------------------------ */

struct tree {
	char root[64];     /* <tmp>: scratch root */
	char scratch[128]; /* <tmp>/t/id */
	char outside[128]; /* <tmp>/outside.txt: must survive */
};

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int tree_setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));
	char path[256];

	snprintf(t->root, sizeof(t->root), "/tmp/sgsb-unit-XXXXXX");
	assert_non_null(mkdtemp(t->root));
	snprintf(path, sizeof(path), "%s/t", t->root);
	assert_int_equal(mkdir(path, 0711), 0);
	snprintf(t->scratch, sizeof(t->scratch), "%s/t/id", t->root);
	assert_int_equal(mkdir(t->scratch, 0700), 0);
	snprintf(path, sizeof(path), "%s/.tmp", t->scratch); /* as sb_scratch_create() */
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.shm", t->scratch);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.mnt", t->scratch);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(t->outside, sizeof(t->outside), "%s/outside.txt", t->root);
	write_text(t->outside, "keep me");
	*state = t;
	return 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", t->root);
	free(t);
	return 0;
}

static void test_fetch(void **state)
{
	struct tree *t = *state;
	struct sandbox_fetched f;
	char path[256];
	int dirfd;

	snprintf(path, sizeof(path), "%s/out.txt", t->scratch);
	write_text(path, "0123456789");
	snprintf(path, sizeof(path), "%s/link", t->scratch);
	assert_int_equal(symlink(t->outside, path), 0);
	snprintf(path, sizeof(path), "%s/dirlink", t->scratch);
	assert_int_equal(symlink(t->root, path), 0);
	snprintf(path, sizeof(path), "%s/fifo", t->scratch);
	assert_int_equal(mkfifo(path, 0600), 0);
	dirfd = open(t->scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);

	assert_int_equal(sb_scratch_fetch(dirfd, "out.txt", getuid(), 100, &f), 0);
	assert_string_equal(f.data, "0123456789");
	assert_false(f.truncated);
	free(f.path);
	free(f.data);

	assert_int_equal(sb_scratch_fetch(dirfd, "out.txt", getuid(), 4, &f), 0);
	assert_int_equal(f.len, 4);
	assert_string_equal(f.data, "0123");
	assert_true(f.truncated);
	free(f.path);
	free(f.data);

	/* Refused: a symlink (file or directory on the way), a FIFO that would
	 * block, a file of another owner, a path leaving the scratch. */
	static const char *const refused[] = { "link", "dirlink/outside.txt", "fifo",
					       "../../outside.txt", "missing" };
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(sb_scratch_fetch(dirfd, refused[i], getuid(), 100, &f), 0);
		if (f.data)
			fail_msg("fetched '%s'", refused[i]);
		assert_string_equal(f.path, refused[i]);
		free(f.path);
	}
	assert_int_equal(sb_scratch_fetch(dirfd, "out.txt", getuid() + 1, 100, &f), 0);
	assert_null(f.data);
	free(f.path);

	/* The executor's own failures are errors (a platform error), never a
	 * missing file that would score as the tenant's: no scratch, and no
	 * fd left for the open. */
	assert_int_equal(sb_scratch_fetch(-1, "out.txt", getuid(), 100, &f), -EBADF);
	free(f.path);
	struct rlimit was, none;
	int lowest = dup(0);

	assert_true(lowest >= 0);
	close(lowest);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
	none = (struct rlimit){ .rlim_cur = (rlim_t)lowest, .rlim_max = was.rlim_max };
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &none), 0);
	int got = sb_scratch_fetch(dirfd, "out.txt", getuid(), 100, &f);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(got, -EMFILE);
	assert_null(f.data);
	free(f.path);
	close(dirfd);
}

/* As root: the scratch is a tmpfs of its own, with its /tmp and /dev/shm
 * in it; removing it is an unmount, however deep the tree. */
static void test_scratch_tmpfs(void **state)
{
	struct tree *t = *state;
	struct sb_scratch_spec sp = { .root = t->root,
				      .tenant = "t",
				      .id = "tmpfs",
				      .uid = 65534,
				      .gid = 65534,
				      .size_mb = 4,
				      .inodes = 8192 };
	char path[PATH_MAX], more[PATH_MAX + 16];
	struct stat st, root_st;
	int fd;

	if (geteuid() != 0)
		skip();
	assert_int_equal(sb_scratch_create(&sp, path, sizeof(path), more, sizeof(more)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(stat(t->root, &root_st), 0);
	assert_true(st.st_dev != root_st.st_dev); /* a filesystem of its own */
	assert_int_equal(st.st_uid, 65534);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(more, sizeof(more), "%s/.tmp", path);
	assert_int_equal(stat(more, &st), 0);
	assert_int_equal(st.st_uid, 65534);
	/* Deeper than any fd or stack budget of a walk. */
	fd = open(path, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 3000; i++) {
		int next;

		assert_int_equal(mkdirat(fd, "d", 0700), 0);
		next = openat(fd, "d", O_RDONLY | O_DIRECTORY);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
	snprintf(more, sizeof(more), "%s/link", path);
	assert_int_equal(symlink(t->root, more), 0);
	assert_int_equal(sb_scratch_remove(t->root, "t", "tmpfs"), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(access(t->outside, F_OK), 0); /* the symlink was not followed */
	/* Removing a scratch that is already gone is not an error. */
	assert_int_equal(sb_scratch_remove(t->root, "t", "tmpfs"), 0);
	/* The id is taken while it exists. */
	assert_int_equal(sb_scratch_create(&sp, path, sizeof(path), more, sizeof(more)), 0);
	assert_int_equal(sb_scratch_create(&sp, path, sizeof(path), more, sizeof(more)), -EEXIST);
	assert_int_equal(sb_scratch_remove(t->root, "t", "tmpfs"), 0);
}

/* ---- the minimal root's plan ----------------------------------------------- */

static bool has_op(const struct sb_root_plan *rp, int kind, const char *path, const char *src)
{
	for (size_t i = 0; i < rp->n_ops; i++)
		if (rp->ops[i].kind == kind && !strcmp(sb_root_str(rp, rp->ops[i].path), path) &&
		    (!src || !strcmp(sb_root_str(rp, rp->ops[i].src), src)))
			return true;
	return false;
}

static int count_binds(const struct sb_root_plan *rp)
{
	int n = 0;

	for (size_t i = 0; i < rp->n_ops; i++)
		n += rp->ops[i].kind == SB_OP_BIND;
	return n;
}

static void test_root_plan(void **state)
{
	struct tree *t = *state;
	struct sg_policy *p = calloc(1, sizeof(*p));
	struct sb_root_plan rp;
	char dir[256], link[256], inner[256], detail[256];

	assert_non_null(p);
	/* <root>/real/inner.txt, <root>/alias -> real (relative), a path
	 * through the alias, a path below an entry already listed, a missing
	 * path, private paths, and a FIFO. */
	snprintf(dir, sizeof(dir), "%s/real", t->root);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(inner, sizeof(inner), "%s/inner.txt", dir);
	write_text(inner, "x");
	snprintf(link, sizeof(link), "%s/alias", t->root);
	assert_int_equal(symlink("real", link), 0);
	policy_defaults(p);
	p->n_read_only = 0;
	snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "%s/inner.txt", link);
	snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "%s", dir);
	snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "%s/missing", t->root);
	snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "/proc/cpuinfo");
	snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "/dev/null");
	snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "%s/fifo", t->root);
	snprintf(dir, sizeof(dir), "%s/fifo", t->root);
	assert_int_equal(mkfifo(dir, 0600), 0);

	assert_int_equal(sb_root_plan(&rp, p, t->scratch, "/run/sgtest-base", false, detail,
				      sizeof(detail)),
			 0);
	snprintf(dir, sizeof(dir), "%s/real", t->root);
	/* The directory is bound once, read-only; the alias recreated. */
	assert_true(has_op(&rp, SB_OP_BIND, dir, dir));
	assert_true(has_op(&rp, SB_OP_SYMLINK, link, "real"));
	assert_false(has_op(&rp, SB_OP_BIND, inner, NULL));
	/* /proc paths are Landlock rules on the sandbox's own procfs. */
	assert_true(has_op(&rp, SB_OP_LANDLOCK_RD, "/proc/cpuinfo", NULL));
	assert_true(has_op(&rp, SB_OP_PROC, "/proc", NULL));
	/* The private /dev, /tmp, /dev/shm and /mnt, and the scratch. */
	assert_true(has_op(&rp, SB_OP_BIND, "/dev/null", "/dev/null"));
	assert_true(has_op(&rp, SB_OP_TMPFS, "/dev", NULL));
	snprintf(link, sizeof(link), "%s/.tmp", t->scratch);
	assert_true(has_op(&rp, SB_OP_BIND, "/tmp", link));
	snprintf(link, sizeof(link), "%s/.shm", t->scratch);
	assert_true(has_op(&rp, SB_OP_BIND, "/dev/shm", link));
	snprintf(link, sizeof(link), "%s/.mnt", t->scratch);
	assert_true(has_op(&rp, SB_OP_BIND, "/mnt", link));
	assert_true(has_op(&rp, SB_OP_BIND, t->scratch, t->scratch));
	/* 4 devices, /tmp, /dev/shm, /mnt, the real dir, the scratch: no
	 * missing path, no FIFO. */
	assert_int_equal(count_binds(&rp), 9);
	for (size_t i = 0; i < rp.n_ops; i++)
		if (rp.ops[i].kind == SB_OP_BIND && !(rp.ops[i].flags & MS_NOSUID))
			fail_msg("bind %s without nosuid", sb_root_str(&rp, rp.ops[i].path));
	assert_true(rp.ops[rp.n_ops - 1].kind == SB_OP_REMOUNT_RO);
	sb_root_plan_free(&rp);

	/* A path that is the sandbox's root base is refused. */
	snprintf(p->read_only[0], SG_POLICY_PATHLEN, "/run");
	p->n_read_only = 1;
	assert_int_equal(sb_root_plan(&rp, p, t->scratch, "/run/sgtest-base", false, detail,
				      sizeof(detail)),
			 -EINVAL);
	free(p);
}

/* ---- Landlock and the agent ------------------------------------------------ */

/* In a child: enforce a ruleset built with `to_agent` and read a file
 * outside the allowlist. Returns 0 if the read worked, else its errno. */
static int read_outside_under(const struct landlock_delegation *to_agent, const char *scratch,
			      const char *outside)
{
	struct sg_policy *p = calloc(1, sizeof(*p));
	char detail[256];
	int status, fd;
	pid_t pid;

	assert_non_null(p);
	policy_defaults(p);
	p->n_read_only = 1;
	snprintf(p->read_only[0], sizeof(p->read_only[0]), "/usr");
	uint64_t proc_read;

	fd = landlock_ruleset_build(p, scratch, false, to_agent, &proc_read, detail,
				    sizeof(detail));
	free(p);
	if (fd == -EOPNOTSUPP)
		return -1;
	assert_true(fd >= 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int file;

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || landlock_enforce(fd))
			_exit(255);
		file = open(outside, O_RDONLY);
		_exit(file >= 0 ? 0 : errno);
	}
	close(fd);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_not_equal(WEXITSTATUS(status), 255);
	return WEXITSTATUS(status);
}

/* Reads are left to the agent only when it refuses opens itself (LSM
 * mode); in fallback mode (reads = false) Landlock refuses them. */
static void test_landlock_reads_kept_unless_agent_prevents(void **state)
{
	struct tree *t = *state;
	const struct landlock_delegation none = { 0 }, fallback = { .tcp_connect = true },
					 lsm = { .reads = true, .tcp_connect = true };
	int ret = read_outside_under(&none, t->scratch, t->outside);

	if (ret == -1)
		skip();
	assert_int_equal(ret, EACCES);
	assert_int_equal(read_outside_under(&fallback, t->scratch, t->outside), EACCES);
	assert_int_equal(read_outside_under(&lsm, t->scratch, t->outside), 0);
}

/* The policies a sandbox fits: equal but for what only the executor
 * reads (admission, retries, health), compared in place around those
 * fields; any other byte, first or last, makes them differ. */
static void test_policy_same(void **state)
{
	static struct sg_policy a, b;

	(void)state;
	policy_defaults(&a);
	b = a;
	assert_true(sandbox_policy_same(&a, &b));
	b.limits.on_excess = a.limits.on_excess == SG_EXCESS_WAIT ? SG_EXCESS_REFUSE
								  : SG_EXCESS_WAIT;
	b.limits.queue_timeout_ms = a.limits.queue_timeout_ms + 7;
	b.failure = a.failure + 1;
	b.max_retries = a.max_retries + 3;
	b.health.window = a.health.window + 1;
	b.health.dead_epsilon = a.health.dead_epsilon + 0.5;
	b.canary.rate = a.canary.rate + 0.5; /* the executor's, not the sandbox's */
	assert_true(sandbox_policy_same(&a, &b));
	b.limits.output_bytes = a.limits.output_bytes + 1; /* between two skipped fields */
	assert_false(sandbox_policy_same(&a, &b));
	b.limits.output_bytes = a.limits.output_bytes;
	b.tenant[0] ^= 1;
	assert_false(sandbox_policy_same(&a, &b));
	b.tenant[0] = a.tenant[0];
	b.source[sizeof(b.source) - 1] ^= 1;
	assert_false(sandbox_policy_same(&a, &b));
	b.source[sizeof(b.source) - 1] = a.source[sizeof(a.source) - 1];
	b.warm.interpreter = a.warm.interpreter + 1; /* right after the skipped health */
	assert_false(sandbox_policy_same(&a, &b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy_same),
		cmocka_unit_test(test_scratch_path_valid),
		cmocka_unit_test(test_scratch_paths_conflict),
		cmocka_unit_test_setup_teardown(test_fetch, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_scratch_tmpfs, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_root_plan, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_landlock_reads_kept_unless_agent_prevents,
						tree_setup, tree_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
