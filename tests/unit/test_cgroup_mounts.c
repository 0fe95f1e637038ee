/* The cgroup mounts (src/lib/cgroup.c): read from the mount table once and
 * kept, a kept mount point checked before it is given out. Each test runs
 * in a child of its own, in a mount namespace of its own where it must
 * mount or unmount, so the cache starts as a process's does and the
 * node's mounts are never touched. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "lib/cgroup.h"

/* The table's answer, read here apart from the code under test: the
 * shortest mount point of a cgroup2 mount, or of a v1 mount whose super
 * options name `controller`. "" when there is none. */
static void mountinfo_says(const char *controller, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];

	out[0] = '\0';
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char point[PATH_MAX], type[64], opts[1024], tok[1026];
		const char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(sep + 3, "%63s %*s %1023s", type, opts) != 2)
			continue;
		if (strcmp(type, controller ? "cgroup" : "cgroup2"))
			continue;
		snprintf(tok, sizeof(tok), ",%s,", opts);
		if (controller) {
			char want[80];

			snprintf(want, sizeof(want), ",%s,", controller);
			if (!strstr(tok, want))
				continue;
		}
		if (!out[0] || strlen(point) < strlen(out))
			snprintf(out, len, "%s", point);
	}
	fclose(f);
}

/* A child's skip, with why: 77 is in_child()'s skip. */
static int skip_because(const char *why)
{
	fprintf(stderr, "skip: %s\n", why);
	return 77;
}

/* Runs fn in a child; its status is the test's. */
static void in_child(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

#define CHECK(cond)                                                                \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			return 1;                                                  \
		}                                                                  \
	} while (0)

/* Every answer is the table's, asked many times over, v2 and each v1
 * controller, one at a time and several at once. */
static int answers_are_the_tables(void)
{
	static const char *const v1[] = { "cpu", "memory", "pids", "blkio", NULL, "nosuch" };
	char want[PATH_MAX], got[PATH_MAX], many[6][PATH_MAX];

	mountinfo_says(NULL, want, sizeof(want));
	if (!want[0])
		return skip_because("no cgroup2 mount in /proc/self/mountinfo");
	for (int round = 0; round < 200; round++) {
		CHECK(cgroup2_mount(got, sizeof(got)) == 0 && !strcmp(got, want));
		CHECK(cgroup_v1_mounts(v1, 6, many) == 0);
		for (int i = 0; i < 6; i++) {
			char one[PATH_MAX];

			if (!v1[i]) {
				CHECK(many[i][0] == '\0');
				continue;
			}
			mountinfo_says(v1[i], want, sizeof(want));
			CHECK(!strcmp(many[i], want));
			CHECK(cgroup_v1_mount(v1[i], one, sizeof(one)) == (want[0] ? 0 : -ENOENT));
			CHECK(!want[0] || !strcmp(one, want));
		}
		mountinfo_says(NULL, want, sizeof(want));
	}
	CHECK(cgroup2_mount(got, 4) == -ENAMETOOLONG);
	return 0;
}

static void test_answers_are_the_tables(void **state)
{
	(void)state;
	in_child(answers_are_the_tables);
}

/* A mount made after the first answer is not seen while the kept one is
 * still a cgroup2 mount; once that one is gone, the table is read again
 * and the new one is the answer. The new mount point is a directory in /,
 * shorter than any node's cgroup2 mount: a read of the table would answer
 * it at once. */
static int kept_then_read_again(void)
{
	char first[PATH_MAX], got[PATH_MAX], other[] = "/sgu-XXXXXX";
	int ret = 1;

	if (geteuid() != 0 || cgroup2_mount(first, sizeof(first)))
		return skip_because("needs root and a cgroup2 mount");
	/* Shorter than the kept one, so that a read of the table now would
	 * answer it (the shortest mount point wins). */
	if (strlen(other) >= strlen(first))
		return skip_because("the cgroup2 mount point is not longer than a directory in /");
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return skip_because("cannot make a private mount namespace");
	/* Kept here: a new mount namespace's mounts have new ids, so the
	 * answer before unshare() was read again at this call. */
	CHECK(cgroup2_mount(got, sizeof(got)) == 0 && !strcmp(got, first));
	CHECK(mkdtemp(other));
	if (mount("cgroup2", other, "cgroup2", 0, NULL)) {
		rmdir(other);
		return skip_because("cannot mount a second cgroup2");
	}
	if (cgroup2_mount(got, sizeof(got)) || strcmp(got, first))
		goto out; /* read again although the kept mount stood */
	if (umount2(first, MNT_DETACH))
		goto out;
	ret = 2; /* the stale mount given out */
	if (!cgroup2_mount(got, sizeof(got)) && !strcmp(got, other))
		ret = 0;
out:
	umount2(other, MNT_DETACH);
	rmdir(other);
	return ret;
}

static void test_kept_then_read_again(void **state)
{
	(void)state;
	in_child(kept_then_read_again);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answers_are_the_tables),
		cmocka_unit_test(test_kept_then_read_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
