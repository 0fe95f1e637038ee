/* Event encoding: the exact JSON line of each type, escaping of hostile
 * bytes, timestamps. The decoder is in test_event_json_decode.c. */
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

static void assert_json(const struct sg_event *e, const char *expected)
{
	char buf[EVENT_JSON_MAX];
	int n = event_to_json(e, &ctx, buf, sizeof(buf));

	if (n < 0)
		fail_msg("event_to_json: %s", strerror(-n));
	assert_string_equal(buf, expected);
	assert_int_equal(n, strlen(expected));
	assert_jansson_roundtrip(buf);
}

static void test_egress_inet(void **state)
{
	struct sg_event e = base_event(SG_EV_EGRESS_DENIED, SG_ACTION_DENIED, SG_RULE_EGRESS);

	e.net.family = AF_INET;
	e.net.port = 80;
	e.net.proto = IPPROTO_TCP;
	e.net.hook = SG_HOOK_CONNECT4;
	memcpy(e.net.addr, "\x01\x02\x03\x04", 4);
	assert_json(
		&e, HEAD
		"\"pid\":4242,\"ppid\":4200,\"uid\":61000,\"comm\":\"python3\","
		"\"type\":\"egress_denied\",\"rule\":\"egress\",\"detail\":{\"family\":\"inet\","
		"\"dst\":\"1.2.3.4:80\",\"proto\":\"tcp\",\"hook\":\"connect4\"},\"action\":\"denied\"}");
}

static void test_egress_inet6(void **state)
{
	struct sg_event e = base_event(SG_EV_EGRESS_DENIED, SG_ACTION_DENIED, SG_RULE_EGRESS);

	e.net.family = AF_INET6;
	e.net.port = 443;
	e.net.proto = IPPROTO_UDP;
	e.net.hook = SG_HOOK_SENDMSG6;
	e.net.addr[15] = 1;
	assert_json(
		&e, HEAD
		"\"pid\":4242,\"ppid\":4200,\"uid\":61000,\"comm\":\"python3\","
		"\"type\":\"egress_denied\",\"rule\":\"egress\",\"detail\":{\"family\":\"inet6\","
		"\"dst\":\"[::1]:443\",\"proto\":\"udp\",\"hook\":\"sendmsg6\"},\"action\":\"denied\"}");
}

static void test_egress_unix(void **state)
{
	struct sg_event e = base_event(SG_EV_EGRESS_DENIED, SG_ACTION_KILLED, SG_RULE_EGRESS);
	const char *tail =
		"\"type\":\"egress_denied\",\"rule\":\"egress\",\"detail\":{\"family\":\"unix\",";
	char expected[1024];

	e.net.family = AF_UNIX;
	e.net.hook = SG_HOOK_CONNECT_UNIX;
	strcpy(e.net.unix_path, "/run/docker.sock");
	snprintf(expected, sizeof(expected),
		 HEAD "\"pid\":4242,\"ppid\":4200,\"uid\":61000,"
		      "\"comm\":\"python3\",%s\"dst\":\"/run/docker.sock\",\"proto\":null,"
		      "\"hook\":\"connect_unix\"},\"action\":\"killed\"}",
		 tail);
	assert_json(&e, expected);

	/* Abstract: a leading NUL, shown as '@'. */
	memset(e.net.unix_path, 0, sizeof(e.net.unix_path));
	memcpy(e.net.unix_path, "\0sg-test", 8);
	e.net.hook = SG_HOOK_SENDMSG_UNIX;
	snprintf(expected, sizeof(expected),
		 HEAD "\"pid\":4242,\"ppid\":4200,\"uid\":61000,"
		      "\"comm\":\"python3\",%s\"dst\":\"@sg-test\",\"proto\":null,"
		      "\"hook\":\"sendmsg_unix\"},\"action\":\"killed\"}",
		 tail);
	assert_json(&e, expected);

	/* A path that fills the whole array has no NUL: it must stay bounded. */
	memset(e.net.unix_path, 'a', sizeof(e.net.unix_path));
	char buf[EVENT_JSON_MAX], want[SG_UNIX_PATH_LEN + 16] = "\"dst\":\"";
	memset(want + 7, 'a', SG_UNIX_PATH_LEN);
	strcpy(want + 7 + SG_UNIX_PATH_LEN, "\",");
	assert_true(event_to_json(&e, &ctx, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, want));
}

