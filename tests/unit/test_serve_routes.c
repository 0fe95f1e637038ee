/* Whole requests through serve_handle() over a fake sandbox, no sockets:
 * routing and methods, where the tenant comes from, what is booked (every
 * run, a policy failure; never a bad request), the SandboxFusion response
 * of each ending, the native API's result and HTTP status, admission
 * refusals with Retry-After (504 on /run_code, 429/503 on /v1/...), a
 * /run_code that can no longer finish within what its client waits (504
 * before it runs), and a queued request whose client left (dropped, never
 * run or booked). Tokens are in test_serve_auth.c. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "lib/clock.h"
#include "lib/log.h"
#include "serve/serve_internal.h"
#include "serve_fixture.h"

static char tmp[64], policies[128];
static struct serve srv;

/* ---- the fake sandbox: one scripted ending for every run ------------- */

static struct sandbox_result next;
static int next_rc, runs;
static char last_argv0[256], last_file[64];

static int fake_run(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	runs++;
	snprintf(last_argv0, sizeof(last_argv0), "%s", spec->argv[0]);
	snprintf(last_file, sizeof(last_file), "%s", spec->n_files ? spec->files[0].path : "");
	*r = next;
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "fake-%d", runs);
	if (next_rc < 0) {
		snprintf(r->detail, sizeof(r->detail),
			 "cannot create cgroup: Read-only file system");
		return next_rc;
	}
	r->out = strdup(next.out ? next.out : "");
	r->out_len = strlen(r->out);
	r->err = strdup("");
	return 0;
}

static void script(int rc, enum sandbox_end end, int code, const char *out)
{
	next = (struct sandbox_result){ .end = end,
					.exit_code = end == SB_EXITED ? code : 0,
					.signal = end == SB_SIGNALED ? code : 0,
					.rule = -1,
					.out = (char *)out,
					.wall_ms = 12 };
	next_rc = rc;
}

/* ---- fixtures --------------------------------------------------------- */

static void write_file(const char *name, const char *text)
{
	fixture_write(policies, name, text, 0644);
}

