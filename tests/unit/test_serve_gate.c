/* The HTTP server's admission: the server and tenant caps, the bounded
 * queue and its per-tenant share, FIFO order, a tenant at its cap not
 * holding back others, the wait bound, and shutdown waking every waiter.
 * Threads that must be waiting are awaited through gate_counts(), never
 * by sleeping a guessed time. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "serve/serve_internal.h"

#define LONG_WAIT_MS 60000 /* "forever" for a test: someone else ends the wait */

struct waiter {
	pthread_t thread;
	struct serve_gate *g;
	const char *tenant;
	uint32_t cap;
	uint64_t wait_ms;
	enum gate_verdict v;
	int order; /* when it got in, among all waiters */
};

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int next_order;

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	w->v = gate_enter(w->g, w->tenant, w->cap, w->wait_ms);
	pthread_mutex_lock(&order_lock);
	w->order = w->v == GATE_OK ? ++next_order : 0;
	pthread_mutex_unlock(&order_lock);
	return NULL;
}

static void start(struct waiter *w, struct serve_gate *g, const char *tenant, uint32_t cap,
		  uint64_t wait_ms)
{
	*w = (struct waiter){ .g = g, .tenant = tenant, .cap = cap, .wait_ms = wait_ms };
	assert_int_equal(pthread_create(&w->thread, NULL, wait_main, w), 0);
}

/* Until `waiting` requests wait and `running` run (10 s at most). */
static void await_counts(struct serve_gate *g, uint32_t running, uint32_t waiting)
{
	uint32_t r = 0, w = 0;

	for (int i = 0; i < 10000; i++) {
		gate_counts(g, &r, &w);
		if (r == running && w == waiting)
			return;
		usleep(1000);
	}
	fail_msg("gate counts: %u running %u waiting, want %u and %u", r, w, running, waiting);
}

static void test_caps_without_waiting(void **state)
{
	struct serve_gate *g = gate_new(3, 10, 10);
	uint32_t r, w;

	assert_int_equal(gate_enter(g, "a", 2, 0), GATE_OK);
	assert_int_equal(gate_enter(g, "a", 2, 0), GATE_OK);
	assert_int_equal(gate_enter(g, "a", 2, 0), GATE_TENANT_FULL); /* its own cap */
	assert_int_equal(gate_enter(g, "b", 2, 0), GATE_OK);
	assert_int_equal(gate_enter(g, "c", 2, 0), GATE_SERVER_FULL); /* the server's cap */
	gate_leave(g, "a");
	assert_int_equal(gate_enter(g, "c", 2, 0), GATE_OK);
	gate_counts(g, &r, &w);
	assert_int_equal(r, 3);
	assert_int_equal(w, 0);
	gate_leave(g, "a");
	gate_leave(g, "b");
	gate_leave(g, "c");
	gate_leave(g, "nobody"); /* a stray leave changes nothing */
	gate_counts(g, &r, &w);
	assert_int_equal(r, 0);
	gate_free(g);
}

static void test_wait_times_out(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct timespec t0, t1;
	long ms;

	assert_int_equal(gate_enter(g, "a", 5, 0), GATE_OK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(gate_enter(g, "b", 5, 50), GATE_SERVER_FULL);
	assert_int_equal(gate_enter(g, "a", 1, 50), GATE_TENANT_FULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 100); /* both waited their bound */
	gate_leave(g, "a");
	gate_free(g);
}

static void test_queue_bounds(void **state)
{
	struct serve_gate *g = gate_new(1, 3, 2);
	struct waiter w[3];

	assert_int_equal(gate_enter(g, "a", 5, 0), GATE_OK);
	start(&w[0], g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 1); /* queued in this order */
	start(&w[1], g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 2);
	/* b's share of the queue (2) is full; the queue (3) is not. */
	assert_int_equal(gate_enter(g, "b", 5, LONG_WAIT_MS), GATE_TENANT_QUEUE);
	start(&w[2], g, "c", 5, LONG_WAIT_MS);
	await_counts(g, 1, 3);
	assert_int_equal(gate_enter(g, "d", 5, LONG_WAIT_MS), GATE_SERVER_QUEUE);
	/* The queue is full, but a is at its own cap anyway: a's fault, 429. */
	assert_int_equal(gate_enter(g, "a", 1, LONG_WAIT_MS), GATE_TENANT_FULL);
	/* Each leave lets exactly the next one in, in arrival order. */
	for (int i = 0; i < 3; i++) {
		gate_leave(g, i == 0 ? "a" : w[i - 1].tenant);
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].v, GATE_OK);
	}
	assert_true(w[0].order < w[1].order && w[1].order < w[2].order);
	gate_leave(g, "c");
	await_counts(g, 0, 0);
	gate_free(g);
}

static void test_tenant_at_cap_does_not_block_others(void **state)
{
	struct serve_gate *g = gate_new(3, 10, 10);
	struct waiter blocked, other;

	assert_int_equal(gate_enter(g, "a", 1, 0), GATE_OK);
	assert_int_equal(gate_enter(g, "x", 5, 0), GATE_OK);
	assert_int_equal(gate_enter(g, "y", 5, 0), GATE_OK); /* the server is full */
	start(&blocked, g, "a", 1, LONG_WAIT_MS);            /* first in line, a is at its cap */
	await_counts(g, 3, 1);
	start(&other, g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 3, 2);
	/* A place frees: b goes although a is ahead, since a's own cap holds a back. */
	gate_leave(g, "x");
	pthread_join(other.thread, NULL);
	assert_int_equal(other.v, GATE_OK);
	await_counts(g, 3, 1);
	gate_leave(g, "a");
	pthread_join(blocked.thread, NULL);
	assert_int_equal(blocked.v, GATE_OK);
	gate_leave(g, "a");
	gate_leave(g, "b");
	gate_leave(g, "y");
	await_counts(g, 0, 0);
	gate_free(g);
}

static void test_newcomer_does_not_jump_the_queue(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct waiter first;

	assert_int_equal(gate_enter(g, "a", 5, 0), GATE_OK);
	start(&first, g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 1);
	gate_leave(g, "a");
	/* Whether or not b has woken yet, the place is b's. */
	assert_int_equal(gate_enter(g, "c", 5, 0), GATE_SERVER_FULL);
	pthread_join(first.thread, NULL);
	assert_int_equal(first.v, GATE_OK);
	gate_leave(g, "b");
	gate_free(g);
}

static void test_close_wakes_waiters(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct waiter w[2];

	assert_int_equal(gate_enter(g, "a", 5, 0), GATE_OK);
	start(&w[0], g, "b", 5, LONG_WAIT_MS);
	start(&w[1], g, "c", 5, LONG_WAIT_MS);
	await_counts(g, 1, 2);
	gate_close(g);
	for (int i = 0; i < 2; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].v, GATE_CLOSED);
	}
	assert_int_equal(gate_enter(g, "d", 5, 0), GATE_CLOSED);
	gate_leave(g, "a"); /* the running one still ends normally */
	await_counts(g, 0, 0);
	gate_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caps_without_waiting),
		cmocka_unit_test(test_wait_times_out),
		cmocka_unit_test(test_queue_bounds),
		cmocka_unit_test(test_tenant_at_cap_does_not_block_others),
		cmocka_unit_test(test_newcomer_does_not_jump_the_queue),
		cmocka_unit_test(test_close_wakes_waiters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
