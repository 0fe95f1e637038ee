/* The control protocol without an agent: a real server on a real Unix
 * socket, fake handlers, and clients that behave well and badly. The
 * server is pumped by hand (control_handle never blocks), so each test says
 * exactly when the agent's loop would have run. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "control/control_server.h"

struct fake_agent {
	int registered;
	int status_calls;
	size_t status_bytes; /* size of the "blob" in a status reply */
	char last_tenant[64];
};

static json_t *fake_register(void *ctx, json_t *req)
{
	struct fake_agent *a = ctx;
	const char *tenant = json_string_value(json_object_get(req, "tenant"));

	if (!tenant)
		return control_error("register: expected tenant");
	a->registered++;
	snprintf(a->last_tenant, sizeof(a->last_tenant), "%s", tenant);
	return json_pack("{s:b, s:i}", "ok", 1, "n", a->registered);
}

static json_t *fake_status(void *ctx, json_t *req)
{
	struct fake_agent *a = ctx;
	char *blob = malloc(a->status_bytes + 1);
	json_t *reply;

	a->status_calls++;
	memset(blob, 'x', a->status_bytes);
	blob[a->status_bytes] = 0;
	reply = json_pack("{s:b, s:s}", "ok", 1, "blob", blob);
	free(blob);
	return reply;
}

static const struct control_op fake_ops[] = {
	{ "register", fake_register },
	{ "status", fake_status },
};

