/* Reading the event stream: the rotated files' names and order, which of
 * them --since reaches, gaps, reading while the files rotate, and the line
 * reader's over-long lines,
 * unterminated last line, truncation and rotation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "telemetry/event_log.h"
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
	bool live[8];
	char text[8][16];
	int n, stop_at;
};

static int record(const char *p, int fd, bool live, void *ctx)
{
	struct seen *s = ctx;
	ssize_t got = pread(fd, s->text[s->n], sizeof(s->text[0]) - 1, 0);

	s->text[s->n][got > 0 ? got : 0] = '\0';
	snprintf(s->names[s->n], PATH_MAX, "%s", p);
	s->live[s->n] = live;
	return ++s->n == s->stop_at ? 7 : 0;
}

/* The live file "now" and three rotated ones "old", .3 the oldest (last
 * written at 997000 s when dated, else now). */
static void put_stream(bool dated)
{
	char name[PATH_MAX + 8];

	put(path, "now\n", 0);
	for (int i = 1; i <= 3; i++) {
		snprintf(name, sizeof(name), "%s.%d", path, i);
		put(name, "old\n", dated ? 1000000 - i * 1000 : 0);
	}
}

static void test_each_oldest_first_since(void **state)
{
	struct seen s = { .n = 0 };
	unsigned lost = 9;

	(void)state;
	put_stream(true);

	assert_int_equal(event_stream_each(path, 0, record, &s, &lost), 0);
	assert_int_equal(lost, 0);
	assert_int_equal(s.n, 4);
	assert_true(strstr(s.names[0], ".jsonl.3") != NULL);
	assert_true(strstr(s.names[2], ".jsonl.1") != NULL);
	assert_string_equal(s.names[3], path);
	assert_false(s.live[2]);
	assert_true(s.live[3]);
	assert_string_equal(s.text[3], "now\n");

	/* Since just after .3 was last written: .2, .1 and the live file,
	 * which is read however old it is. */
	s.n = 0;
	assert_int_equal(event_stream_each(path, (1000000 - 3000) * 1000LL + 1, record, &s, NULL),
			 0);
	assert_int_equal(s.n, 3);
	assert_true(strstr(s.names[0], ".jsonl.2") != NULL);
	s.n = 0;
	assert_int_equal(event_stream_each(path, INT64_MAX, record, &s, NULL), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], path);

	/* A callback's non-zero answer stops the walk and is returned. */
	s.n = 0;
	s.stop_at = 1;
	assert_int_equal(event_stream_each(path, 0, record, &s, NULL), 7);
	assert_int_equal(s.n, 1);
}

/* A file deleted after the listing (rotated past the files kept) before
 * it was read is counted as lost, and the walk goes on. */
static int delete_next(const char *p, int fd, bool live, void *ctx)
{
	char next[PATH_MAX + 8];

	if (strstr(p, ".jsonl.3")) {
		snprintf(next, sizeof(next), "%s.2", path);
		assert_int_equal(unlink(next), 0);
	}
	return record(p, fd, live, ctx);
}

static void test_each_lost(void **state)
{
	struct seen s = { .n = 0 };
	unsigned lost = 0;

	(void)state;
	put_stream(false);
	assert_int_equal(event_stream_each(path, 0, delete_next, &s, &lost), 0);
	assert_int_equal(lost, 1);
	assert_int_equal(s.n, 3); /* .3, .1 and the live file */
	assert_true(strstr(s.names[1], ".jsonl.1") != NULL);
}

/* A rotation cut short (a crash between two renames) leaves a gap of a
 * name or two: the files past it are still the stream's. Three missing
 * names in a row end it. */
static void test_each_gaps(void **state)
{
	char name[PATH_MAX + 8];
	struct seen s = { .n = 0 };

	(void)state;
	unlink(path); /* between a rotation's last rename and the new file */
	for (int i = 1; i <= 9; i++) {
		if (i == 2 || i == 4 || i == 5 || i == 6)
			continue;
		snprintf(name, sizeof(name), "%s.%d", path, i);
		put(name, "x\n", 1000000 - i * 1000);
	}
	assert_int_equal(event_stream_each(path, 0, record, &s, NULL), 0);
	assert_int_equal(s.n, 2); /* .3 and .1; .7 is past .4, .5 and .6 */
	assert_true(strstr(s.names[0], ".jsonl.3") != NULL);
	assert_true(strstr(s.names[1], ".jsonl.1") != NULL);
	assert_false(s.live[1]);

	tmp_dir_remove(dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(event_stream_each(path, 0, record, &s, NULL), -ENOENT);
}

/* The agent rotating while the stream is read: every pass sees each line
 * once, in order, with none missing, up to at least what was written
 * before the pass began. Walking the names instead misses the file that a
 * rotation moves past the reader, and reads another one twice. */
#define RACE_LINES 1000

struct race {
	struct event_log *log;
	atomic_int written;
	int next, bad, passes;
	char why[128];
};

static void *race_writer(void *arg)
{
	struct race *r = arg;
	char line[32];

	for (int i = 0; i < RACE_LINES; i++) {
		snprintf(line, sizeof(line), "{\"n\":%d}", i);
		if (event_log_write(r->log, line))
			break;
		atomic_store(&r->written, i + 1);
	}
	return NULL;
}

static int race_file(const char *name, int fd, bool live, void *ctx)
{
	struct race *r = ctx;
	struct event_reader rd;
	char *line;
	int ret, n;

	(void)live;
	if (event_reader_open_fd(&rd, fd))
		return -EIO;
	while ((ret = event_reader_next(&rd, &line)) == 1) {
		if (sscanf(line, "{\"n\":%d}", &n) != 1 || n != r->next) {
			if (!r->bad++)
				snprintf(r->why, sizeof(r->why), "%s: line %s after %d", name, line,
					 r->next - 1);
			break;
		}
		r->next++;
	}
	event_reader_close(&rd);
	return 0;
}

static void test_each_while_rotating(void **state)
{
	struct race r = { .log = event_log_open(path, 64, 1000) };
	pthread_t writer;

	(void)state;
	assert_non_null(r.log);
	assert_int_equal(pthread_create(&writer, NULL, race_writer, &r), 0);
	while (atomic_load(&r.written) < RACE_LINES && !r.bad) {
		int before = atomic_load(&r.written);

		r.next = 0;
		assert_int_equal(event_stream_each(path, 0, race_file, &r, NULL), 0);
		if (!r.bad && r.next < before && !r.bad++)
			snprintf(r.why, sizeof(r.why), "read %d lines, %d were written before",
				 r.next, before);
		r.passes++;
	}
	pthread_join(writer, NULL);
	event_log_close(r.log);
	if (r.bad)
		fail_msg("pass %d: %s", r.passes, r.why);
	assert_true(r.passes > 1);
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
		cmocka_unit_test_setup_teardown(test_each_oldest_first_since, setup, teardown),
		cmocka_unit_test_setup_teardown(test_each_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_each_gaps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_each_while_rotating, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reader_truncated_and_replaced, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