static int setup(void **state)
{
	snprintf(tmp, sizeof(tmp), "/tmp/sg-test-serve-XXXXXX");
	serve_fixture_dirs(tmp, policies, sizeof(policies));
	write_file(
		"acme.json",
		"{\"limits\": {\"timeout_ms\": 4000, \"concurrency\": 1, \"on_excess\": \"refuse\"},"
		" \"failure\": {\"mode\": \"skip\", \"max_retries\": 0}}");
	write_file("broken.json", "{\"limits\": {\"timeout_ms\": -1}}");
	write_file("retrier.json", "{\"limits\": {\"timeout_ms\": 4000},"
				   " \"failure\": {\"mode\": \"retry\", \"max_retries\": 2}}");
	/* waits up to a minute for a place: only the client's budget is shorter */
	write_file("patient.json",
		   "{\"limits\": {\"timeout_ms\": 4000, \"queue_timeout_ms\": 60000},"
		   " \"failure\": {\"mode\": \"skip\", \"max_retries\": 0}}");

	serve_fixture_server(&srv, policies, fake_run);
	sg_log_set_level(SG_LOG_WARN); /* no access log lines between the test lines */
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	gate_free(srv.gate);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* One request; the reply's body is returned (caller frees), its status
 * compared. */
static json_t *call_at(const char *method, const char *url, const char *tenant, const char *body,
		       uint64_t arrived_ms, unsigned want_status, unsigned *retry_after)
{
	struct serve_request rq = { .method = method,
				    .url = url,
				    .tenant_header = tenant,
				    .body = body ? body : "",
				    .body_len = body ? strlen(body) : 0,
				    .arrived_ms = arrived_ms };
	struct serve_reply rp;
	json_t *j;

	serve_handle(&srv, &rq, &rp);
	if (rp.status != want_status)
		fail_msg("%s %s: status %u, want %u: %s", method, url, rp.status, want_status,
			 json_dumps(rp.body, JSON_COMPACT));
	assert_non_null(rp.body);
	if (retry_after)
		*retry_after = rp.retry_after_s;
	j = json_incref(rp.body);
	serve_reply_free(&rp);
	return j;
}

static json_t *call(const char *method, const char *url, const char *tenant, const char *body,
		    unsigned want_status, unsigned *retry_after)
{
	return call_at(method, url, tenant, body, 0, want_status, retry_after);
}

static bool always_gone(void *arg)
{
	(*(int *)arg)++;
	return true;
}

static const char *str(json_t *o, const char *path)
{
	char buf[64], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		o = json_object_get(o, k);
	return json_string_value(o);
}

#define VERL_BODY(code)                                                           \
	"{\"compile_timeout\": 10, \"run_timeout\": 10, \"code\": \"" code "\", " \
	"\"stdin\": \"1\", \"memory_limit_MB\": 1024, \"language\": \"python\", " \
	"\"files\": {}, \"fetch_files\": []}"

/* ---- tests ------------------------------------------------------------ */

static void test_routes(void **state)
{
	unsigned after;
	json_t *j;

	j = call("GET", "/healthz", NULL, NULL, 200, NULL);
	assert_string_equal(str(j, "status"), "ok");
	json_decref(j);
	json_decref(call("POST", "/healthz", NULL, NULL, 405, NULL));
	json_decref(call("GET", "/run_code", NULL, NULL, 405, NULL));
	j = call("GET", "/metrics", NULL, NULL, 404, &after);
	assert_non_null(strstr(str(j, "error"), "no such endpoint: /metrics"));
	assert_int_equal(after, 0);
	json_decref(j);
	json_decref(call("POST", "/tenants/acme/run_code/x", NULL, "{}", 404, NULL));
	/* OpenRLHF's, and Together's where its SDK joins a base URL. */
	json_decref(call("GET", "/openrlhf/get_reward", NULL, NULL, 405, NULL));
	json_decref(call("GET", "/tci/execute", NULL, NULL, 405, NULL));
	json_decref(call("GET", "//tci/execute", NULL, NULL, 405, NULL));
	json_decref(call("GET", "/v1/tci/execute", NULL, NULL, 405, NULL));
	json_decref(call("POST", "/tci/execute/x", NULL, "{}", 404, NULL));
}

static void test_bad_input_is_never_booked(void **state)
{
	size_t before = bookings();
	json_t *j;

	runs = 0;
	j = call("POST", "/run_code", NULL, "{\"code\": ", 400, NULL);
	assert_string_equal(
		str(j, "error"),
		"invalid JSON body: line 1, column 9: unexpected token near end of file");
	json_decref(j);
	j = call("POST", "/run_code", NULL, "[1]", 400, NULL);
	assert_string_equal(str(j, "error"), "the body must be a JSON object");
	json_decref(j);
	json_decref(call("POST", "/run_code", NULL, "{\"code\": \"x\", \"language\": \"perl\"}",
			 400, NULL));
	json_decref(call("POST", "/run_code", NULL,
			 "{\"code\": \"x\", \"language\": \"python\", "
			 "\"files\": {\"a\": \"!!!!\"}}",
			 400, NULL));
	j = call("POST", "/run_code", "Acme", VERL_BODY("print(1)"), 400, NULL);
	assert_string_equal(str(j, "error"),
			    "invalid tenant name \"Acme\" in the X-Sandguard-Tenant header: "
			    "expected [a-z0-9][a-z0-9_-]{0,62}");
	json_decref(j);
	j = call("POST", "/tenants/acme/run_code", "bob", VERL_BODY("print(1)"), 400, NULL);
	assert_string_equal(str(j, "error"),
			    "the path names tenant \"acme\" but the X-Sandguard-Tenant header "
			    "names \"bob\"");
	json_decref(j);
	/* /run_code takes no tenant in the body: it is an unknown key there. */
	json_decref(call("POST", "/run_code", NULL,
			 "{\"tenant\": \"acme\", \"code\": \"x\", "
			 "\"language\": \"python\"}",
			 400, NULL));
	assert_int_equal(runs, 0);
	assert_int_equal(bookings(), before);
}

static void test_run_code_endings(void **state)
{
	size_t before = bookings();
	json_t *j;

	script(0, SB_EXITED, 0, "2\n");
	j = call("POST", "/run_code", NULL, VERL_BODY("print(int(input())+1)"), 200, NULL);
	assert_string_equal(str(j, "status"), "Success");
	assert_string_equal(str(j, "run_result.status"), "Finished");
	assert_string_equal(str(j, "run_result.stdout"), "2\n");
	assert_true(json_is_null(json_object_get(j, "compile_result")));
	assert_string_equal(str(j, "executor_pod_name"), "node-1");
	assert_string_equal(str(j, "sandguard.tenant"),
			    "default");                    /* no header: the default policy */
	assert_string_equal(last_argv0, srv.langs.python); /* /usr/bin/python3, resolved */
	assert_string_equal(last_file, "main.py");
	{
		json_t *sg = json_object_get(j, "sandguard");
		json_t *ids = json_object_get(sg, "sandbox_ids");
		assert_true(json_is_null(json_object_get(sg, "run_id"))); /* no header */
		assert_int_equal(json_array_size(ids), 1);
		assert_non_null(strstr(json_string_value(json_array_get(ids, 0)), "fake-"));
	}
	json_decref(j);

	script(0, SB_TIMEOUT, 0, "");
	j = call("POST", "/tenants/acme/run_code", NULL, VERL_BODY("while True: pass"), 200, NULL);
	assert_string_equal(str(j, "status"), "Failed");
	assert_string_equal(str(j, "run_result.status"), "TimeLimitExceeded");
	assert_true(json_is_null(json_object_get(json_object_get(j, "run_result"), "return_code")));
	assert_string_equal(str(j, "sandguard.cause"), "tenant_timeout");
	/* run_timeout 10 s, lowered to acme's 4 s. */
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(j, "sandguard"), "timeout_ms")),
		4000);
	json_decref(j);

	script(0, SB_SIGNALED, 6, "");
	j = call("POST", "/run_code", "acme", VERL_BODY("import os; os.abort()"), 200, NULL);
	assert_string_equal(str(j, "status"), "Failed");
	assert_string_equal(str(j, "run_result.status"), "Finished");
	assert_int_equal(json_integer_value(
				 json_object_get(json_object_get(j, "run_result"), "return_code")),
			 -6);
	json_decref(j);

	script(-EROFS, 0, 0, NULL);
	j = call("POST", "/run_code", "acme", VERL_BODY("print(1)"), 200, NULL);
	assert_string_equal(str(j, "status"), "SandboxError");
	assert_true(json_is_null(json_object_get(j, "run_result")));
	assert_string_equal(str(j, "message"),
			    "platform error: cannot create cgroup: Read-only file system");
	assert_string_equal(str(j, "sandguard.cause"), "platform_error");
	json_decref(j);
	assert_int_equal(bookings(), before + 4); /* every run booked, once (skip: no retries) */
}