/* Who sent a packet is unknown to the cgroup_skb program: null, never a 0
 * that reads as root. sock_addr programs know the task, not its parent. */
static void test_unknown_fields_are_null(void **state)
{
	struct sg_event e = base_event(SG_EV_EGRESS_DENIED, SG_ACTION_DENIED, SG_RULE_EGRESS);

	e.net.family = AF_INET;
	e.net.port = 53;
	e.net.proto = IPPROTO_UDP;
	e.net.hook = SG_HOOK_SKB_EGRESS;
	memcpy(e.net.addr, "\x08\x08\x08\x08", 4);
	e.pid = e.ppid = e.uid = 0;
	e.comm[0] = 0;
	e.flags = SG_EVF_NO_TASK;
	assert_json(&e, HEAD "\"pid\":null,\"ppid\":null,\"uid\":null,\"comm\":null,"
			     "\"type\":\"egress_denied\",\"rule\":\"egress\",\"detail\":{"
			     "\"family\":\"inet\",\"dst\":\"8.8.8.8:53\",\"proto\":\"udp\","
			     "\"hook\":\"skb_egress\"},\"action\":\"denied\"}");

	e = base_event(SG_EV_EGRESS_DENIED, SG_ACTION_DENIED, SG_RULE_EGRESS);
	e.net.family = AF_UNIX;
	e.net.hook = SG_HOOK_LSM_UNIX_BIND;
	memcpy(e.net.unix_path, "\0squat", 6);
	e.flags = SG_EVF_NO_PPID;
	assert_json(&e, HEAD "\"pid\":4242,\"ppid\":null,\"uid\":61000,\"comm\":\"python3\","
			     "\"type\":\"egress_denied\",\"rule\":\"egress\",\"detail\":{"
			     "\"family\":\"unix\",\"dst\":\"@squat\",\"proto\":null,"
			     "\"hook\":\"lsm_unix_bind\"},\"action\":\"denied\"}");
}

static void test_fork_limit(void **state)
{
	struct sg_event e = base_event(SG_EV_FORK_LIMIT, SG_ACTION_KILLED, SG_RULE_FORK);

	e.fork.forks = 70;
	e.fork.tasks = 65;
	e.fork.limit = 64;
	e.fork.which = 1;
	assert_json(
		&e, HEAD
		"\"pid\":4242,\"ppid\":4200,\"uid\":61000,\"comm\":\"python3\","
		"\"type\":\"fork_limit\",\"rule\":\"fork\",\"detail\":{\"forks\":70,\"tasks\":65,"
		"\"limit\":64,\"which\":\"max_tasks\"},\"action\":\"killed\"}");
}

static void test_exec(void **state)
{
	struct sg_event e = base_event(SG_EV_EXEC, SG_ACTION_ALLOWED, 0);

	strcpy(e.exec.filename, "/usr/bin/python3");
	/* An empty argument in the middle is kept; the final NUL ends the last. */
	set_args(&e, "python3\0\0-c\0print(1)\0", 21, 21);
	assert_json(
		&e, HEAD
		"\"pid\":4242,\"ppid\":4200,\"uid\":61000,\"comm\":\"python3\","
		"\"type\":\"exec\",\"rule\":null,\"detail\":{\"filename\":\"/usr/bin/python3\","
		"\"argv\":[\"python3\",\"\",\"-c\",\"print(1)\"],\"truncated\":false,\"mode\":null},"
		"\"action\":\"allowed\"}");
}

/* comm and filename are the tenant's bytes: quotes, backslashes, control
 * characters and invalid UTF-8 must all come out as valid JSON. */
