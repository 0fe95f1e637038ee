/* The rotating events file: sizes, file names, keep count, stdout, and
 * failures that are counted rather than dropped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "telemetry/event_log.h"
#include "event_log_files.h"

static void assert_file(const char *suffix, const char *want)
{
	char *got = slurp(suffix);

	if (!want) {
		if (got)
			fail_msg("%s%s exists: '%s'", path, suffix, got);
		return;
	}
	if (!got)
		fail_msg("%s%s is missing", path, suffix);
	assert_string_equal(got, want);
	free(got);
}

/* stderr into a pipe while a test provokes messages, to check them (a
 * pipe, not a file: a test limits the size of files). */
static int saved_stderr = -1, stderr_pipe = -1;

static void capture_stderr(void)
{
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	saved_stderr = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	stderr_pipe = fds[0];
}

static char *captured_stderr(void)
{
	char *buf = calloc(1, 4096);
	size_t len = 0;
	ssize_t n;

	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	while ((n = read(stderr_pipe, buf + len, 4095 - len)) > 0)
		len += (size_t)n;
	close(stderr_pipe);
	return buf;
}

static int count(const char *haystack, const char *needle)
{
	int n = 0;

	for (const char *p = haystack; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* A 40-byte line (39 characters and the newline). */
static const char *line40(int i, char *buf)
{
	int n = snprintf(buf, 40, "{\"n\":%d,\"pad\":\"", i);
	memset(buf + n, 'x', (size_t)(37 - n));
	strcpy(buf + 37, "\"}");
	assert_int_equal(strlen(buf), 39);
	return buf;
}

static void test_rotation_names_and_keep(void **state)
{
	struct event_log *log = event_log_open(path, 100, 2);
	struct event_log_stats st;
	char l[8][40], want[160];

	assert_non_null(log);
	for (int i = 1; i <= 7; i++)
		assert_int_equal(event_log_write(log, line40(i, l[i])), 0);
	event_log_get_stats(log, &st);
	event_log_close(log);

	/* Two 40-byte lines fit in 100 bytes, a third rotates; the lines of
	 * rotation one (1, 2) fell off the end with keep 2. */
	snprintf(want, sizeof(want), "%s\n", l[7]);
	assert_file("", want);
	snprintf(want, sizeof(want), "%s\n%s\n", l[5], l[6]);
	assert_file(".1", want);
	snprintf(want, sizeof(want), "%s\n%s\n", l[3], l[4]);
	assert_file(".2", want);
	assert_file(".3", NULL);
	assert_int_equal(st.lines, 7);
	assert_int_equal(st.bytes, 280);
	assert_int_equal(st.rotations, 3);
	assert_int_equal(st.failures, 0);
	assert_int_equal(st.rotate_failures, 0);
}

static void test_existing_file_is_appended_and_counted(void **state)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0640);
	char l[40], want[160];

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "old line\n", 9), 9);
	close(fd);

	/* 9 + 40 fits in 60; the next line does not. */
	struct event_log *log = event_log_open(path, 60, 1);
	assert_non_null(log);
	assert_int_equal(event_log_write(log, line40(1, l)), 0);
	snprintf(want, sizeof(want), "old line\n%s\n", l);
	assert_file("", want);
	assert_int_equal(event_log_write(log, line40(2, l)), 0);
	assert_file(".1", want);
	snprintf(want, sizeof(want), "%s\n", l);
	assert_file("", want);
	event_log_close(log);
}

static void test_keep_zero_truncates(void **state)
{
	struct event_log *log = event_log_open(path, 50, 0);
	char l[40], want[64];

	assert_non_null(log);
	assert_int_equal(event_log_write(log, line40(1, l)), 0);
	assert_int_equal(event_log_write(log, line40(2, l)), 0);
	snprintf(want, sizeof(want), "%s\n", l);
	assert_file("", want);
	assert_file(".1", NULL);
	event_log_close(log);
}