static void test_policy_failure_is_a_platform_error(void **state)
{
	size_t before = bookings();
	json_t *j;

	runs = 0;
	j = call("POST", "/run_code", "broken", VERL_BODY("print(1)"), 200, NULL);
	assert_string_equal(str(j, "status"), "SandboxError");
	assert_non_null(strstr(str(j, "message"), "platform error: cannot load the policy: "));
	assert_non_null(strstr(str(j, "message"), "broken.json:1:27: limits.timeout_ms"));
	json_decref(j);
	j = call("POST", "/v1/score", "broken", "{}", 500, NULL);
	assert_string_equal(str(j, "cause"), "platform_error");
	assert_string_equal(str(j, "tenant"), "broken");
	json_decref(j);
	assert_int_equal(runs, 0);
	assert_int_equal(bookings(), before + 2);
}

static void test_score_and_verify(void **state)
{
	const char *score =
		"{\"tenant\": \"acme\", \"run_id\": \"run-7\", \"command\": [\"/usr/bin/python3\", \"-c\", "
		"\"print(1)\"], \"batch\": {\"batch_id\": \"b-1\",   \"items\": "
		"[{\"prompt\": \"p\", \"completion\": \"c\"}, {\"prompt\": \"q\", \"completion\": \"d\"}]}}";
	json_t *j;

	script(0, SB_EXITED, 0, "[0.5, 1]");
	j = call("POST", "/v1/score", NULL, score, 200, NULL);
	assert_string_equal(str(j, "cause"), "ok");
	assert_string_equal(str(j, "tenant"), "acme");
	assert_string_equal(str(j, "batch_id"), "b-1");
	assert_true(json_real_value(json_array_get(json_object_get(j, "scores"), 0)) == 0.5);
	/* Identity: the run, and the sandbox of each attempt. */
	assert_string_equal(str(j, "run_id"), "run-7");
	assert_int_equal(json_array_size(json_object_get(j, "sandboxes")), 1);
	assert_non_null(
		strstr(json_string_value(json_object_get(
			       json_array_get(json_object_get(j, "sandboxes"), 0), "sandbox")),
		       "fake-"));
	json_decref(j);

	script(0, SB_EXITED, 0, "[0.5]"); /* one score for two items */
	j = call("POST", "/v1/score", NULL, score, 200, NULL);
	assert_string_equal(str(j, "cause"), "tenant_bad_output");
	json_decref(j);

	j = call("POST", "/v1/score", "bob", score, 400, NULL);
	assert_string_equal(str(j, "error"),
			    "the X-Sandguard-Tenant header names tenant \"bob\" but the "
			    "body's \"tenant\" names \"acme\"");
	json_decref(j);
	j = call("POST", "/v1/score", NULL, "{\"command\": [\"/bin/sh\"], \"batch\": {}}", 400,
		 NULL);
	assert_string_equal(str(j, "error"),
			    "command[0] \"/bin/sh\" is not allowed by tenant default's "
			    "exec.allow (<embedded>)");
	json_decref(j);
	j = call("POST", "/v1/score", NULL,
		 "{\"command\": [\"/usr/bin/python3\", \"/nonexistent/r.py\"], "
		 "\"batch\": {}}",
		 400, NULL);
	assert_string_equal(str(j, "error"),
			    "command[1] \"/nonexistent/r.py\" does not exist on this node");
	json_decref(j);
	j = call("POST", "/v1/score", NULL,
		 "{\"command\": [\"/usr/bin/python3\"], \"batch\": {\"items\": []}}", 400, NULL);
	assert_string_equal(str(j, "error"), "batch: missing \"batch_id\"");
	json_decref(j);
	j = call("POST", "/v1/score", "acme",
		 "{\"command\": [\"/usr/bin/python3\"], \"timeout_ms\": 9000, "
		 "\"batch\": {}}",
		 400, NULL);
	assert_non_null(strstr(str(j, "error"),
			       "\"timeout_ms\" 9000 exceeds the policy's timeout_ms 4000"));
	json_decref(j);

	script(0, SB_EXITED, 0, "3\n");
	j = call("POST", "/v1/verify", NULL,
		 "{\"code\": \"print(sum(map(int, input().split())))\", "
		 "\"language\": \"python\", \"tests\": [{\"input\": \"1 2\", \"output\": \"3\"}, "
		 "{\"input\": \"2 2\", \"output\": \"4\"}]}",
		 200, NULL);
	assert_string_equal(str(j, "cause"), "ok");
	assert_int_equal(json_integer_value(json_object_get(j, "reward")),
			 0); /* "3" is wrong for 2 2 */
	assert_string_equal(last_argv0, srv.langs.python);
	json_decref(j);
	j = call("POST", "/v1/verify", NULL,
		 "{\"code\": \"x\", \"command\": [\"/usr/bin/python3\"], "
		 "\"tests\": []}",
		 400, NULL);
	assert_string_equal(str(j, "error"),
			    "give exactly one of \"command\" (a program on this node) and "
			    "\"code\" (python code)");
	json_decref(j);

	script(-EIO, 0, 0, NULL);
	j = call("POST", "/v1/verify", NULL,
		 "{\"command\": [\"/usr/bin/python3\", \"-c\", \"1\"], "
		 "\"tests\": [{\"input\": \"\", \"output\": \"\"}]}",
		 500, NULL);
	assert_string_equal(str(j, "cause"), "platform_error");
	json_decref(j);
}

