/* The cross-process first-come, first-served line (lib/ticket_queue.h):
 * waiters are served in arrival order; one that gives up (its queue
 * timeout) or dies leaves its place without holding up those behind it,
 * and a stopped one holds them up only until its own timeout; a
 * caller that does not wait never takes what a waiter waits for.
 *
 * The resource is one flock'd file; each waiter is a process. A waiter
 * joins only after the one before it is seen in the line, so arrival order
 * is known. Served waiters append their letter to a pipe. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "tmp_dir.h"
#include "lib/ticket_queue.h"
#include "queue_lines.h"

#define LONG_WAIT_MS 20000 /* a bound for failures only: nothing waits this long */

static char tmp[64], res[128];
static int served[2] = { -1, -1 };
static int held = -1; /* the test's own hold on the resource */
/* The next waiter's caller: it watches caller[1] (ticket_queue_watch());
 * the test hangs up by closing caller[0]. */
static int caller[2] = { -1, -1 };

static int setup(void **state)
{
	snprintf(tmp, sizeof(tmp), "/tmp/sg-test-queue-XXXXXX");
	assert_non_null(mkdtemp(tmp));
	snprintf(res, sizeof(res), "%s/resource", tmp);
	return 0;
}

static int teardown(void **state)
{
	tmp_dir_remove(tmp);
	return 0;
}

/* The resource: held while *fd >= 0. */
static int try_take(void *arg)
{
	int *fd = arg;

	*fd = open(res, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*fd < 0)
		return -errno;
	if (!flock(*fd, LOCK_EX | LOCK_NB))
		return 0;
	close(*fd);
	*fd = -1;
	return -EBUSY;
}

static void give_back(int *fd)
{
	close(*fd);
	*fd = -1;
	ticket_queue_ring(tmp);
}

static int in_line(void)
{
	return queue_waiting(tmp);
}

/* How many waiters in line hold an earlier ticket than `pid`'s (-1: pid
 * is not in line). */
static int place_of(pid_t pid)
{
	unsigned long long seq[64], its = 0;
	char q[160];
	struct dirent *e;
	int n = 0, found = 0, place = 0, p;
	DIR *d;

	snprintf(q, sizeof(q), "%s/queue", tmp);
	assert_non_null(d = opendir(q));
	while ((e = readdir(d)) && n < 64)
		if (sscanf(e->d_name, "t-%16llx-%*16[0-9a-f]-%d-", &seq[n], &p) == 2) {
			if (p == pid) {
				its = seq[n];
				found = 1;
			}
			n++;
		}
	closedir(d);
	for (int i = 0; i < n; i++)
		place += seq[i] < its;
	return found ? place : -1;
}

static void until_in_line(int n)
{
	queue_until_waiting(tmp, n);
}

/* A waiter: takes the resource within wait_ms, reports `letter`, gives it
 * back. Exit 0 served, 2 timed out, 1 anything else. */
static pid_t waiter(char letter, uint64_t wait_ms)
{
	pid_t pid = fork();
	int fd = -1, err;

	assert_true(pid >= 0);
	if (pid)
		return pid;
	if (held >= 0)
		close(held); /* the test's lock is not the waiter's */
	close(served[0]);
	if (caller[0] >= 0)
		close(caller[0]); /* the test's end: only its close hangs up */
	if (caller[1] >= 0)
		ticket_queue_watch(caller[1]);
	err = ticket_queue_take(tmp, wait_ms, try_take, &fd);
	if (err)
		_exit(err == -ETIMEDOUT ? 2 : err == -ECONNABORTED ? 3 : 1);
	if (write(served[1], &letter, 1) != 1)
		_exit(1);
	give_back(&fd);
	_exit(0);
}

static int exit_code(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void read_served(const char *want)
{
	char got[32] = "";
	size_t n = strlen(want);

	close(served[1]);
	served[1] = -1;
	for (size_t off = 0; off < n;) {
		ssize_t r = read(served[0], got + off, n - off);
		assert_true(r > 0);
		off += (size_t)r;
	}
	assert_string_equal(got, want);
	close(served[0]);
	served[0] = -1;
}

static void test_served_in_arrival_order(void **state)
{
	const char *letters = "ABCDEFGH";
	pid_t pids[8];

	assert_int_equal(pipe(served), 0);
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &held), 0);
	for (int i = 0; i < 8; i++) {
		pids[i] = waiter(letters[i], LONG_WAIT_MS);
		until_in_line(i + 1);
	}
	for (int i = 0; i < 8; i++) /* the line's tickets are in arrival order */
		assert_int_equal(place_of(pids[i]), i);
	give_back(&held);
	for (int i = 0; i < 8; i++)
		assert_int_equal(exit_code(pids[i]), 0);
	read_served(letters);
	assert_int_equal(in_line(), 0);
}

/* The resource held by the test, and A, B, C in line in that order; B
 * waits at most b_wait_ms. */
static void line_up(pid_t w[3], uint64_t b_wait_ms)
{
	assert_int_equal(pipe(served), 0);
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &held), 0);
	for (int i = 0; i < 3; i++) {
		w[i] = waiter("ABC"[i], i == 1 ? b_wait_ms : LONG_WAIT_MS);
		until_in_line(i + 1);
	}
}

