/* Event encoding: the exact JSON line of each type, escaping of hostile
 * bytes, timestamps; and the decoder: round trips, summaries, garbage. */
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

/* 2026-11-21T19:30:00Z is 1795289400 s after the epoch; the events say
 * 5.123456789 s after boot. */
#define BOOT_TS_NS 5123456789ULL
#define TS         "2026-11-21T19:30:00.123Z"
#define HEAD                                                                               \
	"{\"ts\":\"" TS "\",\"node\":\"node-1\",\"tenant\":\"acme\",\"sandbox\":\"sb-1\"," \
	"\"batch_id\":\"batch-7\",\"run_id\":\"run-3\","

static const struct event_ctx ctx = {
	.node = "node-1",
	.tenant = "acme",
	.sandbox = "sb-1",
	.batch_id = "batch-7",
	.run_id = "run-3",
	.boot_to_real_ns = 1795289400LL * 1000000000 - 5000000000LL,
};

static struct sg_event base_event(uint32_t type, uint32_t action, uint32_t rule)
{
	struct sg_event e;

	memset(&e, 0, sizeof(e));
	e.ts_ns = BOOT_TS_NS;
	e.type = type;
	e.action = action;
	e.rule = rule;
	e.pid = 4242;
	e.ppid = 4200;
	e.uid = 61000;
	strcpy(e.comm, "python3");
	return e;
}

/* The line is valid JSON, and jansson writes the same values back as the
 * very same bytes: the fixed-format encoder is byte for byte jansson's. */
static void assert_jansson_roundtrip(const char *line)
{
	json_error_t err;
	json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &err);
	char *again;

	if (!j)
		fail_msg("invalid JSON: %s: %s", err.text, line);
	again = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
	if (!again || strcmp(again, line))
		fail_msg("jansson writes it differently:\n ours:    %s\n jansson: %s", line,
			 again ? again : "(null)");
	free(again);
	json_decref(j);
}

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

static void set_args(struct sg_event *e, const char *args, size_t len, uint32_t args_len)
{
	memcpy(e->exec.args, args, len);
	e->exec.args_len = args_len;
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

static void set_comps(struct sg_event *e, uint32_t depth, const char *const *comps, int n)
{
	for (int i = 0; i < n; i++)
		strncpy(e->file.comps[i], comps[i], SG_COMP_LEN);
	e->file.depth = depth;
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
		cmocka_unit_test(test_decode_roundtrip),
		cmocka_unit_test(test_decode_userspace),
		cmocka_unit_test(test_decode_garbage),
		cmocka_unit_test(test_random_events_are_valid_json),
		cmocka_unit_test(test_context_ids),
		cmocka_unit_test(test_longest_line_fits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