static struct gate_ticket taken[8];

static void take(int n, const char *tenant, uint32_t cap)
{
	struct gate_wait how = { .expected_ms = 2000 };

	for (int i = 0; i < n; i++)
		assert_int_equal(gate_enter(srv.gate, tenant, cap, &how, &taken[i]), GATE_OK);
}

static void give_back(int n)
{
	for (int i = 0; i < n; i++)
		gate_leave(srv.gate, &taken[i]);
}

#define SCORE_BODY                                                                               \
	"{\"command\": [\"/usr/bin/python3\", \"-c\", \"print(1)\"], \"batch\": {\"batch_id\": " \
	"\"b\", \"items\": [{\"prompt\": \"p\", \"completion\": \"c\"}]}}"

static void test_admission_refusals(void **state)
{
	size_t before = bookings();
	unsigned after = 0;
	json_t *j;

	/* acme's one place is taken (concurrency 1, on_excess refuse): 504 on
	 * /run_code (what verl retries), 429 on the native API. */
	take(1, "acme", 1);
	runs = 0;
	j = call("POST", "/run_code", "acme", VERL_BODY("print(1)"), 504, &after);
	assert_int_equal(after, 4); /* acme's deadline, in seconds */
	assert_non_null(strstr(str(j, "error"), "tenant acme is at its concurrency cap of 1"));
	json_decref(j);
	json_decref(call("POST", "/v1/score", "acme", SCORE_BODY, 429, &after));
	assert_int_equal(after, 4);
	give_back(1);

	/* The server is full: 504 / 503, whoever asks; Retry-After is when
	 * the first running request is due to end. */
	take(4, "other", 10);
	j = call("POST", "/tenants/acme/run_code", NULL, VERL_BODY("print(1)"), 504, &after);
	assert_true(after >= 1 && after <= 2);
	json_decref(j);
	json_decref(call("POST", "/v1/score", "acme", SCORE_BODY, 503, &after));
	give_back(4);
	assert_int_equal(runs, 0);
	assert_int_equal(bookings(), before); /* the server's refusals are never booked */

	/* exec's own node-wide cap, which a `sandguard exec` may hold (a flock
	 * through another open file is another holder, even in this process):
	 * refused although our own gate had room. */
	char dir[128], path[160];
	int fd;

	snprintf(dir, sizeof(dir), "%s/run/tenants/acme", tmp);
	snprintf(path, sizeof(path), "mkdir -p %s", dir);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof(path), "%s/slot-0.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	j = call("POST", "/run_code", "acme", VERL_BODY("print(1)"), 504, &after);
	assert_true(after >= 1);
	assert_non_null(
		strstr(str(j, "error"), "concurrency cap reached: 1 sandboxes of tenant acme"));
	json_decref(j);
	json_decref(call("POST", "/v1/score", "acme", SCORE_BODY, 429, &after));
	close(fd);
	assert_int_equal(runs, 0);
}

