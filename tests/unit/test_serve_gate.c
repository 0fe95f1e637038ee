/* The HTTP server's admission: the server and tenant caps, the bounded
 * queue and its per-tenant share, FIFO order, a tenant at its cap not
 * holding back others, the wait bound, shutdown waking every waiter, a
 * waiter whose client left giving its place up, and Retry-After from the
 * running requests' due times. Threads that must be waiting are awaited
 * through gate_counts(), never by sleeping a guessed time. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
	atomic_bool gone; /* what the client-gone probe answers */
	atomic_int asked; /* how often the probe was asked */
	enum gate_verdict v;
	struct gate_ticket ticket;
	int order; /* when it got in, among all waiters */
};

/* Tickets of requests entered by the test's own thread, by name. */
static struct gate_ticket held[16];
static const char *held_by[16];

static enum gate_verdict enter(struct serve_gate *g, const char *tenant, uint32_t cap,
			       uint64_t wait_ms)
{
	struct gate_wait how = { .wait_ms = wait_ms, .expected_ms = 1000 };

	for (int i = 0; i < 16; i++) {
		if (held_by[i])
			continue;
		enum gate_verdict v = gate_enter(g, tenant, cap, &how, &held[i]);
		if (v == GATE_OK)
			held_by[i] = tenant;
		return v;
	}
	fail_msg("too many held tickets");
	return GATE_CLOSED;
}

/* Leave with one ticket of `tenant` held by the test's thread. */
static void leave(struct serve_gate *g, const char *tenant)
{
	for (int i = 0; i < 16; i++) {
		if (held_by[i] && !strcmp(held_by[i], tenant)) {
			gate_leave(g, &held[i]);
			held_by[i] = NULL;
			return;
		}
	}
	fail_msg("no ticket of %s held", tenant);
}

static bool probe_gone(void *arg)
{
	struct waiter *w = arg;

	atomic_fetch_add(&w->asked, 1);
	return atomic_load(&w->gone);
}

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int next_order;

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	struct gate_wait how = {
		.wait_ms = w->wait_ms, .expected_ms = 1000, .gone = probe_gone, .gone_arg = w
	};

	w->v = gate_enter(w->g, w->tenant, w->cap, &how, &w->ticket);
	pthread_mutex_lock(&order_lock);
	w->order = w->v == GATE_OK ? ++next_order : 0;
	pthread_mutex_unlock(&order_lock);
	return NULL;
}

static void start(struct waiter *w, struct serve_gate *g, const char *tenant, uint32_t cap,
		  uint64_t wait_ms)
{
	memset(w, 0, sizeof(*w));
	w->g = g;
	w->tenant = tenant;
	w->cap = cap;
	w->wait_ms = wait_ms;
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

	assert_int_equal(enter(g, "a", 2, 0), GATE_OK);
	assert_int_equal(enter(g, "a", 2, 0), GATE_OK);
	assert_int_equal(enter(g, "a", 2, 0), GATE_TENANT_FULL); /* its own cap */
	assert_int_equal(enter(g, "b", 2, 0), GATE_OK);
	assert_int_equal(enter(g, "c", 2, 0), GATE_SERVER_FULL); /* the server's cap */
	leave(g, "a");
	assert_int_equal(enter(g, "c", 2, 0), GATE_OK);
	gate_counts(g, &r, &w);
	assert_int_equal(r, 3);
	assert_int_equal(w, 0);
	leave(g, "a");
	leave(g, "b");
	leave(g, "c");
	gate_counts(g, &r, &w);
	assert_int_equal(r, 0);
	gate_free(g);
}

static void test_wait_times_out(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct timespec t0, t1;
	long ms;

	assert_int_equal(enter(g, "a", 5, 0), GATE_OK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(enter(g, "b", 5, 50), GATE_SERVER_FULL);
	assert_int_equal(enter(g, "a", 1, 50), GATE_TENANT_FULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 100); /* both waited their bound */
	leave(g, "a");
	gate_free(g);
}

static void test_queue_bounds(void **state)
{
	struct serve_gate *g = gate_new(1, 3, 2);
	struct waiter w[3];

	assert_int_equal(enter(g, "a", 5, 0), GATE_OK);
	start(&w[0], g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 1); /* queued in this order */
	start(&w[1], g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 2);
	/* b's share of the queue (2) is full; the queue (3) is not. */
	assert_int_equal(enter(g, "b", 5, LONG_WAIT_MS), GATE_TENANT_QUEUE);
	start(&w[2], g, "c", 5, LONG_WAIT_MS);
	await_counts(g, 1, 3);
	assert_int_equal(enter(g, "d", 5, LONG_WAIT_MS), GATE_SERVER_QUEUE);
	/* The queue is full, but a is at its own cap anyway: a's fault, 429. */
	assert_int_equal(enter(g, "a", 1, LONG_WAIT_MS), GATE_TENANT_FULL);
	/* Each leave lets exactly the next one in, in arrival order. */
	for (int i = 0; i < 3; i++) {
		if (i == 0)
			leave(g, "a");
		else
			gate_leave(g, &w[i - 1].ticket);
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].v, GATE_OK);
	}
	assert_true(w[0].order < w[1].order && w[1].order < w[2].order);
	gate_leave(g, &w[2].ticket);
	await_counts(g, 0, 0);
	gate_free(g);
}

