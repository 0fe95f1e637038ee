/* Event decoding: round trips, summaries, garbage; and lines built from
 * random, hostile and longest inputs stay valid JSON that fits. The
 * encoder's exact lines are in test_event_json.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "telemetry/event_json.h"
#include "lib/ids.h"
#include "lib/rule_names.h"
#include "event_fixture.h"

/* ---- Decoder ---- */

static void roundtrip(const struct sg_event *e, const char *summary)
{
	char buf[EVENT_JSON_MAX];
	struct event_record r;
	json_t *root, *detail;
	char *want_detail;

	assert_true(event_to_json(e, &ctx, buf, sizeof(buf)) > 0);
	assert_int_equal(event_parse_line(buf, &r), 0);
	assert_int_equal(r.ts_ms, 1795289400123LL);
	assert_string_equal(r.node, "node-1");
	assert_string_equal(r.tenant, "acme");
	assert_string_equal(r.sandbox, "sb-1");
	assert_string_equal(r.batch_id, "batch-7");
	assert_string_equal(r.run_id, "run-3");
	assert_string_equal(r.type, event_type_name(e->type));
	assert_string_equal(r.action, event_action_name(e->action));
	assert_int_equal(r.pid, 4242);
	assert_int_equal(r.ppid, 4200);
	assert_int_equal(r.uid, 61000);
	root = json_loads(buf, 0, NULL);
	detail = json_object_get(root, "detail");
	want_detail = json_dumps(detail, JSON_COMPACT | JSON_REAL_PRECISION(10));
	assert_string_equal(r.detail, want_detail);
	assert_string_equal(r.summary, summary);
	free(want_detail);
	json_decref(root);
	event_record_free(&r);
}

static void test_decode_roundtrip(void **state)
{
	struct sg_event e = base_event(SG_EV_EGRESS_DENIED, SG_ACTION_DENIED, SG_RULE_EGRESS);
	const char *const comps[] = { "hostname", "etc", "/" };

	e.net.family = AF_INET;
	e.net.port = 80;
	e.net.proto = IPPROTO_TCP;
	e.net.hook = SG_HOOK_CONNECT4;
	memcpy(e.net.addr, "\x7f\0\0\x01", 4);
	roundtrip(&e, "tcp 127.0.0.1:80 (connect4)");

	e = base_event(SG_EV_FORK_LIMIT, SG_ACTION_KILLED, SG_RULE_FORK);
	e.fork = (struct sg_fork_detail){ .forks = 1025, .tasks = 9, .limit = 1024, .which = 2 };
	roundtrip(&e, "max_forks 1024: tasks 9, forks 1025");

	e = base_event(SG_EV_EXEC_DENIED, SG_ACTION_DENIED, SG_RULE_EXEC);
	strcpy(e.exec.filename, "/usr/bin/curl");
	set_args(&e, "curl\0http://x/\0", 15, 15);
	e.exec.mode = SG_MODE_LSM;
	roundtrip(&e, "/usr/bin/curl http://x/ [lsm]");

	e = base_event(SG_EV_FILE_TRIPPED, SG_ACTION_KILLED, SG_RULE_FILE);
	set_comps(&e, 3, comps, 3);
	e.file.write = 1;
	e.file.mode = SG_MODE_FALLBACK;
	roundtrip(&e, "/etc/hostname (write, fallback)");

	e = base_event(SG_EV_EXIT, SG_ACTION_LOGGED, 0);
	e.exit = (struct sg_exit_detail){ .signal = 9, .core = 1, .oom_killed = 1 };
	roundtrip(&e, "signal 9 SIGKILL, core dumped, oom-killed");
	e.exit = (struct sg_exit_detail){ .exit_code = 3 };
	roundtrip(&e, "exit 3");
}

static void test_decode_userspace(void **state)
{
	struct event_kill k = { .rule = SG_RULE_FILE,
				.trigger = SG_EV_FILE_TRIPPED,
				.latency_ms = 12.5,
				.method = "cgroup.kill" };
	json_t *fields = json_pack("{s:f, s:b}", "rate", 0.5, "firing", 1);
	char buf[EVENT_JSON_MAX];
	struct event_record r;

	assert_true(event_kill_json(&ctx, 1795289400123456789ULL, &k, buf, sizeof(buf)) > 0);
	assert_int_equal(event_parse_line(buf, &r), 0);
	assert_int_equal(r.pid, -1);
	assert_null(r.comm);
	assert_string_equal(r.rule, "file");
	assert_string_equal(r.summary,
			    "rule file after file_tripped, empty in 12.500 ms (cgroup.kill)");
	event_record_free(&r);

	assert_true(event_health_json(&ctx, 1795289400123456789ULL, "dead_stream", fields, buf,
				      sizeof(buf)) > 0);
	json_decref(fields);
	assert_int_equal(event_parse_line(buf, &r), 0);
	assert_string_equal(r.summary, "detector=dead_stream rate=0.5 firing=true");
	event_record_free(&r);
}