static void test_exec_denied_hostile(void **state)
{
	struct sg_event e = base_event(SG_EV_EXEC_DENIED, SG_ACTION_KILLED, SG_RULE_EXEC);
	char args[SG_ARGS_LEN], xs[SG_ARGS_LEN], expected[2048];

	memcpy(e.comm, "a\"b\\\x01\xc3\x28\xe2\x82\xac\xed\xa0\x80zzz", 16); /* no NUL */
	strcpy(e.exec.filename, "/tmp/\xff\xfe\x1b[31mevil\n\xc0\xaf\xf0\x9f\x98\x80");
	memset(args, 'x', sizeof(args));
	memcpy(args, "sh\0-c\0", 6);
	set_args(&e, args, sizeof(args), 300);
	e.exec.mode = SG_MODE_FALLBACK;
	memset(xs, 'x', sizeof(xs));
	snprintf(expected, sizeof(expected),
		 HEAD "\"pid\":4242,\"ppid\":4200,\"uid\":61000,"
		      "\"comm\":\"a\\\"b\\\\\\u0001\\\\xc3(\xe2\x82\xac\\\\xed\\\\xa0\\\\x80zzz\","
		      "\"type\":\"exec_denied\",\"rule\":\"exec\",\"detail\":{\"filename\":"
		      "\"/tmp/\\\\xff\\\\xfe\\u001B[31mevil\\n\\\\xc0\\\\xaf\xf0\x9f\x98\x80\","
		      "\"argv\":[\"sh\",\"-c\",\"%.*s\"],"
		      "\"truncated\":true,\"mode\":\"fallback\"},\"action\":\"killed\"}",
		 SG_ARGS_LEN - 6, xs);
	assert_json(&e, expected);

	/* A full buffer that does end in a NUL is complete. */
	e.exec.args[SG_ARGS_LEN - 1] = '\0';
	e.exec.args_len = SG_ARGS_LEN;
	char buf[EVENT_JSON_MAX];
	assert_true(event_to_json(&e, &ctx, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\"truncated\":false"));
}

static void test_file_denied(void **state)
{
	struct sg_event e = base_event(SG_EV_FILE_DENIED, SG_ACTION_DENIED, SG_RULE_FILE);
	const char *const comps[] = { "hostname", "etc", "/" };

	set_comps(&e, 3, comps, 3);
	e.file.flags = 0x8000;
	e.file.mode = SG_MODE_LSM;
	assert_json(
		&e, HEAD
		"\"pid\":4242,\"ppid\":4200,\"uid\":61000,\"comm\":\"python3\","
		"\"type\":\"file_denied\",\"rule\":\"file\",\"detail\":{\"path\":\"/etc/hostname\","
		"\"write\":false,\"flags\":32768,\"mode\":\"lsm\"},\"action\":\"denied\"}");
}

static const char *path_of(const struct sg_event *e, char *buf, size_t len)
{
	int n = event_to_json(e, &ctx, buf, len);
	assert_true(n > 0);
	char *p = strstr(buf, "\"path\":");
	assert_non_null(p);
	*strstr(p, ",\"write\"") = '\0';
	return p + 7;
}

static void test_file_paths(void **state)
{
	struct sg_event e = base_event(SG_EV_FILE_TRIPPED, SG_ACTION_KILLED, SG_RULE_FILE);
	const char *const deep[] = { "f", "c1", "c2", "c3", "c4", "c5", "c6", "c7" };
	const char *const no_root[] = { "hostname", "etc" };
	const char *const mount_root[] = { "x", "/", "mnt", "/" };
	const char *const root[] = { "/" };
	char buf[EVENT_JSON_MAX];

	e.file.write = 1;
	set_comps(&e, 12, deep, 8);
	assert_string_equal(path_of(&e, buf, sizeof(buf)), "\".../c7/c6/c5/c4/c3/c2/c1/f\"");
	memset(&e.file.comps, 0, sizeof(e.file.comps));
	set_comps(&e, 2, no_root, 2);
	assert_string_equal(path_of(&e, buf, sizeof(buf)), "\"/etc/hostname\"");
	set_comps(&e, 4, mount_root, 4);
	assert_string_equal(path_of(&e, buf, sizeof(buf)), "\"/mnt/x\"");
	memset(&e.file.comps, 0, sizeof(e.file.comps));
	set_comps(&e, 1, root, 1);
	assert_string_equal(path_of(&e, buf, sizeof(buf)), "\"/\"");
	e.file.depth = 0;
	assert_string_equal(path_of(&e, buf, sizeof(buf)), "null");
	/* A 32-byte component has no NUL: bounded, and its bytes escaped. */
	memset(e.file.comps[0], '\xff', SG_COMP_LEN);
	e.file.depth = 1;
	path_of(&e, buf, sizeof(buf));
	char *p = strstr(buf, "\"path\":\"/") + 9;
	for (int i = 0; i < SG_COMP_LEN; i++, p += 5)
		assert_memory_equal(p, "\\\\xff", 5);
	assert_int_equal(*p, '"');
}