static void test_no_rotation_and_newlines(void **state)
{
	struct event_log *log = event_log_open(path, 0, 3);
	struct event_log_stats st;
	char l[40];

	assert_non_null(log);
	for (int i = 0; i < 100; i++)
		assert_int_equal(event_log_write(log, line40(i, l)), 0);
	/* A trailing newline is not doubled; one inside is refused. */
	assert_int_equal(event_log_write(log, "{\"a\":1}\n"), 0);
	capture_stderr();
	assert_int_equal(event_log_write(log, "{\"a\":\n1}"), -EINVAL);
	char *msgs = captured_stderr();
	assert_non_null(strstr(msgs, "refused a line with a newline inside"));
	free(msgs);
	event_log_get_stats(log, &st);
	event_log_close(log);
	assert_int_equal(st.lines, 101);
	assert_int_equal(st.bytes, 4008);
	assert_int_equal(st.rotations, 0);
	assert_int_equal(st.failures, 1);
	assert_file(".1", NULL);
	char *all = slurp("");
	assert_int_equal(strlen(all), 4008);
	assert_string_equal(all + 4000, "{\"a\":1}\n");
	free(all);
}

static void test_stdout(void **state)
{
	int saved = dup(STDOUT_FILENO);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
	struct event_log *log;

	assert_true(saved >= 0 && fd >= 0);
	fflush(stdout);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	log = event_log_open("-", 10, 2); /* stdout is never rotated */
	assert_non_null(log);
	assert_int_equal(event_log_write(log, "{\"first\":true}"), 0);
	assert_int_equal(event_log_write(log, "{\"second\":true}"), 0);
	event_log_close(log);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	assert_file("", "{\"first\":true}\n{\"second\":true}\n");
	assert_file(".1", NULL);
}

static void test_write_failures_are_counted(void **state)
{
	struct event_log *log;
	struct event_log_stats st;
	char *msgs;

	capture_stderr();
	log = event_log_open("/dev/full", 0, 0);
	assert_non_null(log);
	assert_int_equal(event_log_write(log, "{\"lost\":1}"), -ENOSPC);
	assert_int_equal(event_log_write(log, "{\"lost\":2}"), -ENOSPC);
	event_log_get_stats(log, &st);
	event_log_close(log);
	msgs = captured_stderr();
	assert_int_equal(st.failures, 2);
	assert_int_equal(st.lines, 0);
	/* Reported once for the run of failures, not once per line. */
	assert_int_equal(count(msgs, "writing /dev/full failed: No space left on device"), 1);
	free(msgs);
}

/* A file size limit makes writes fail (EFBIG) and then work again: the
 * recovery says how many lines were lost in between. */