static void test_decode_garbage(void **state)
{
	static const struct {
		const char *line, *why;
	} cases[] = {
		{ "", "not a JSON object" },
		{ "garbage", "not a JSON object" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"ts\":1,\"type\":\"exec\",\"action\":\"allowed\"}",
		  "ts is missing or not an RFC 3339 time" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"action\":\"allowed\"}",
		  "type is missing or not a string" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"\",\"action\":\"allowed\"}",
		  "type is missing or not a string" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\",\"action\":5}",
		  "action is missing or not a string" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\",\"action\":\"x\",\"tenant\":1}",
		  "node, tenant, sandbox, batch_id, run_id, rule or comm is not a string" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\",\"action\":\"x\",\"pid\":-4}",
		  "pid, ppid or uid is not a non-negative integer" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\",\"action\":\"x\",\"pid\":1.5}",
		  "pid, ppid or uid is not a non-negative integer" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\",\"action\":\"x\",\"detail\":[]}",
		  "detail is not an object" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\",\"action\":\"x\"}",
		  "not a JSON object" },
		{ "{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"a\\u0000b\",\"action\":\"x\"}",
		  "not a JSON object" },
	};
	struct event_record r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (event_parse_line(cases[i].line, &r) != -EINVAL)
			fail_msg("accepted '%s'", cases[i].line);
		assert_string_equal(r.error, cases[i].why);
		assert_null(r.root);
	}

	/* Only ts, type and action are required; detail of the wrong shape
	 * for its type still gets a summary. */
	assert_int_equal(event_parse_line("{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"exec\","
					  "\"action\":\"allowed\",\"detail\":{\"argv\":7}}\n",
					  &r),
			 0);
	assert_null(r.tenant);
	assert_int_equal(r.pid, -1);
	assert_string_equal(r.summary, "?");
	event_record_free(&r);
	assert_int_equal(
		event_parse_line("{\"ts\":\"2026-11-21T19:30:00Z\",\"type\":\"new_kind\","
				 "\"action\":\"logged\",\"detail\":{\"a\":[1],\"b\":null}}",
				 &r),
		0);
	assert_string_equal(r.summary, "a=... b=null");
	assert_string_equal(r.detail, "{\"a\":[1],\"b\":null}");
	event_record_free(&r);
}

/* Random kernel events (fixed seed): every one encodes to a line that a
 * strict JSON parser and the decoder accept, and fits EVENT_JSON_MAX. */
static void test_random_events_are_valid_json(void **state)
{
	char buf[EVENT_JSON_MAX];
	struct event_record r;
	unsigned seed = 12345;

	for (int i = 0; i < 20000; i++) {
		struct sg_event e;
		unsigned char *p = (unsigned char *)&e;
		for (size_t j = 0; j < sizeof(e); j++)
			p[j] = (unsigned char)(rand_r(&seed) >> 7);
		e.ts_ns %= 1ULL << 60;
		e.type = SG_EV_EGRESS_DENIED +
			 (uint32_t)rand_r(&seed) % (SG_EV_EXIT - SG_EV_EGRESS_DENIED + 1);
		e.action = SG_ACTION_ALLOWED + (uint32_t)rand_r(&seed) % 4;
		int n = event_to_json(&e, &ctx, buf, sizeof(buf));
		if (n <= 0)
			fail_msg("event %d (type %u): %d", i, e.type, n);
		assert_jansson_roundtrip(buf);
		assert_int_equal(event_parse_line(buf, &r), 0);
		event_record_free(&r);
	}
}

/* The ids of the context are the executor's bytes: whatever they hold,
 * the line is valid JSON and says what they were. */
static void test_context_ids(void **state)
{
	struct sg_event e = base_event(SG_EV_EXIT, SG_ACTION_ALLOWED, 0);
	struct event_ctx hostile = ctx;
	char buf[EVENT_JSON_MAX];
	struct event_record r;

	hostile.batch_id = "b\"1\\\x01\xff\xc3\xa9/";
	hostile.run_id = NULL;
	assert_true(event_to_json(&e, &hostile, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(
		buf, "\"sandbox\":\"sb-1\",\"batch_id\":\"b\\\"1\\\\\\u0001\\\\xff\xc3\xa9/\","
		     "\"run_id\":null,\"pid\":4242,"));
	assert_jansson_roundtrip(buf);
	assert_int_equal(event_parse_line(buf, &r), 0);
	assert_string_equal(r.batch_id, "b\"1\\\x01\\xff\xc3\xa9/");
	assert_null(r.run_id);
	event_record_free(&r);

	/* Userspace events carry them too. */
	struct event_kill k = { .rule = SG_RULE_EGRESS, .latency_ms = 1500 };
	assert_true(event_kill_json(&ctx, 1795289400123456789ULL, &k, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, HEAD "\"pid\":null,"));
	assert_non_null(strstr(buf, "\"kill_latency_ms\":1500.0,"));
	assert_jansson_roundtrip(buf);
}

/* Every field a line can hold at its longest still fits EVENT_JSON_MAX:
 * 0xff everywhere (each byte grows to five characters). */
static void test_longest_line_fits(void **state)
{
	static char big[SG_ID_MAX + 1];
	struct event_ctx worst = ctx;
	char buf[EVENT_JSON_MAX];
	struct sg_event e;

	memset(big, '\xff', SG_ID_MAX);
	worst.node = worst.tenant = worst.sandbox = worst.batch_id = worst.run_id = big;
	for (uint32_t t = SG_EV_EGRESS_DENIED; t <= SG_EV_EXIT; t++) {
		memset(&e, 0xff, sizeof(e));
		e.type = t;
		e.action = SG_ACTION_KILLED;
		e.flags = 0;
		e.net.family = AF_UNIX;
		e.net.unix_path[0] = '\xff';
		e.file.requested = t == SG_EV_FILE_DENIED;
		e.file.depth = t == SG_EV_FILE_DENIED ? 0 : 9;
		e.exec.args_len = SG_ARGS_LEN;
		int n = event_to_json(&e, &worst, buf, sizeof(buf));
		if (n <= 0)
			fail_msg("type %u: %d", t, n);
		assert_jansson_roundtrip(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_roundtrip),
		cmocka_unit_test(test_decode_userspace),
		cmocka_unit_test(test_decode_garbage),
		cmocka_unit_test(test_random_events_are_valid_json),
		cmocka_unit_test(test_context_ids),
		cmocka_unit_test(test_longest_line_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
