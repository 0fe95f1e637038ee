/* Quiet moments for the warm pool's own work (src/pool/pool_quiet.h): a
 * waiter goes on at once when no caller is on its path; a caller on its
 * path holds it until that caller leaves (or its bound passes, or the
 * pool stops); a thread counts once however many sandboxes it takes; a
 * thread that never entered changes nothing by leaving. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include "pool/pool_quiet.h"

#define LONG_WAIT_MS 60000 /* a bound for failures only: nothing waits this long */

struct waiter {
	struct pool_quiet *q;
	uint64_t max_ms;
	bool quiet;
	pthread_t t;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->quiet = pool_quiet_wait(w->q, w->max_ms);
	return NULL;
}

/* This thread on its path, and a waiter for quiet that waits as long as
 * it is (a bound it never reaches). */
static void on_path_with_waiter(struct pool_quiet *q, struct waiter *w)
{
	pool_quiet_init(q);
	pool_quiet_enter(q);
	*w = (struct waiter){ .q = q, .max_ms = LONG_WAIT_MS };
	assert_int_equal(pthread_create(&w->t, NULL, wait_thread, w), 0);
}

static void test_quiet_at_once(void **state)
{
	struct pool_quiet q;

	(void)state;
	pool_quiet_init(&q);
	assert_true(pool_quiet_wait(&q, LONG_WAIT_MS));
	/* Leaving without entering changes nothing. */
	pool_quiet_leave(&q);
	assert_int_equal(q.on_path, 0);
	assert_true(pool_quiet_wait(&q, LONG_WAIT_MS));
	pool_quiet_destroy(&q);
}

static void test_once_per_thread(void **state)
{
	struct pool_quiet q;

	(void)state;
	pool_quiet_init(&q);
	pool_quiet_enter(&q);
	pool_quiet_enter(&q); /* a second sandbox for the same caller */
	assert_int_equal(q.on_path, 1);
	pool_quiet_leave(&q);
	assert_int_equal(q.on_path, 0);
	pool_quiet_leave(&q); /* twice: no underflow */
	assert_int_equal(q.on_path, 0);
	pool_quiet_destroy(&q);
}

static void test_bound_passes(void **state)
{
	struct pool_quiet q;

	(void)state;
	pool_quiet_init(&q);
	pool_quiet_enter(&q);
	/* Never quiet: the waiter gives up at its bound, and says so. */
	assert_false(pool_quiet_wait(&q, 20));
	pool_quiet_leave(&q);
	pool_quiet_destroy(&q);
}

static void *caller_thread(void *arg)
{
	struct pool_quiet *q = arg;

	pool_quiet_enter(q);
	return NULL; /* on its path until the test leaves for it below */
}

static void test_leave_wakes(void **state)
{
	struct pool_quiet q;
	struct waiter w;

	(void)state;
	on_path_with_waiter(&q, &w);
	pool_quiet_leave(&q);
	assert_int_equal(pthread_join(w.t, NULL), 0);
	assert_true(w.quiet);
	pool_quiet_destroy(&q);
}

static void test_two_callers(void **state)
{
	struct pool_quiet q;
	pthread_t other;

	(void)state;
	pool_quiet_init(&q);
	pool_quiet_enter(&q);
	/* Another thread's caller counts on its own. */
	assert_int_equal(pthread_create(&other, NULL, caller_thread, &q), 0);
	assert_int_equal(pthread_join(other, NULL), 0);
	assert_int_equal(q.on_path, 2);
	pool_quiet_leave(&q);
	assert_false(pool_quiet_wait(&q, 20)); /* the other is still on its path */
	pool_quiet_destroy(&q);
}

static void test_stop_wakes(void **state)
{
	struct pool_quiet q;
	struct waiter w;

	(void)state;
	on_path_with_waiter(&q, &w);
	pool_quiet_stop(&q);
	assert_int_equal(pthread_join(w.t, NULL), 0);
	assert_false(w.quiet);
	/* Stopped: no more waiting at all. */
	assert_false(pool_quiet_wait(&q, LONG_WAIT_MS));
	pool_quiet_leave(&q);
	pool_quiet_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet_at_once), cmocka_unit_test(test_once_per_thread),
		cmocka_unit_test(test_bound_passes),  cmocka_unit_test(test_leave_wakes),
		cmocka_unit_test(test_two_callers),   cmocka_unit_test(test_stop_wakes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
