/* The executor's control client against a real control server (fake
 * handlers, served by a thread as the agent's loop would): a reply of any
 * size is read whole; a late reply to a request that timed out is skipped,
 * never taken for the next request's, and does not cost the connection; a
 * restarted agent is reached again on the next call. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "control/agent_client.h"
#include "control/control_server.h"

struct fake {
	size_t blob; /* bytes of "blob" in a status reply */
	int slow_ms; /* how long "slow" takes */
	int calls;
};

static json_t *fake_status(void *ctx, json_t *req)
{
	struct fake *f = ctx;
	char *blob = malloc(f->blob + 1);
	json_t *reply;

	f->calls++;
	memset(blob, 'x', f->blob);
	blob[f->blob] = 0;
	reply = json_pack("{s:b, s:s, s:s}", "ok", 1, "what", "status", "blob", blob);
	free(blob);
	return reply;
}

/* An agent busy elsewhere: the loop answers late. */
static json_t *fake_slow(void *ctx, json_t *req)
{
	struct fake *f = ctx;

	f->calls++;
	usleep(f->slow_ms * 1000);
	return json_pack("{s:b, s:s}", "ok", 1, "what", "slow");
}

static const struct control_op ops[] = {
	{ "status", fake_status },
	{ "slow", fake_slow },
};

struct fixture {
	char dir[64], path[128];
	struct fake fake;
	struct control_server *cs;
	pthread_t loop;
	volatile bool stop;
};

static void *serve(void *arg)
{
	struct fixture *f = arg;
	struct pollfd p = { .fd = control_fd(f->cs), .events = POLLIN };

	while (!f->stop)
		if (poll(&p, 1, 10) > 0)
			control_handle(f->cs);
	return NULL;
}

static void server_start(struct fixture *f)
{
	f->cs = control_open(f->path, ops, 2, &f->fake);
	assert_non_null(f->cs);
	f->stop = false;
	assert_int_equal(pthread_create(&f->loop, NULL, serve, f), 0);
}

static void server_stop(struct fixture *f)
{
	f->stop = true;
	pthread_join(f->loop, NULL);
	control_close(f->cs);
	f->cs = NULL;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/sg-client-test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/agent.sock", f->dir);
	f->fake.blob = 10;
	server_start(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->cs)
		server_stop(f);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* The "what" of a query's reply, and the size of its blob. */
static const char *query(struct agent_conn *c, const char *op, int timeout_ms, size_t *blob)
{
	static char what[32];
	char *text = NULL;
	json_t *j;

	if (agent_query(c, op, timeout_ms, &text))
		return NULL;
	j = json_loads(text, 0, NULL);
	assert_non_null(j);
	snprintf(what, sizeof(what), "%s", json_string_value(json_object_get(j, "what")));
	if (blob)
		*blob = json_string_length(json_object_get(j, "blob"));
	assert_null(json_object_get(j, "id")); /* the protocol's id is not the caller's business */
	json_decref(j);
	free(text);
	return what;
}

static void test_reply_of_any_size(void **state)
{
	struct fixture *f = *state;
	struct agent_conn *c = agent_connect(f->path);
	size_t blob = 0;

	assert_non_null(c);
	f->fake.blob = 3u << 20; /* 3 MiB: 1,024 tenants' status is ~100 KiB */
	assert_string_equal(query(c, "status", 10000, &blob), "status");
	assert_int_equal(blob, 3u << 20);
	f->fake.blob = 10;
	assert_string_equal(query(c, "status", 10000, &blob), "status");
	assert_int_equal(blob, 10);
	agent_close(c);
}

static void test_late_reply_skipped(void **state)
{
	struct fixture *f = *state;
	struct agent_conn *c = agent_connect(f->path);
	char *text = NULL;

	assert_non_null(c);
	f->fake.slow_ms = 300;
	assert_int_equal(agent_query(c, "slow", 50, &text), -ECOMM); /* timed out */
	/* The late "slow" reply arrives first: it is skipped, and this call
	 * gets its own reply, on the same connection. */
	assert_string_equal(query(c, "status", 5000, NULL), "status");
	assert_int_equal(control_clients(f->cs), 1);
	/* Several in a row. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(agent_query(c, "slow", 20, &text), -ECOMM);
	assert_string_equal(query(c, "status", 5000, NULL), "status");
	f->fake.slow_ms = 0;
	assert_string_equal(query(c, "slow", 5000, NULL), "slow");
	assert_int_equal(control_clients(f->cs), 1);
	agent_close(c);
}

static void test_reconnect_after_restart(void **state)
{
	struct fixture *f = *state;
	struct agent_conn *c = agent_connect(f->path);
	char *text = NULL;

	assert_non_null(c);
	assert_string_equal(query(c, "status", 5000, NULL), "status");
	server_stop(f); /* the agent stops (its socket goes) */
	assert_int_equal(agent_query(c, "status", 500, &text), -ECOMM);
	server_start(f); /* and a new one starts on the same path */
	assert_string_equal(query(c, "status", 5000, NULL), "status");
	/* Restarted while the connection was idle: the next call notices. */
	server_stop(f);
	server_start(f);
	assert_string_equal(query(c, "status", 5000, NULL), "status");
	agent_close(c);
}

static void test_no_agent(void **state)
{
	struct fixture *f = *state;
	char path[200];

	snprintf(path, sizeof(path), "%s/nobody.sock", f->dir);
	assert_null(agent_connect(path));
	assert_int_equal(agent_query(NULL, "status", 100, &(char *){ NULL }), -ENOTCONN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reply_of_any_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_reply_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect_after_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_agent, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
