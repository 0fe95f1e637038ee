/* The event log tests' files: a fresh directory per test, path the event
 * file in it, and its content read back (include after <cmocka.h>). */
#ifndef SG_TEST_EVENT_LOG_FILES_H
#define SG_TEST_EVENT_LOG_FILES_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tmp_dir.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/sg-event-log-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tmp_dir_remove(dir);
	return 0;
}

/* The whole content of path suffix ("" for the live file, ".N"), or NULL
 * when it does not exist. Caller frees. */
static __attribute__((unused)) char *slurp(const char *suffix)
{
	char p[160], *buf;
	struct stat st;
	FILE *f;

	snprintf(p, sizeof(p), "%s%s", path, suffix);
	f = fopen(p, "r");
	if (!f)
		return NULL;
	fstat(fileno(f), &st);
	buf = calloc(1, (size_t)st.st_size + 1);
	assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	return buf;
}

#endif
