/* A unit test's temporary directory, removed with everything in it at
 * teardown (include after <cmocka.h>); for the executor's tests, one that
 * holds its state and run dirs. */
#ifndef SG_TEST_TMP_DIR_H
#define SG_TEST_TMP_DIR_H
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static inline void tmp_dir_remove(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A new /tmp/sg-test-<name>-XXXXXX into tmp, with SANDGUARD_STATE_DIR and
 * SANDGUARD_RUN_DIR pointed at <tmp>/state and <tmp>/run (made on demand by
 * the code under test). */
static inline void tmp_dir_executor(char *tmp, size_t len, const char *name)
{
	char dir[PATH_MAX];

	snprintf(tmp, len, "/tmp/sg-test-%s-XXXXXX", name);
	assert_non_null(mkdtemp(tmp));
	snprintf(dir, sizeof(dir), "%s/state", tmp);
	assert_int_equal(setenv("SANDGUARD_STATE_DIR", dir, 1), 0);
	snprintf(dir, sizeof(dir), "%s/run", tmp);
	assert_int_equal(setenv("SANDGUARD_RUN_DIR", dir, 1), 0);
}

#endif