static void test_exit(void **state)
{
	struct sg_event e = base_event(SG_EV_EXIT, SG_ACTION_LOGGED, SG_RULE_MEMORY);

	e.exit.exit_code = 0;
	e.exit.signal = 9;
	e.exit.oom_killed = 1;
	/* An exit concerns no rule, whatever e.rule holds. */
	assert_json(&e,
		    HEAD "\"pid\":4242,\"ppid\":4200,\"uid\":61000,\"comm\":\"python3\","
			 "\"type\":\"exit\",\"rule\":null,\"detail\":{\"exit_code\":0,\"signal\":9,"
			 "\"core\":false,\"oom_killed\":true},\"action\":\"logged\"}");
}

static void test_sandbox_killed(void **state)
{
	char buf[EVENT_JSON_MAX];
	json_t *extra = json_pack("{s:i, s:s}", "procs", 3, "method", "ignored");
	struct event_kill k = {
		.rule = SG_RULE_FORK,
		.trigger = SG_EV_FORK_LIMIT,
		.trigger_pid = 4242,
		.latency_ms = 3.2504,
		.method = "cgroup.kill",
		.extra = extra,
	};
	int n = event_kill_json(&ctx, 1795289400123456789ULL, &k, buf, sizeof(buf));

	assert_true(n > 0);
	assert_string_equal(buf, HEAD
			    "\"pid\":null,\"ppid\":null,\"uid\":null,\"comm\":null,"
			    "\"type\":\"sandbox_killed\",\"rule\":\"fork\",\"detail\":{\"trigger\":"
			    "\"fork_limit\",\"trigger_pid\":4242,\"kill_latency_ms\":3.25,"
			    "\"method\":\"cgroup.kill\",\"procs\":3},\"action\":\"killed\"}");
	assert_int_equal(json_object_size(extra), 2); /* the caller's object is untouched */
	json_decref(extra);

	k = (struct event_kill){ .rule = SG_RULE_MEMORY, .latency_ms = -1 };
	assert_true(event_kill_json(&ctx, 1795289400123456789ULL, &k, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf,
			       "\"rule\":\"memory\",\"detail\":{\"trigger\":null,"
			       "\"trigger_pid\":null,\"kill_latency_ms\":null,\"method\":null}"));
}

static void test_health(void **state)
{
	struct event_ctx tenant_only = ctx;
	json_t *fields = json_pack("{s:f, s:i}", "rate", 0.55, "window", 20);
	char buf[EVENT_JSON_MAX];

	tenant_only.sandbox = NULL;
	tenant_only.batch_id = NULL;
	tenant_only.run_id = NULL;
	assert_true(event_health_json(&tenant_only, 1795289400123456789ULL, "constant_batches",
				      fields, buf, sizeof(buf)) > 0);
	assert_string_equal(
		buf,
		"{\"ts\":\"" TS "\",\"node\":\"node-1\",\"tenant\":\"acme\","
		"\"sandbox\":null,\"batch_id\":null,\"run_id\":null,\"pid\":null,\"ppid\":null,\"uid\":null,\"comm\":null,"
		"\"type\":\"health\",\"rule\":null,\"detail\":{\"detector\":"
		"\"constant_batches\",\"rate\":0.55,\"window\":20},\"action\":\"logged\"}");
	json_decref(fields);
	assert_int_equal(event_health_json(&ctx, 0, NULL, NULL, buf, sizeof(buf)), -EINVAL);
}

