/* A unit test's temporary directory, removed with everything in it at
 * teardown (include after <cmocka.h>). */
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

#endif
