/* fs_mkdir_p(), and fs_read_keyed(): the value of one key of a flat-keyed file (cpu.stat,
 * memory.events), matched whole, from any line including a last one without
 * a newline; a missing key is 0 and a file that cannot be read is -errno. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>
#include "lib/fs_util.h"
#include "tmp_dir.h"

#define LONG_KEY "a_key_longer_than_sixty_four_characters_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static char dir[64];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/sg-fs-util-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	tmp_dir_remove(dir);
	return 0;
}

static void put(const char *file, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* 1 and the value when found, 0 (and *v untouched) when not. */
static int keyed(const char *file, const char *key, uint64_t *v)
{
	*v = 4242;
	return fs_read_keyed(dir, file, key, v);
}

static void test_found_anywhere(void **state)
{
	uint64_t v;

	put("cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"
			"nr_throttled 3\nthrottled_usec 18446744073709551615\n");
	assert_int_equal(keyed("cpu.stat", "usage_usec", &v), 1);
	assert_int_equal(v, 1500);
	assert_int_equal(keyed("cpu.stat", "system_usec", &v), 1);
	assert_int_equal(v, 500);
	assert_int_equal(keyed("cpu.stat", "throttled_usec", &v), 1);
	assert_true(v == UINT64_MAX);
}

static void test_missing_key(void **state)
{
	uint64_t v;

	put("memory.events", "low 0\nhigh 0\nmax 7\noom 1\n");
	assert_int_equal(keyed("memory.events", "oom_kill", &v), 0);
	assert_int_equal(v, 4242);
	assert_int_equal(keyed("memory.events", "", &v), 0);
	put("empty", "");
	assert_int_equal(keyed("empty", "max", &v), 0);
	assert_int_equal(v, 4242);
}

static void test_last_line_without_newline(void **state)
{
	uint64_t v;

	put("pids.events", "max 9");
	assert_int_equal(keyed("pids.events", "max", &v), 1);
	assert_int_equal(v, 9);
	put("two", "a 1\nb 22");
	assert_int_equal(keyed("two", "b", &v), 1);
	assert_int_equal(v, 22);
}

/* A key is the whole first word: "oom" is not "oom_kill" nor "oom_group_kill",
 * in either order, and "max" is not a prefix match of "max_usec". */
static void test_prefix_keys(void **state)
{
	uint64_t v;

	put("memory.events", "oom_kill 5\noom_group_kill 6\noom 4\n");
	assert_int_equal(keyed("memory.events", "oom", &v), 1);
	assert_int_equal(v, 4);
	assert_int_equal(keyed("memory.events", "oom_kill", &v), 1);
	assert_int_equal(v, 5);
	put("v1.oom_control", "oom_kill_disable 1\nunder_oom 0\noom_kill 2\n");
	assert_int_equal(keyed("v1.oom_control", "oom_kill", &v), 1);
	assert_int_equal(v, 2);
	put("x", "max_usec 10\nmaxx7\n");
	assert_int_equal(keyed("x", "max", &v), 0);
	assert_int_equal(keyed("x", "max_use", &v), 0);
	assert_int_equal(keyed("x", "max_usec_more", &v), 0);
}

/* A line that is not "key number" is passed over, and does not hide the
 * lines after it. */
static void test_malformed_lines(void **state)
{
	uint64_t v;

	put("odd", "a -1\nb x\nc 12x\nd\n e 3\nf  4\ng 99999999999999999999\nh 8\n");
	for (const char *k = "abcdefg"; *k; k++) {
		char key[2] = { *k, 0 };
		assert_int_equal(keyed("odd", key, &v), 0);
	}
	assert_int_equal(keyed("odd", "h", &v), 1);
	assert_int_equal(v, 8);
	/* Longer than the 64-byte word the old fscanf readers had. */
	put("long", LONG_KEY " 5\n");
	assert_int_equal(keyed("long", LONG_KEY, &v), 1);
	assert_int_equal(v, 5);
}

/* A file past the reader's 4 KiB buffer (a v1 memory.stat): a line read in
 * two parts is matched whole, and a line longer than the buffer is passed
 * over without hiding the next one. */
static void test_past_one_buffer(void **state)
{
	static char text[12000];
	size_t n = 0;
	uint64_t v;

	for (int i = 0; n < 4090; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "k%d %d\n", i, i);
	n += (size_t)snprintf(text + n, sizeof(text) - n, "split_key 77\n");
	memset(text + n, 'x', 5000); /* one line of 5000 bytes */
	n += 5000;
	snprintf(text + n, sizeof(text) - n, " 1\nafter_long 31\nlast 5");
	put("big.stat", text);
	assert_int_equal(keyed("big.stat", "split_key", &v), 1);
	assert_int_equal(v, 77);
	assert_int_equal(keyed("big.stat", "k3", &v), 1);
	assert_int_equal(v, 3);
	assert_int_equal(keyed("big.stat", "after_long", &v), 1);
	assert_int_equal(v, 31);
	assert_int_equal(keyed("big.stat", "last", &v), 1);
	assert_int_equal(v, 5);
	assert_int_equal(keyed("big.stat", "xxxx", &v), 0);
}

static void test_unreadable(void **state)
{
	char sub[128], name[PATH_MAX + 8];
	uint64_t v;

	assert_int_equal(keyed("absent", "max", &v), -ENOENT);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(keyed("sub", "max", &v), -EISDIR);
	assert_int_equal(keyed("absent/cpu.stat", "max", &v), -ENOENT);
	assert_int_equal(v, 4242);
	memset(name, 'n', sizeof(name) - 1); /* longer than any path */
	name[sizeof(name) - 1] = 0;
	assert_int_equal(keyed(name, "max", &v), -ENAMETOOLONG);
	assert_int_equal(v, 4242);
}

/* fs_mkdir_p(): every missing component made with the mode, an existing
 * path taken as it is, a component that is a file refused. */
static void test_mkdir_p(void **state)
{
	char deep[128], under_file[160];
	struct stat st;

	snprintf(deep, sizeof(deep), "%s/a/b/c", dir);
	assert_int_equal(fs_mkdir_p(deep, 0700), 0);
	assert_int_equal(stat(deep, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(fs_mkdir_p(deep, 0700), 0); /* there already */
	put("a/file", "x");
	snprintf(under_file, sizeof(under_file), "%s/a/file/d/e", dir);
	assert_int_equal(fs_mkdir_p(under_file, 0700), -ENOTDIR);
	assert_int_equal(fs_mkdir_p("", 0700), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_found_anywhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_line_without_newline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prefix_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_past_one_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreadable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
