/* The /metrics endpoint, exercised with a raw socket client: status lines,
 * headers and bodies as a scraper or a probe sees them. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>
#include "lib/http_listen.h"
#include "telemetry/metrics_http.h"

struct reply {
	int status;
	char head[16384];
	char body[16384];
};

/* One request over a fresh connection; returns 0 or -errno of connect. */
static int http(int family, uint16_t port, const char *method, const char *path, struct reply *r)
{
	struct sockaddr_storage ss = { 0 };
	struct timeval tv = { .tv_sec = 10 }; /* generous: the machine is shared */
	char req[256], buf[16384];
	size_t got = 0;
	socklen_t len;
	ssize_t n;
	int fd;

	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&ss, len)) {
		int err = -errno;
		close(fd);
		return err;
	}
	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
		 method, path);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += n;
	assert_true(n == 0); /* EOF, not a timeout */
	close(fd);
	buf[got] = '\0';

	char *sep = strstr(buf, "\r\n\r\n");
	assert_non_null(sep);
	*sep = '\0';
	snprintf(r->head, sizeof(r->head), "%s", buf);
	snprintf(r->body, sizeof(r->body), "%s", sep + 4);
	assert_int_equal(sscanf(buf, "HTTP/1.1 %d ", &r->status), 1);
	return 0;
}

static bool has_header(const struct reply *r, const char *line)
{
	char want[256];

	snprintf(want, sizeof(want), "\r\n%s\r\n", line);
	char head[sizeof(r->head) + 2];
	snprintf(head, sizeof(head), "%s\r\n", r->head);
	return strcasestr(head, want) != NULL;
}

static bool ready_flag;
static bool ready(void *ctx, char *reason, size_t len)
{
	if (!ready_flag)
		snprintf(reason, len, "%s", (const char *)ctx);
	return ready_flag;
}

static void test_parse_addr(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const char *bad[] = { "",
			      ":9464",
			      "9464",
			      "localhost:9464",
			      "127.0.0.1",
			      "127.0.0.1:",
			      "127.0.0.1:65536",
			      "127.0.0.1:-1",
			      "127.0.0.1:94x",
			      "::1:9464",
			      "[::1]",
			      "[::1:9464",
			      "[127.0.0.1]:9464",
			      "1.2.3:9464",
			      "[]:1" };

	assert_int_equal(http_parse_addr("127.0.0.1:9464", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9464);
	assert_int_equal(http_parse_addr("0.0.0.0:0", &ss, &len), 0);
	assert_int_equal(http_parse_addr("[::1]:9464", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(http_parse_addr("[::]:65535", &ss, &len), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(http_parse_addr(bad[i], &ss, &len), -EINVAL);
	assert_int_equal(http_parse_addr(NULL, &ss, &len), -EINVAL);
}

static void test_serve(void **state)
{
	struct metrics_registry *reg = metrics_registry_new();
	struct metrics_family *f;
	struct metrics_http *h = NULL, *busy = NULL;
	struct reply r;
	char addr[64];
	uint16_t port;

	assert_int_equal(
		metrics_family_add(reg, METRICS_COUNTER,
				   &(struct metrics_spec){
					   .name = "sandguard_kills_total",
					   .help = "Kills.",
					   .labels = (const char *[]){ "tenant", "rule", NULL } },
				   &f),
		0);
	assert_int_equal(metrics_counter_add(f, (const char *[]){ "acme", "fork" }, 3), 0);

	ready_flag = false;
	assert_int_equal(metrics_http_start("127.0.0.1:0", reg, ready,
					    "egress programs not attached", &h),
			 0);
	port = metrics_http_port(h);
	assert_true(port != 0);

	assert_int_equal(http(AF_INET, port, "GET", "/metrics", &r), 0);
	assert_int_equal(r.status, 200);
	assert_true(has_header(&r, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
	assert_string_equal(r.body, "# HELP sandguard_kills_total Kills.\n"
				    "# TYPE sandguard_kills_total counter\n"
				    "sandguard_kills_total{tenant=\"acme\",rule=\"fork\"} 3\n");

	/* An update shows in the next scrape; a query string is ignored. */
	assert_int_equal(metrics_counter_add(f, (const char *[]){ "acme", "fork" }, 1), 0);
	assert_int_equal(http(AF_INET, port, "GET", "/metrics?x=1", &r), 0);
	assert_non_null(strstr(r.body, "{tenant=\"acme\",rule=\"fork\"} 4\n"));

	assert_int_equal(http(AF_INET, port, "HEAD", "/metrics", &r), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "");

	assert_int_equal(http(AF_INET, port, "GET", "/nope", &r), 0);
	assert_int_equal(r.status, 404);
	assert_int_equal(http(AF_INET, port, "GET", "/metrics/", &r), 0);
	assert_int_equal(r.status, 404);
	assert_int_equal(http(AF_INET, port, "POST", "/metrics", &r), 0);
	assert_int_equal(r.status, 405);
	assert_true(has_header(&r, "Allow: GET, HEAD"));
	assert_int_equal(http(AF_INET, port, "DELETE", "/readyz", &r), 0);
	assert_int_equal(r.status, 405);

	assert_int_equal(http(AF_INET, port, "GET", "/healthz", &r), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok\n");
	assert_int_equal(http(AF_INET, port, "GET", "/readyz", &r), 0);
	assert_int_equal(r.status, 503);
	assert_string_equal(r.body, "not ready: egress programs not attached\n");
	ready_flag = true;
	assert_int_equal(http(AF_INET, port, "GET", "/readyz", &r), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok\n");

	/* The same port twice: a clear EADDRINUSE, the first server unharmed. */
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	assert_int_equal(metrics_http_start(addr, reg, NULL, NULL, &busy), -EADDRINUSE);
	assert_null(busy);
	assert_int_equal(http(AF_INET, port, "GET", "/healthz", &r), 0);

	/* Stopped means the socket is closed, not merely unserved. */
	metrics_http_stop(h);
	assert_int_equal(http(AF_INET, port, "GET", "/metrics", &r), -ECONNREFUSED);
	metrics_registry_free(reg);
}

static void test_ipv6_no_readiness(void **state)
{
	struct metrics_registry *reg = metrics_registry_new();
	struct metrics_http *h = NULL;
	struct reply r;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd < 0) {
		printf("SKIP: ipv6: no IPv6 sockets here: %s\n", strerror(errno));
		metrics_registry_free(reg);
		skip();
	}
	close(fd);
	if (metrics_http_start("[::1]:0", reg, NULL, NULL, &h) == -EADDRNOTAVAIL) {
		printf("SKIP: ipv6: ::1 is not configured on this host\n");
		metrics_registry_free(reg);
		skip();
	}
	assert_non_null(h);
	assert_int_equal(http(AF_INET6, metrics_http_port(h), "GET", "/metrics", &r), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, ""); /* an empty registry is an empty page */
	assert_int_equal(http(AF_INET6, metrics_http_port(h), "GET", "/readyz", &r), 0);
	assert_int_equal(r.status, 404); /* no readiness callback given */
	metrics_http_stop(h);
	metrics_registry_free(reg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_addr),
		cmocka_unit_test(test_serve),
		cmocka_unit_test(test_ipv6_no_readiness),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
