/* Reading the event stream: the rotated files' names and order, which of
 * them --since reaches, and the line reader's over-long lines,
 * unterminated last line, truncation and rotation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "telemetry/event_stream.h"
#include "event_log_files.h"

static void put(const char *name, const char *text, int64_t mtime_s)
{
	FILE *f = fopen(name, "we");
	struct timespec t[2] = { { mtime_s, 0 }, { mtime_s, 0 } };

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	if (mtime_s)
		assert_int_equal(utimensat(AT_FDCWD, name, t, 0), 0);
}

static void test_file_names(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(event_stream_file(out, sizeof(out), "/e.jsonl", 0), 0);
	assert_string_equal(out, "/e.jsonl");
	assert_int_equal(event_stream_file(out, sizeof(out), "/e.jsonl", 12), 0);
	assert_string_equal(out, "/e.jsonl.12");
	assert_int_equal(event_stream_file(out, 10, "/e.jsonl", 12), -ENAMETOOLONG);
}

struct seen {
	char names[8][PATH_MAX];
	int n, stop_at;
};

static int record(const char *p, void *ctx)
{
	struct seen *s = ctx;

	snprintf(s->names[s->n], PATH_MAX, "%s", p);
	return ++s->n == s->stop_at ? 7 : 0;
}

static void test_rotated_oldest_first_since(void **state)
{
	char name[PATH_MAX + 8];
	struct seen s = { .n = 0 };

	(void)state;
	put(path, "now\n", 0);
	for (int i = 1; i <= 3; i++) {
		snprintf(name, sizeof(name), "%s.%d", path, i);
		put(name, "old\n", 1000000 - i * 1000); /* .3 the oldest */
	}
	snprintf(name, sizeof(name), "%s.5", path); /* past a gap: not the stream's */
	put(name, "stray\n", 1000000);

	assert_int_equal(event_stream_rotated(path, 0, record, &s), 0);
	assert_int_equal(s.n, 3);
	assert_true(strstr(s.names[0], ".jsonl.3") != NULL);
	assert_true(strstr(s.names[2], ".jsonl.1") != NULL);

	/* Since just after .3 was last written: .2 and .1. */
	s.n = 0;
	assert_int_equal(event_stream_rotated(path, (1000000 - 3000) * 1000LL + 1, record, &s), 0);
	assert_int_equal(s.n, 2);
	assert_true(strstr(s.names[0], ".jsonl.2") != NULL);

	/* A callback's non-zero answer stops the walk and is returned. */
	s.n = 0;
	s.stop_at = 1;
	assert_int_equal(event_stream_rotated(path, 0, record, &s), 7);
	assert_int_equal(s.n, 1);
}

static void test_reader_lines(void **state)
{
	struct event_reader r;
	size_t big = EVENT_STREAM_LINE_CAP + 10;
	char *text = malloc(big + 32), *line;

	(void)state;
	assert_non_null(text);
	strcpy(text, "one\n");
	memset(text + 4, 'x', big);
	strcpy(text + 4 + big, "\ntwo\nthree");
	put(path, text, 0);
	free(text);

	assert_int_equal(event_reader_open(&r, path), 0);
	assert_int_equal(event_reader_next(&r, &line), 1);
	assert_string_equal(line, "one");
	assert_int_equal(event_reader_next(&r, &line), 2); /* over-long: skipped */
	assert_int_equal(r.line_no, 2);
	assert_int_equal(event_reader_next(&r, &line), 1);
	assert_string_equal(line, "two");
	assert_int_equal(event_reader_next(&r, &line), 0); /* "three" waits for its newline */
	assert_int_equal(event_reader_tail(&r, &line), 1); /* unless the file is over */
	assert_string_equal(line, "three");
	assert_int_equal(r.line_no, 4);
	assert_int_equal(event_reader_tail(&r, &line), 0);
	event_reader_close(&r);

	assert_int_equal(event_reader_open(&r, "/nonexistent/events"), -ENOENT);
}

static void test_reader_truncated_and_replaced(void **state)
{
	struct event_reader r;
	char moved[PATH_MAX + 8], *line;

	(void)state;
	put(path, "a\nb\n", 0);
	assert_int_equal(event_reader_open(&r, path), 0);
	assert_int_equal(event_reader_next(&r, &line), 1);
	assert_int_equal(event_reader_next(&r, &line), 1);
	assert_int_equal(event_reader_next(&r, &line), 0);
	assert_false(event_reader_rewind_if_truncated(&r));
	assert_false(event_reader_replaced(&r, path));

	assert_int_equal(truncate(path, 0), 0);
	put(path, "c\n", 0); /* same inode, shorter */
	assert_true(event_reader_rewind_if_truncated(&r));
	assert_int_equal(event_reader_next(&r, &line), 1);
	assert_string_equal(line, "c");

	snprintf(moved, sizeof(moved), "%s.1", path);
	assert_int_equal(rename(path, moved), 0);
	put(path, "d\n", 0);
	assert_true(event_reader_replaced(&r, path));
	event_reader_close(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_names),
		cmocka_unit_test_setup_teardown(test_rotated_oldest_first_since, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_truncated_and_replaced, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