struct fixture {
	char dir[64], path[128];
	struct fake_agent agent;
	struct control_server *cs;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/sg-control-test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/agent.sock", f->dir);
	f->agent.status_bytes = 100;
	f->cs = control_open(f->path, fake_ops, 2, &f->agent);
	assert_non_null(f->cs);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	control_close(f->cs);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* What the agent's loop does: wait on the server's fd, then serve. */
static void pump(struct fixture *f, int ms)
{
	struct pollfd p = { .fd = control_fd(f->cs), .events = POLLIN };
	struct timespec end, now;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_nsec += (long)ms * 1000000;
	end.tv_sec += end.tv_nsec / 1000000000;
	end.tv_nsec %= 1000000000;
	do {
		if (poll(&p, 1, 5) > 0)
			control_handle(f->cs);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec ||
		 (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
}

static int client(struct fixture *f)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	strcpy(addr.sun_path, f->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

static void send_text(int fd, const char *text)
{
	assert_int_equal(send(fd, text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
}

/* Read one reply line, pumping the server meanwhile. NULL on EOF or after
 * `ms` without a whole line. Peeks first, so the next line stays queued. */
static json_t *read_reply(struct fixture *f, int fd, int ms)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap), peek[65536];
	json_t *j = NULL;

	for (int waited = 0; waited < ms; waited += 5) {
		ssize_t n;

		pump(f, 5);
		while ((n = recv(fd, peek, sizeof(peek), MSG_DONTWAIT | MSG_PEEK)) > 0) {
			char *nl = memchr(peek, '\n', n);
			size_t take = nl ? (size_t)(nl - peek) + 1 : (size_t)n;

			if (len + take + 1 > cap)
				buf = realloc(buf, cap = 2 * (len + take + 1));
			assert_int_equal(recv(fd, buf + len, take, 0), (ssize_t)take);
			len += take;
			if (nl) {
				buf[len - 1] = 0;
				j = json_loads(buf, 0, NULL);
				free(buf);
				return j;
			}
		}
		if (n == 0)
			break;
	}
	free(buf);
	return NULL;
}

static bool peer_closed(struct fixture *f, int fd, int ms)
{
	char c[4096];

	for (int waited = 0; waited < ms; waited += 5) {
		ssize_t n;

		pump(f, 5);
		while ((n = recv(fd, c, sizeof(c), MSG_DONTWAIT)) > 0)
			;
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
	}
	return false;
}

static void test_ops_dispatched_in_order(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	json_t *r;

	/* Three pipelined requests in one write: three replies, in order. */
	send_text(fd,
		  "{\"op\":\"register\",\"tenant\":\"a\"}\n{\"op\":\"register\",\"tenant\":\"b\"}\n"
		  "{\"op\":\"status\"}\n");
	r = read_reply(f, fd, 2000);
	assert_non_null(r);
	assert_int_equal(json_integer_value(json_object_get(r, "n")), 1);
	json_decref(r);
	r = read_reply(f, fd, 2000);
	assert_int_equal(json_integer_value(json_object_get(r, "n")), 2);
	json_decref(r);
	r = read_reply(f, fd, 2000);
	assert_true(json_is_true(json_object_get(r, "ok")));
	assert_int_equal(strlen(json_string_value(json_object_get(r, "blob"))), 100);
	json_decref(r);
	assert_int_equal(f->agent.registered, 2);
	assert_string_equal(f->agent.last_tenant, "b");
	close(fd);
}

static void test_bad_requests_get_errors(void **state)
{
	struct fixture *f = *state;
	const char *bad[] = { "not json\n", "[1,2]\n", "{\"op\": 5}\n", "{\"op\":\"launch\"}\n",
			      "{\"op\":\"register\"}\n" };
	const char *expect[] = { "expected a JSON object with \"op\"",
				 "expected a JSON object with \"op\"",
				 "expected a JSON object with \"op\"", "unknown op launch",
				 "register: expected tenant" };
	int fd = client(f);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *r;

		send_text(fd, bad[i]);
		r = read_reply(f, fd, 2000);
		assert_non_null(r);
		assert_true(json_is_false(json_object_get(r, "ok")));
		assert_string_equal(json_string_value(json_object_get(r, "error")), expect[i]);
		json_decref(r);
	}
	/* The connection is still good after all of them. */
	send_text(fd, "{\"op\":\"register\",\"tenant\":\"ok\"}\n");
	json_t *r = read_reply(f, fd, 2000);
	assert_true(json_is_true(json_object_get(r, "ok")));
	json_decref(r);
	assert_int_equal(f->agent.registered, 1);
	close(fd);
}

/* A status of several megabytes (a node with thousands of tenants) arrives
 * whole: the server queues it and writes it as the client reads. */
static void test_reply_of_any_size(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	json_t *r;

	f->agent.status_bytes = 5u << 20;
	send_text(fd, "{\"op\":\"status\"}\n");
	r = read_reply(f, fd, 20000);
	assert_non_null(r);
	assert_int_equal(strlen(json_string_value(json_object_get(r, "blob"))), 5u << 20);
	json_decref(r);
	close(fd);
}

/* A client that asks and never reads costs the others nothing: a second
 * client's registration is answered at once, every time, and the silent
 * one is dropped when its backlog passes CONTROL_OUT_MAX. */
static void test_client_that_never_reads(void **state)
{
	struct fixture *f = *state;
	int silent = client(f), good = client(f);
	struct timespec t0, t1;
	char line[64];

	f->agent.status_bytes = 1u << 20;
	for (int i = 0; i < 100; i++)
		send_text(silent, "{\"op\":\"status\"}\n");
	for (int i = 0; i < 20; i++) {
		json_t *r;

		snprintf(line, sizeof(line), "{\"op\":\"register\",\"tenant\":\"t%d\"}\n", i);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		send_text(good, line);
		r = read_reply(f, good, 5000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		assert_non_null(r);
		assert_true(json_is_true(json_object_get(r, "ok")));
		json_decref(r);
		/* Generous on a shared machine; the old server took 1 s per
		 * queued reply here. */
		assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 <
			    500);
	}
	/* Its requests are read only while its backlog is short: the server
	 * built a reply or two for it, not 100 MiB, and it stalls only
	 * itself. */
	pump(f, 50);
	assert_int_equal(f->agent.registered, 20);
	assert_true(f->agent.status_calls >= 1 && f->agent.status_calls <= 3);
	close(good);
	pump(f, 20);
	assert_int_equal(control_clients(f->cs), 1);
	close(silent);
	pump(f, 50);
	assert_int_equal(control_clients(f->cs), 0);
}

static void test_overlong_request_dropped(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	char *big = malloc(CONTROL_LINE_MAX + 10);

	memset(big, 'a', CONTROL_LINE_MAX + 9);
	big[CONTROL_LINE_MAX + 9] = 0;
	/* Written in the background of the pump: the socket buffer is small. */
	for (size_t off = 0; off < CONTROL_LINE_MAX + 9;) {
		ssize_t n = send(fd, big + off, CONTROL_LINE_MAX + 9 - off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			off += n;
		else if (errno == EAGAIN)
			pump(f, 5);
		else
			break;
	}
	assert_true(peer_closed(f, fd, 3000));
	free(big);
	close(fd);
}

static void test_non_root_peer_refused(void **state)
{
	struct fixture *f = *state;
	pid_t pid;
	int status;

	if (getuid() != 0) {
		skip();
		return;
	}
	/* So that the modes are not what refuses it: SO_PEERCRED does. */
	chmod(f->dir, 0755);
	chmod(f->path, 0666);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un addr = { .sun_family = AF_UNIX };
		char c;
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		strcpy(addr.sun_path, f->path);
		if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			_exit(4);
		send(fd, "{\"op\":\"register\",\"tenant\":\"x\"}\n", 31, MSG_NOSIGNAL);
		/* The server closes without an answer (a reset, when it closed
		 * with our request unread). */
		ssize_t r = recv(fd, &c, 1, 0);
		_exit(r == 0 || (r < 0 && errno == ECONNRESET) ? 0 : 5);
	}
	for (int i = 0; i < 400 && waitpid(pid, &status, WNOHANG) == 0; i++)
		pump(f, 5);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(f->agent.registered, 0);
}

/* A full table takes a newcomer by dropping the client idle longest:
 * forgotten connections never lock an executor out. */
static void test_full_table_evicts_idlest(void **state)
{
	struct fixture *f = *state;
	struct rlimit rl = { 4 * CONTROL_MAX_CLIENTS, 4 * CONTROL_MAX_CLIENTS };
	int *fds = calloc(CONTROL_MAX_CLIENTS, sizeof(int)), extra;
	json_t *r;

	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		skip();
		return;
	}
	for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) {
		fds[i] = client(f);
		if (i % 8 == 0) /* fewer than the 16 a pump accepts: the backlog never fills */
			pump(f, 1);
	}
	pump(f, 50);
	assert_int_equal(control_clients(f->cs), CONTROL_MAX_CLIENTS);
	extra = client(f);
	send_text(extra, "{\"op\":\"register\",\"tenant\":\"late\"}\n");
	r = read_reply(f, extra, 3000);
	assert_non_null(r);
	assert_true(json_is_true(json_object_get(r, "ok")));
	json_decref(r);
	assert_true(peer_closed(f, fds[0], 1000)); /* the first, idle longest */
	assert_int_equal(control_clients(f->cs), CONTROL_MAX_CLIENTS);
	for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
		close(fds[i]);
	close(extra);
	free(fds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ops_dispatched_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests_get_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reply_of_any_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_that_never_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlong_request_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_non_root_peer_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_table_evicts_idlest, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