/* verl waits compile_timeout + run_timeout + 10 s (30 s for VERL_BODY);
 * a python run needs run_timeout (4 s here) and a margin after it. */
static void test_late_run_code_is_504_before_running(void **state)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);
	size_t before = bookings();
	unsigned after = 0;
	json_t *j;

	runs = 0;
	/* Arrived 28 s ago: it cannot finish before its client gives up. */
	j = call_at("POST", "/run_code", "patient", VERL_BODY("print(1)"), now - 28000, 504,
		    &after);
	assert_non_null(strstr(str(j, "error"), "cannot start in time"));
	assert_true(after >= 1);
	json_decref(j);
	/* Arrived 22.5 s ago while the server is full: it waits for a place
	 * only until it would be too late (about 0.5 s), then 504. */
	take(4, "other", 10);
	j = call_at("POST", "/run_code", "patient", VERL_BODY("print(1)"), now - 22500, 504,
		    &after);
	assert_non_null(strstr(str(j, "error"), "cannot start in time"));
	json_decref(j);
	give_back(4);
	/* Arrived 10 s ago, room: it runs. */
	script(0, SB_EXITED, 0, "1\n");
	json_decref(call_at("POST", "/run_code", "patient", VERL_BODY("print(1)"),
			    clock_ms(CLOCK_MONOTONIC) - 10000, 200, NULL));
	assert_int_equal(runs, 1);
	assert_int_equal(bookings(), before + 1);
}