static void test_errors(void **state)
{
	struct sg_event e = base_event(SG_EV_EXIT, SG_ACTION_LOGGED, 0);
	char buf[EVENT_JSON_MAX];
	json_t *arr = json_array();

	assert_int_equal(event_to_json(&e, &ctx, buf, 40), -ENOSPC);
	e.type = 0;
	assert_int_equal(event_to_json(&e, &ctx, buf, sizeof(buf)), -EINVAL);
	e.type = SG_EV__COUNT;
	assert_int_equal(event_to_json(&e, &ctx, buf, sizeof(buf)), -EINVAL);
	e.type = SG_EV_SANDBOX_KILLED; /* userspace events have their own builders */
	assert_int_equal(event_to_json(&e, &ctx, buf, sizeof(buf)), -EINVAL);
	e.type = SG_EV_EXIT;
	e.action = 9;
	assert_int_equal(event_to_json(&e, &ctx, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(event_userspace_json(&ctx, 0, SG_EV_HEALTH, SG_ACTION_LOGGED, 7, NULL, buf,
					      sizeof(buf)),
			 -EINVAL);
	assert_int_equal(event_userspace_json(&ctx, 0, SG_EV_HEALTH, SG_ACTION_LOGGED, -1, arr, buf,
					      sizeof(buf)),
			 -EINVAL);
	json_decref(arr);
}

static void test_null_context(void **state)
{
	struct sg_event e = base_event(SG_EV_EXIT, SG_ACTION_LOGGED, 0);
	struct event_ctx none = { .boot_to_real_ns = ctx.boot_to_real_ns };
	char buf[EVENT_JSON_MAX];

	assert_true(event_to_json(&e, &none, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\"node\":null,\"tenant\":null,\"sandbox\":null,"
				    "\"batch_id\":null,\"run_id\":null,\"pid\":4242,"));
}

static void test_timestamps(void **state)
{
	char buf[32];
	int64_t ms;

	assert_int_equal(event_format_ts(0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
	assert_int_equal(event_format_ts(1795289400007LL, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "2026-11-21T19:30:00.007Z");
	assert_int_equal(event_format_ts(951782400999LL, buf, sizeof(buf)), 0); /* leap day */
	assert_string_equal(buf, "2000-02-29T00:00:00.999Z");
	assert_int_equal(event_format_ts(-1, buf, sizeof(buf)), -ERANGE);
	assert_int_equal(event_format_ts(0, buf, 24), -ERANGE);

	assert_int_equal(event_parse_ts("2026-11-21T19:30:00.123Z", &ms), 0);
	assert_int_equal(ms, 1795289400123LL);
	assert_int_equal(event_parse_ts("2026-11-21T19:30:00Z", &ms), 0);
	assert_int_equal(ms, 1795289400000LL);
	assert_int_equal(event_parse_ts("2026-11-21t20:30:00.5+01:00", &ms), 0);
	assert_int_equal(ms, 1795289400500LL);
	assert_int_equal(event_parse_ts("2026-11-21 14:00:00.123456789-05:30", &ms), 0);
	assert_int_equal(ms, 1795289400123LL);
	const char *bad[] = { "",
			      "2026-11-21",
			      "2026-11-21T19:30:00",
			      "2026-13-01T00:00:00Z",
			      "2026-02-29T00:00:00Z",
			      "2026-11-21T24:00:00Z",
			      "2026-11-21T19:30:00.Z",
			      "2026-11-21T19:30:00Zjunk",
			      "2026-11-21T19:30:00+1:00",
			      "2026-11-21X19:30:00Z",
			      "+026-11-21T19:30:00Z",
			      NULL };
	for (int i = 0; bad[i]; i++)
		if (event_parse_ts(bad[i], &ms) != -EINVAL)
			fail_msg("accepted bad timestamp '%s'", bad[i]);
	assert_int_equal(event_parse_ts(NULL, &ms), -EINVAL);
}

static void test_names(void **state)
{
	for (uint32_t t = SG_EV_EGRESS_DENIED; t < SG_EV__COUNT; t++)
		assert_int_equal(event_type_from_name(event_type_name(t)), t);
	assert_null(event_type_name(0));
	assert_null(event_type_name(SG_EV__COUNT));
	assert_int_equal(event_type_from_name("bogus"), -1);
	assert_int_equal(event_type_from_name(NULL), -1);
	assert_string_equal(event_action_name(SG_ACTION_LOGGED), "logged");
	assert_null(event_action_name(0));
	assert_string_equal(rule_name(SG_RULE_MEMORY), "memory");
	assert_null(rule_name(-1));
	assert_null(rule_name(SG_RULE__COUNT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_egress_inet),
		cmocka_unit_test(test_egress_inet6),
		cmocka_unit_test(test_egress_unix),
		cmocka_unit_test(test_unknown_fields_are_null),
		cmocka_unit_test(test_fork_limit),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_exec_denied_hostile),
		cmocka_unit_test(test_file_denied),
		cmocka_unit_test(test_file_paths),
		cmocka_unit_test(test_exit),
		cmocka_unit_test(test_sandbox_killed),
		cmocka_unit_test(test_health),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_null_context),
		cmocka_unit_test(test_timestamps),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