static void test_failure_then_recovery(void **state)
{
	struct rlimit old, small = { .rlim_cur = 80, .rlim_max = RLIM_INFINITY };
	struct event_log *log = event_log_open(path, 0, 0);
	struct event_log_stats st;
	char l[40], *msgs;

	assert_non_null(log);
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	small.rlim_max = old.rlim_max;
	capture_stderr();
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	assert_int_equal(event_log_write(log, line40(1, l)), 0);
	assert_int_equal(event_log_write(log, line40(2, l)), 0);
	assert_int_equal(event_log_write(log, line40(3, l)), -EFBIG);
	assert_int_equal(event_log_write(log, line40(4, l)), -EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(event_log_write(log, line40(5, l)), 0);
	msgs = captured_stderr();
	signal(SIGXFSZ, SIG_DFL);
	event_log_get_stats(log, &st);
	event_log_close(log);
	assert_int_equal(st.failures, 2);
	assert_int_equal(st.lines, 3);
	assert_int_equal(count(msgs, "failed: File too large"), 1);
	assert_int_equal(count(msgs, "works again; 2 lines were lost"), 1);
	free(msgs);
}

static void test_open_failure(void **state)
{
	char bad[160];

	snprintf(bad, sizeof(bad), "%s/no-such-dir/events.jsonl", dir);
	capture_stderr();
	errno = 0;
	assert_null(event_log_open(bad, 0, 0));
	assert_int_equal(errno, ENOENT);
	char *msgs = captured_stderr();
	assert_non_null(strstr(msgs, "cannot open"));
	free(msgs);
}

/* A rotation that cannot rename (path.1 is a directory) is counted, and
 * the lines still go to the current file. */
static void test_rotation_failure_keeps_writing(void **state)
{
	struct event_log *log = event_log_open(path, 50, 1);
	struct event_log_stats st;
	char p1[160], l[40], want[128];

	assert_non_null(log);
	snprintf(p1, sizeof(p1), "%s.1", path);
	assert_int_equal(mkdir(p1, 0700), 0);
	assert_int_equal(event_log_write(log, line40(1, l)), 0);
	snprintf(want, sizeof(want), "%s\n", l);
	capture_stderr();
	assert_int_equal(event_log_write(log, line40(2, l)), 0);
	snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s\n", l);
	char *msgs = captured_stderr();
	assert_non_null(strstr(msgs, "rotation failed: renaming"));
	free(msgs);
	event_log_get_stats(log, &st);
	event_log_close(log);
	assert_int_equal(st.rotate_failures, 1);
	assert_int_equal(st.lines, 2);
	assert_int_equal(st.failures, 0);
	assert_file("", want);
	rmdir(p1);
}

/* Appended lines stay in the batch until it is flushed, then go out in
 * one write, whole; a batch splits at a rotation exactly where writing
 * line by line would have (the file rotates when the line that needs a
 * new one is appended, so that the tenant budget charges it to the file
 * it goes to), and closing writes what is left. */
static void test_batches(void **state)
{
	struct event_log *log = event_log_open(path, 100, 3);
	struct event_log_stats st;
	char l[8][40], want[160];

	assert_non_null(log);
	for (int i = 1; i <= 5; i++)
		assert_int_equal(event_log_append(log, line40(i, l[i]), 39), 0);
	event_log_get_stats(log, &st);
	/* Lines 1-4 went out when the batch would have crossed 100 bytes,
	 * and line 5 opened a new file. */
	assert_int_equal(st.lines, 4);
	assert_file("", "");
	snprintf(want, sizeof(want), "%s\n%s\n", l[3], l[4]);
	assert_file(".1", want);
	snprintf(want, sizeof(want), "%s\n%s\n", l[1], l[2]);
	assert_file(".2", want);
	assert_int_equal(event_log_flush(log), 0);
	assert_int_equal(event_log_flush(log), 0); /* nothing left: nothing written */
	snprintf(want, sizeof(want), "%s\n", l[5]);
	assert_file("", want);
	assert_int_equal(event_log_append(log, line40(6, l[6]), 39), 0);
	assert_int_equal(event_log_append(log, "{\"a\":\n1}", 9), -EINVAL);
	event_log_get_stats(log, &st);
	event_log_close(log);
	snprintf(want, sizeof(want), "%s\n%s\n", l[5], l[6]);
	assert_file("", want);
	assert_int_equal(st.lines, 5);
	assert_int_equal(st.failures, 1);
	assert_int_equal(st.rotations, 2);
}

/* A batch that cannot be written loses every one of its lines, counted. */
static void test_batch_failure_counts_every_line(void **state)
{
	struct event_log *log;
	struct event_log_stats st;
	char *err;

	capture_stderr();
	log = event_log_open("/dev/full", 0, 0);
	assert_non_null(log);
	for (int i = 0; i < 5; i++)
		assert_int_equal(event_log_append(log, "{\"lost\":true}", 14), 0);
	assert_int_equal(event_log_flush(log), -ENOSPC);
	event_log_get_stats(log, &st);
	event_log_close(log);
	err = captured_stderr();
	assert_int_equal(st.failures, 5);
	assert_int_equal(st.lines, 0);
	assert_int_equal(count(err, "failed"), 1);
	free(err);
}

/* A line longer than the whole batch goes out on its own, in order. */
static void test_line_longer_than_batch(void **state)
{
	size_t n = 300 * 1024;
	char *big = malloc(n + 1), *got;
	struct event_log *log = event_log_open(path, 0, 0);

	assert_non_null(big);
	memset(big, 'y', n);
	big[0] = '"';
	big[n - 1] = '"';
	big[n] = 0;
	assert_int_equal(event_log_append(log, "{\"first\":1}", 11), 0);
	assert_int_equal(event_log_append(log, big, n), 0);
	assert_int_equal(event_log_append(log, "{\"last\":1}", 10), 0);
	event_log_close(log);
	got = slurp("");
	assert_int_equal(strlen(got), 12 + n + 1 + 11);
	assert_memory_equal(got, "{\"first\":1}\n\"", 13);
	assert_string_equal(got + 12 + n + 1, "{\"last\":1}\n");
	free(got);
	free(big);
}

#define THREADS    4
#define PER_THREAD 1000

static void *writer(void *arg)
{
	struct event_log *log = arg;
	char line[64];
	static int next_id;

	int id = __atomic_fetch_add(&next_id, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < PER_THREAD; i++) {
		snprintf(line, sizeof(line), "{\"thread\":%d,\"i\":%04d}", id, i);
		if (event_log_write(log, line))
			return (void *)1;
	}
	return NULL;
}

/* Threads writing while the file rotates: every line lands whole, once. */
static void test_threads_and_rotation(void **state)
{
	struct event_log *log = event_log_open(path, 4096, 100);
	pthread_t t[THREADS];
	int seen[THREADS][PER_THREAD] = { 0 };
	int total = 0;

	assert_non_null(log);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, writer, log), 0);
	for (int i = 0; i < THREADS; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		assert_null(ret);
	}
	event_log_close(log);

	for (int n = 0; n <= 100; n++) {
		char suffix[16], *all, *save = NULL;
		suffix[0] = '\0';
		if (n)
			snprintf(suffix, sizeof(suffix), ".%d", n);
		all = slurp(suffix);
		if (!all)
			break;
		assert_true(strlen(all) <= 4096);
		for (char *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			int th, i;
			if (sscanf(l, "{\"thread\":%d,\"i\":%d}", &th, &i) != 2 || th < 0 ||
			    th >= THREADS || i < 0 || i >= PER_THREAD)
				fail_msg("bad line '%s' in %s%s", l, path, suffix);
			seen[th][i]++;
			total++;
		}
		free(all);
	}
	assert_int_equal(total, THREADS * PER_THREAD);
	for (int th = 0; th < THREADS; th++)
		for (int i = 0; i < PER_THREAD; i++)
			assert_int_equal(seen[th][i], 1);
}