/* A platform error is retried (max_retries 2), but only as often as whole
 * runs (4 s each, and the margin) fit in what the client waits: when the
 * budget cut the retries short, 504, which verl retries with a budget of
 * its own, instead of a SandboxError it would score -1. */
static void test_platform_error_retries_fit_the_budget(void **state)
{
	size_t before = bookings();
	json_t *j;

	script(-EROFS, 0, 0, NULL);
	runs = 0;
	j = call("POST", "/run_code", "retrier", VERL_BODY("print(1)"), 200, NULL);
	assert_string_equal(str(j, "status"), "SandboxError");
	assert_int_equal(runs, 3); /* 27 s left: the three attempts fit */
	json_decref(j);
	runs = 0;
	/* Arrived 18 s ago: 9 s left, one attempt of 4 s + 3 s. */
	j = call_at("POST", "/run_code", "retrier", VERL_BODY("print(1)"),
		    clock_ms(CLOCK_MONOTONIC) - 18000, 504, NULL);
	assert_int_equal(runs, 1);
	assert_non_null(strstr(str(j, "error"), "no time is left to retry it"));
	assert_non_null(strstr(str(j, "error"), "Read-only file system"));
	json_decref(j);
	assert_int_equal(bookings(), before + 4); /* every attempt run is booked */
}

static void test_queued_request_whose_client_left_is_dropped(void **state)
{
	struct serve_request rq = { .method = "POST",
				    .url = "/run_code",
				    .tenant_header = "other",
				    .body = VERL_BODY("print(1)"),
				    .body_len = strlen(VERL_BODY("print(1)")),
				    .client_gone = always_gone };
	size_t before = bookings();
	struct serve_reply rp;
	int asked = 0;

	rq.gone_arg = &asked;
	write_file("other.json", "{\"limits\": {\"queue_timeout_ms\": 5000}}");
	take(4, "x", 10); /* full: the request waits in line */
	runs = 0;
	serve_handle(&srv, &rq, &rp);
	assert_true(rp.no_reply);
	assert_true(asked >= 1);
	serve_reply_free(&rp);
	give_back(4);
	assert_int_equal(runs, 0);
	assert_int_equal(bookings(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_routes),
		cmocka_unit_test(test_bad_input_is_never_booked),
		cmocka_unit_test(test_run_code_endings),
		cmocka_unit_test(test_policy_failure_is_a_platform_error),
		cmocka_unit_test(test_score_and_verify),
		cmocka_unit_test(test_admission_refusals),
		cmocka_unit_test(test_late_run_code_is_504_before_running),
		cmocka_unit_test(test_platform_error_retries_fit_the_budget),
		cmocka_unit_test(test_queued_request_whose_client_left_is_dropped),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