static void test_tenant_at_cap_does_not_block_others(void **state)
{
	struct serve_gate *g = gate_new(3, 10, 10);
	struct waiter blocked, other;

	assert_int_equal(enter(g, "a", 1, 0), GATE_OK);
	assert_int_equal(enter(g, "x", 5, 0), GATE_OK);
	assert_int_equal(enter(g, "y", 5, 0), GATE_OK); /* the server is full */
	start(&blocked, g, "a", 1, LONG_WAIT_MS);       /* first in line, a is at its cap */
	await_counts(g, 3, 1);
	start(&other, g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 3, 2);
	/* A place frees: b goes although a is ahead, since a's own cap holds a back. */
	leave(g, "x");
	pthread_join(other.thread, NULL);
	assert_int_equal(other.v, GATE_OK);
	await_counts(g, 3, 1);
	leave(g, "a");
	pthread_join(blocked.thread, NULL);
	assert_int_equal(blocked.v, GATE_OK);
	gate_leave(g, &blocked.ticket);
	gate_leave(g, &other.ticket);
	leave(g, "y");
	await_counts(g, 0, 0);
	gate_free(g);
}

static void test_newcomer_does_not_jump_the_queue(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct waiter first;

	assert_int_equal(enter(g, "a", 5, 0), GATE_OK);
	start(&first, g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 1);
	leave(g, "a");
	/* Whether or not b has woken yet, the place is b's. */
	assert_int_equal(enter(g, "c", 5, 0), GATE_SERVER_FULL);
	pthread_join(first.thread, NULL);
	assert_int_equal(first.v, GATE_OK);
	gate_leave(g, &first.ticket);
	gate_free(g);
}

static void test_close_wakes_waiters(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct waiter w[2];

	assert_int_equal(enter(g, "a", 5, 0), GATE_OK);
	start(&w[0], g, "b", 5, LONG_WAIT_MS);
	start(&w[1], g, "c", 5, LONG_WAIT_MS);
	await_counts(g, 1, 2);
	gate_close(g);
	for (int i = 0; i < 2; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].v, GATE_CLOSED);
	}
	assert_int_equal(enter(g, "d", 5, 0), GATE_CLOSED);
	leave(g, "a"); /* the running one still ends normally */
	await_counts(g, 0, 0);
	gate_free(g);
}

static void test_client_gone_gives_the_place_up(void **state)
{
	struct serve_gate *g = gate_new(1, 10, 10);
	struct waiter w[2];

	assert_int_equal(enter(g, "a", 5, 0), GATE_OK);
	start(&w[0], g, "b", 5, LONG_WAIT_MS);
	await_counts(g, 1, 1);
	start(&w[1], g, "c", 5, LONG_WAIT_MS);
	await_counts(g, 1, 2);
	/* b's client hangs up: b leaves the line without ever running. */
	atomic_store(&w[0].gone, true);
	pthread_join(w[0].thread, NULL);
	assert_int_equal(w[0].v, GATE_GONE);
	assert_true(atomic_load(&w[0].asked) >= 1);
	await_counts(g, 1, 1);
	/* c, behind it, now gets the next place. */
	leave(g, "a");
	pthread_join(w[1].thread, NULL);
	assert_int_equal(w[1].v, GATE_OK);
	gate_leave(g, &w[1].ticket);
	await_counts(g, 0, 0);
	gate_free(g);
}

static void test_retry_after_from_running(void **state)
{
	struct serve_gate *g = gate_new(4, 10, 10);
	struct gate_wait soon = { .expected_ms = 3000 }, later = { .expected_ms = 40000 },
			 forever = { .expected_ms = 600000 };
	struct gate_ticket t[3];
	unsigned s;

	assert_int_equal(gate_retry_after_s(g), 1); /* nothing runs: at once */
	assert_int_equal(gate_enter(g, "a", 5, &later, &t[0]), GATE_OK);
	assert_int_equal(gate_enter(g, "a", 5, &forever, &t[1]), GATE_OK);
	s = gate_retry_after_s(g);
	assert_true(s >= 39 && s <= 40); /* the first due to end */
	assert_int_equal(gate_enter(g, "b", 5, &soon, &t[2]), GATE_OK);
	s = gate_retry_after_s(g);
	assert_true(s >= 2 && s <= 3);
	gate_leave(g, &t[2]);
	gate_leave(g, &t[0]);
	assert_int_equal(gate_retry_after_s(g), 60); /* capped */
	gate_leave(g, &t[1]);
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
		cmocka_unit_test(test_client_gone_gives_the_place_up),
		cmocka_unit_test(test_retry_after_from_running),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