/* Writes 7 lines of 40 bytes to path with room for 100 bytes a file: a
 * regular file would rotate three times. */
static void write_past_max(struct event_log_stats *st)
{
	struct event_log *log = event_log_open(path, 100, 2);
	char l[40];

	assert_non_null(log);
	for (int i = 1; i <= 7; i++)
		assert_int_equal(event_log_write(log, line40(i, l)), 0);
	event_log_get_stats(log, st);
	event_log_close(log);
	assert_int_equal(st->lines, 7);
	assert_int_equal(st->rotations, 0);
	assert_int_equal(st->rotate_failures, 0);
	assert_file(".1", NULL);
}

/* `--events /dev/null` once renamed the node's /dev/null to /dev/null.1
 * and made a regular file in its place. A FIFO and a symlink to /dev/null
 * stand in for it here: written to, never renamed. */
static void test_fifo_is_never_rotated(void **state)
{
	struct event_log_stats st;
	char got[512];
	struct stat sb;
	ssize_t n;
	int rd;

	assert_int_equal(mkfifo(path, 0600), 0);
	rd = open(path, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open does not wait */
	assert_true(rd >= 0);
	write_past_max(&st);
	n = read(rd, got, sizeof(got));
	close(rd);
	assert_int_equal(n, 280); /* every line reached the reader */
	assert_int_equal(lstat(path, &sb), 0);
	assert_true(S_ISFIFO(sb.st_mode));
}

static void test_dev_null_is_never_rotated(void **state)
{
	struct event_log_stats st;
	char target[64];
	struct stat sb;
	ssize_t n;

	assert_int_equal(symlink("/dev/null", path), 0);
	write_past_max(&st);
	n = readlink(path, target, sizeof(target) - 1);
	assert_int_equal(n, 9);
	target[n] = 0;
	assert_string_equal(target, "/dev/null");
	assert_int_equal(stat("/dev/null", &sb), 0);
	assert_true(S_ISCHR(sb.st_mode));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rotation_names_and_keep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_existing_file_is_appended_and_counted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_keep_zero_truncates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_rotation_and_newlines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stdout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_failures_are_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failure_then_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_failure, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotation_failure_keeps_writing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_threads_and_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_failure_counts_every_line, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_line_longer_than_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifo_is_never_rotated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dev_null_is_never_rotated, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