/* B gives up (its queue timeout) while A is ahead of it and C behind: C is
 * served after A, not held up by B's empty place. */
static void test_give_up_leaves_the_line(void **state)
{
	pid_t w[3];

	line_up(w, 3000);
	assert_int_equal(exit_code(w[1]), 2);
	until_in_line(2);
	give_back(&held);
	assert_int_equal(exit_code(w[0]), 0);
	assert_int_equal(exit_code(w[2]), 0);
	read_served("AC");
}

/* A waiter killed in the middle of the line: those behind it move up. */
static void test_dead_waiter_leaves_the_line(void **state)
{
	pid_t w[3];

	line_up(w, LONG_WAIT_MS);
	kill(w[1], SIGKILL);
	assert_int_equal(waitpid(w[1], NULL, 0), w[1]);
	give_back(&held);
	assert_int_equal(exit_code(w[0]), 0);
	assert_int_equal(exit_code(w[2]), 0);
	read_served("AC");
	assert_int_equal(in_line(), 0); /* B's file, too, is gone */
}

/* B's caller hangs up while B waits in the middle of the line: B leaves
 * at once (the resource is still held), and A and C are served. */
static void test_hung_up_waiter_leaves_the_line(void **state)
{
	pid_t w[3];

	assert_int_equal(pipe(served), 0);
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &held), 0);
	for (int i = 0; i < 3; i++) {
		if (i == 1)
			assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, caller), 0);
		w[i] = waiter("ABC"[i], LONG_WAIT_MS);
		if (i == 1) {
			close(caller[1]);
			caller[1] = -1;
		}
		until_in_line(i + 1);
	}
	close(caller[0]);
	caller[0] = -1;
	assert_int_equal(exit_code(w[1]), 3); /* -ECONNABORTED, held still */
	until_in_line(2);
	give_back(&held);
	assert_int_equal(exit_code(w[0]), 0);
	assert_int_equal(exit_code(w[2]), 0);
	read_served("AC");
	assert_int_equal(in_line(), 0);
}

/* B is stopped (SIGSTOP) in the middle of the line: once its own queue
 * timeout has passed, C goes past it instead of waiting for it; B, let go
 * on, has timed out. */
static void test_stopped_waiter_held_up_the_line_only_until_its_timeout(void **state)
{
	pid_t w[3];

	line_up(w, 2000);
	assert_int_equal(kill(w[1], SIGSTOP), 0);
	give_back(&held);
	assert_int_equal(exit_code(w[0]), 0);
	assert_int_equal(exit_code(w[2]), 0);
	read_served("AC");
	assert_int_equal(kill(w[1], SIGCONT), 0);
	assert_int_equal(exit_code(w[1]), 2);
	assert_int_equal(in_line(), 0);
}

/* A caller that does not wait never takes what a waiter waits for, even
 * when it is free at that moment (released without a ring). A, once
 * served, keeps the resource until told, so the answer is -EBUSY whether
 * or not A has taken it yet. */
static void test_no_wait_does_not_jump_the_line(void **state)
{
	int other = -1, go[2], fd = -1;
	char letter;
	pid_t a;

	assert_int_equal(pipe(served), 0);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &held), 0);
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &other), -EBUSY);
	a = fork();
	assert_true(a >= 0);
	if (a == 0) {
		close(held);
		if (ticket_queue_take(tmp, LONG_WAIT_MS, try_take, &fd) ||
		    write(served[1], "A", 1) != 1 || read(go[0], &letter, 1) != 1)
			_exit(1);
		give_back(&fd);
		_exit(0);
	}
	until_in_line(1);
	close(held); /* free, but A is waiting for it */
	held = -1;
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &other), -EBUSY);
	assert_int_equal(other, -1);
	ticket_queue_ring(tmp);
	assert_int_equal(read(served[0], &letter, 1), 1);
	assert_int_equal(letter, 'A');
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(exit_code(a), 0);
	assert_int_equal(ticket_queue_take(tmp, 0, try_take, &other), 0);
	give_back(&other);
	close(go[0]);
	close(go[1]);
	close(served[0]);
	close(served[1]);
}

/* A try's own failure ends the wait with it. */
static int try_fails(void *arg)
{
	(void)arg;
	return -EACCES;
}

static void test_failure_is_returned(void **state)
{
	assert_int_equal(ticket_queue_take(tmp, 1000, try_fails, NULL), -EACCES);
	assert_int_equal(in_line(), 0);
	assert_int_equal(ticket_queue_take("/nonexistent/sg-queue", 0, try_fails, NULL), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_served_in_arrival_order),
		cmocka_unit_test(test_give_up_leaves_the_line),
		cmocka_unit_test(test_dead_waiter_leaves_the_line),
		cmocka_unit_test(test_hung_up_waiter_leaves_the_line),
		cmocka_unit_test(test_stopped_waiter_held_up_the_line_only_until_its_timeout),
		cmocka_unit_test(test_no_wait_does_not_jump_the_line),
		cmocka_unit_test(test_failure_is_returned),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
