/* Policy validation errors: every kind of rejection, each with its exact
 * file:line:col and message, and that a rejected document leaves no policy
 * in the output (all zero). Columns are counted by hand in each document (1-based, in
 * characters). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "policy/policy.h"
#include "policy_expect.h"

/* ---- syntax, duplicates, unknown keys ----------------------------------- */

static void test_json_syntax_errors(void **state)
{
	expect_error("acme.json",
		     "{\n"
		     "  \"tenant\": \"acme\",\n"
		     "  \"enabled\": tru\n"
		     "}\n",
		     3, 16, "invalid JSON: invalid token near 'tru'");
	expect_error("acme.json",
		     "{\n"
		     "  \"tenant\": \"acme\",\n"
		     "}\n",
		     3, 1, "invalid JSON: string or '}' expected near '}'");
	expect_error("acme.json", "", 1, 1, "invalid JSON: '[' or '{' expected near end of file");
	expect_error("acme.json", "{} x", 1, 4, "invalid JSON: end of file expected near 'x'");
	expect_error("acme.json", "{\"limits\": {\"max_forks\": 1e999}}", 1, 30,
		     "invalid JSON: real number overflow near '1e999'");
}

static void test_duplicate_keys_point_at_the_second_key(void **state)
{
	expect_error("acme.json",
		     "{\n"
		     "  \"tenant\": \"acme\",\n"
		     "  \"tenant\": \"acme\"\n"
		     "}\n",
		     3, 3, "duplicate key \"tenant\": each key may appear once per object");
	expect_error("t",
		     "{\n"
		     "  \"limits\": {\n"
		     "    \"cpu\": 1,\n"
		     "    \"cpu\": 2\n"
		     "  }\n"
		     "}\n",
		     4, 5, "duplicate key \"cpu\": each key may appear once per object");
}

static void test_unknown_keys_point_at_the_key(void **state)
{
	expect_error(
		"acme.json",
		"{\n"
		"  \"tenant\": \"acme\",\n"
		"  \"limitz\": {}\n"
		"}\n",
		3, 3,
		"limitz: unknown key (expected one of: tenant, enabled, require_agent, limits, "
		"egress, files, exec, actions, failure, health, warm)");
	expect_error(
		"t",
		"{\n"
		"  \"limits\": {\n"
		"    \"timeout_ms\": 5,\n"
		"    \"max_task\": 3\n"
		"  }\n"
		"}\n",
		4, 5,
		"limits.max_task: unknown key (expected one of: timeout_ms, memory_mb, max_tasks, "
		"max_forks, cpu, concurrency, on_excess, queue_timeout_ms, output_bytes, open_files, "
		"file_size_mb, io_read_mbps, io_write_mbps, io_read_iops, io_write_iops)");
	expect_error("t",
		     "{\n"
		     "  \"egress\": {\n"
		     "    \"allow\": [\n"
		     "      { \"cidr\": \"10.0.0.0/8\", \"ports\": 80 }\n"
		     "    ]\n"
		     "  }\n"
		     "}\n",
		     4, 31,
		     "egress.allow[0].ports: unknown key (expected one of: cidr, port, proto)");
	expect_error(
		"t", "{\"actions\": {\"network\": \"deny\"}}", 1, 14,
		"actions.network: unknown key (expected one of: egress, file, fork, exec, memory)");
	expect_error(
		"t", "{\"health\": {\"window\": 5, \"windows\": 5}}", 1, 26,
		"health.windows: unknown key (expected one of: window, constant_rate, invalid_rate, "
		"dead_windows, dead_epsilon)");
	expect_error("t", "{\"failure\": {\"retries\": 5}}", 1, 14,
		     "failure.retries: unknown key (expected one of: mode, max_retries)");
	expect_error("t", "{\"files\": {\"scratch\": \"/tmp\"}}", 1, 12,
		     "files.scratch: unknown key (expected one of: scratch_root, scratch_mb, "
		     "scratch_inodes, read_only)");
	expect_error("t", "{\"exec\": {\"deny\": []}}", 1, 11,
		     "exec.deny: unknown key (expected one of: allow)");
	/* The first problem in document order is the one reported. */
	expect_error("t", "{\"zzz\": 1, \"enabled\": 1}", 1, 2,
		     "zzz: unknown key (expected one of: tenant, enabled, require_agent, limits, "
		     "egress, files, exec, actions, failure, health, warm)");
	expect_error("t", "{\"enabled\": 1, \"zzz\": 1}", 1, 13,
		     "enabled: expected true or false, got 1");
	/* Keys are matched after decoding escapes: "\u0074enant" is "tenant". */
	expect_error("t", "{\"\\u0074enant\": 7}", 1, 17,
		     "tenant: expected a tenant name ([a-z0-9][a-z0-9_-]{0,62}), got 7");
}

static void test_columns_count_characters(void **state)
{
	/* "é" is two bytes but one column, as in jansson's errors. */
	expect_error("t", "{\"files\": {\"read_only\": [\"/é\", \"rel\"]}}", 1, 32,
		     "files.read_only[1]: expected an absolute normalized path, got \"rel\": "
		     "not an absolute path (it must start with /)");
	/* Echoed strings are clipped on a character boundary, controls as '?'. */
	expect_error("t",
		     "{\"files\": {\"scratch_root\": \"x\\n23456789012345678901234567890123456789"
		     "0123456789012345678éé\"}}",
		     1, 28, /* byte 60 is inside the first é */
		     "files.scratch_root: expected an absolute normalized path, got "
		     "\"x?234567890123456789012345678901234567890123456789012345678...\": "
		     "not an absolute path (it must start with /)");
	expect_error("t",
		     "{\"files\": {\"scratch_root\": \"x\\n23456789012345678901234567890123456789"
		     "012345678901234567éé\"}}",
		     1, 28, /* the first é ends at byte 60 */
		     "files.scratch_root: expected an absolute normalized path, got "
		     "\"x?23456789012345678901234567890123456789012345678901234567é...\": "
		     "not an absolute path (it must start with /)");
	expect_error("t", "{\"été\": 1}", 1, 2,
		     "été: unknown key (expected one of: tenant, enabled, require_agent, limits, "
		     "egress, files, exec, actions, failure, health, warm)");
}

/* ---- types -------------------------------------------------------------- */

static void test_wrong_types(void **state)
{
	expect_error("t", "[]", 1, 1, "expected an object, got an array");
	expect_error("t", "  \n  [1]", 2, 3, "expected an object, got an array");
	expect_error("t", "{\"enabled\": 1}", 1, 13, "enabled: expected true or false, got 1");
	expect_error("t", "{\"require_agent\": \"yes\"}", 1, 19,
		     "require_agent: expected true or false, got \"yes\"");
	expect_error("t", "{\"limits\": []}", 1, 12, "limits: expected an object, got an array");
	expect_error("t", "{\"limits\": null}", 1, 12, "limits: expected an object, got null");
	expect_error("t", "{\"limits\": {\"timeout_ms\": \"5000\"}}", 1, 27,
		     "limits.timeout_ms: expected an integer in 1..3600000, got \"5000\"");
	expect_error("t", "{\"limits\": {\"cpu\": true}}", 1, 20,
		     "limits.cpu: expected a number in 0.01..1024, got true");
	expect_error("t", "{\"exec\": {\"allow\": \"/usr/bin/python3\"}}", 1, 20,
		     "exec.allow: expected an array, got \"/usr/bin/python3\"");
	expect_error("t", "{\"exec\": {\"allow\": [null]}}", 1, 21,
		     "exec.allow[0]: expected an absolute path glob, got null");
	expect_error("t", "{\"tenant\": 7}", 1, 12,
		     "tenant: expected a tenant name ([a-z0-9][a-z0-9_-]{0,62}), got 7");
	expect_error("t", "{\"egress\": {\"allow\": [\"10.0.0.0/8\"]}}", 1, 23,
		     "egress.allow[0]: expected an object, got \"10.0.0.0/8\"");
	expect_error("t", "{\"actions\": {\"file\": 1}}", 1, 22,
		     "actions.file: expected one of \"deny\", \"kill\", \"log\", got 1");
	expect_error("t", "{\"health\": {\"window\": 2.5}}", 1, 23,
		     "health.window: expected an integer in 1..100000, got 2.5");
	expect_error("t", "{\"limits\": {\"max_tasks\": 64.0}}", 1, 26,
		     "limits.max_tasks: expected an integer in 1..65536, got 64.0");
	expect_error("t", "{\"files\": {\"scratch_root\": 5}}", 1, 28,
		     "files.scratch_root: expected an absolute path, got 5");
	expect_error("t", "{\"files\": {\"read_only\": {}}}", 1, 25,
		     "files.read_only: expected an array, got an object");
	expect_error("t", "{\"egress\": {\"allow_unix\": \"no\"}}", 1, 27,
		     "egress.allow_unix: expected true or false, got \"no\"");
	expect_error(
		"t", "{\"egress\": {\"allow\": [{\"cidr\": 10}]}}", 1, 32,
		"egress.allow[0].cidr: expected a CIDR such as \"10.0.0.0/8\" or \"fd00::/8\", got 10");
}

/* ---- CIDRs and ports ------------------------------------------------------ */

static void expect_bad_cidr(const char *cidr_json, const char *got, const char *why)
{
	char doc[256], msg[256];

	snprintf(doc, sizeof(doc),
		 "{\n"
		 "  \"egress\": {\n"
		 "    \"allow\": [\n"
		 "      { \"cidr\": %s }\n"
		 "    ]\n"
		 "  }\n"
		 "}\n",
		 cidr_json);
	snprintf(msg, sizeof(msg),
		 "egress.allow[0].cidr: expected a CIDR such as \"10.0.0.0/8\" or "
		 "\"fd00::/8\", got %s: %s",
		 got, why);
	expect_error("t", doc, 4, 17, msg);
}

static void test_bad_cidrs(void **state)
{
	const char *v4prefix = "the prefix length after / must be a whole number in 0..32";
	const char *v6prefix = "the prefix length after / must be a whole number in 0..128";
	const char *v4 = "not an IPv4 address (a.b.c.d, each 0..255)";
	const char *host = "host bits are set: write the network's first address "
			   "(e.g. 10.0.0.0/8, not 10.1.2.3/8)";

	expect_bad_cidr("\"10.0.0.0/33\"", "\"10.0.0.0/33\"", v4prefix);
	expect_bad_cidr("\"300.1.1.1/8\"", "\"300.1.1.1/8\"", v4);
	expect_bad_cidr("\"10.0.0.0/8x\"", "\"10.0.0.0/8x\"", v4prefix);
	expect_bad_cidr("\"10.0.0.0/\"", "\"10.0.0.0/\"", v4prefix);
	expect_bad_cidr("\"10.0.0.0/08\"", "\"10.0.0.0/08\"", v4prefix);
	expect_bad_cidr("\"10.0.0.0/-8\"", "\"10.0.0.0/-8\"", v4prefix);
	expect_bad_cidr("\"10.0.0/8\"", "\"10.0.0/8\"", v4);
	expect_bad_cidr("\" 10.0.0.0/8\"", "\" 10.0.0.0/8\"", v4);
	expect_bad_cidr("\"010.0.0.0/8\"", "\"010.0.0.0/8\"", v4);
	expect_bad_cidr("\"10.1.2.3/8\"", "\"10.1.2.3/8\"", host);
	expect_bad_cidr("\"fd00::1/8\"", "\"fd00::1/8\"", host);
	expect_bad_cidr("\"fd00::/129\"", "\"fd00::/129\"", v6prefix);
	expect_bad_cidr("\"fd00:::/8\"", "\"fd00:::/8\"", "not an IPv6 address");
	expect_bad_cidr("\"fe80::1%eth0/128\"", "\"fe80::1%eth0/128\"", "not an IPv6 address");
	expect_bad_cidr("\"/8\"", "\"/8\"", "not an IPv4 or IPv6 address");
	expect_bad_cidr("\"\"", "\"\"", "not an IPv4 or IPv6 address");
	expect_bad_cidr("\"example.com/32\"", "\"example.com/32\"", v4);
}

static void expect_bad_port(const char *port, const char *got)
{
	char doc[256], msg[256];

	snprintf(doc, sizeof(doc),
		 "{\n"
		 "  \"egress\": {\n"
		 "    \"allow\": [\n"
		 "      { \"cidr\": \"10.0.0.0/8\", \"port\": %s }\n"
		 "    ]\n"
		 "  }\n"
		 "}\n",
		 port);
	snprintf(msg, sizeof(msg), "egress.allow[0].port: expected an integer in 0..65535, got %s",
		 got);
	expect_error("t", doc, 4, 39, msg);
}

static void test_ports(void **state)
{
	struct sg_policy p;

	expect_bad_port("65536", "65536");
	expect_bad_port("-1", "-1");
	expect_bad_port("80.5", "80.5");
	expect_bad_port("\"80\"", "\"80\"");
	expect_bad_port("true", "true");
	/* 0 is "any port"; 1..65535 are ports. */
	expect_ok("t",
		  "{\"egress\": {\"allow\": [{\"cidr\": \"10.0.0.0/8\", \"port\": 0},"
		  " {\"cidr\": \"10.0.0.0/8\", \"port\": 1, \"proto\": \"udp\"},"
		  " {\"cidr\": \"::/0\", \"port\": 65535, \"proto\": \"any\"},"
		  " {\"proto\": \"tcp\", \"cidr\": \"192.168.1.7\"}]}}",
		  &p);
	assert_int_equal(p.n_egress, 4);
	assert_int_equal(p.egress[0].port, 0);
	assert_int_equal(p.egress[0].proto, 0);
	assert_int_equal(p.egress[0].prefix, 104);
	assert_int_equal(p.egress[1].port, 1);
	assert_int_equal(p.egress[1].proto, IPPROTO_UDP);
	assert_int_equal(p.egress[2].port, 65535);
	assert_int_equal(p.egress[2].family, AF_INET6);
	assert_int_equal(p.egress[2].prefix, 0);
	assert_int_equal(p.egress[3].proto, IPPROTO_TCP); /* key order does not matter */
	assert_int_equal(p.egress[3].prefix, 128);        /* a bare address is one host */
}

static void test_egress_entry_needs_a_cidr(void **state)
{
	expect_error("t", "{\"egress\": {\"allow\": [{\"port\": 80}]}}", 1, 23,
		     "egress.allow[0]: missing key \"cidr\"");
	expect_error("t", "{\"egress\": {\"allow\": [{\"cidr\": \"10.0.0.0/8\"}, {}]}}", 1, 47,
		     "egress.allow[1]: missing key \"cidr\"");
}

/* ---- globs and paths ------------------------------------------------------ */

static void expect_bad_glob(const char *glob_json, const char *glob, const char *why)
{
	char doc[512], msg[512];

	snprintf(doc, sizeof(doc),
		 "{\n"
		 "  \"exec\": {\n"
		 "    \"allow\": [\"/usr/bin/python3\", %s]\n"
		 "  }\n"
		 "}\n",
		 glob_json);
	snprintf(msg, sizeof(msg),
		 "exec.allow[1]: expected an absolute path glob, got \"%.60s%s\": %s", glob,
		 strlen(glob) > 60 ? "..." : "", why);
	expect_error("t", doc, 3, 35, msg);
}

static void test_bad_globs(void **state)
{
	const char *unbalanced = "unbalanced '[': no ']' before the end of its path component";
	char long_json[320], long_glob[300];

	expect_bad_glob("\"python3\"", "python3", "not an absolute path (it must start with /)");
	expect_bad_glob("\"\"", "", "not an absolute path (it must start with /)");
	expect_bad_glob("\"*/python3\"", "*/python3",
			"not an absolute path (it must start with /)");
	expect_bad_glob("\"/usr/bin/[abc\"", "/usr/bin/[abc", unbalanced);
	expect_bad_glob("\"/usr/bin/[a/b]\"", "/usr/bin/[a/b]", unbalanced);
	expect_bad_glob("\"/usr/bin/[]\"", "/usr/bin/[]", unbalanced);
	expect_bad_glob("\"/usr/bin/[!]\"", "/usr/bin/[!]", unbalanced);
	expect_bad_glob("\"/usr/bin/[z-a]\"", "/usr/bin/[z-a]",
			"a range in [...] is reversed (write [a-z], not [z-a])");
	expect_bad_glob("\"/usr/bin/[[:alpha:]]\"", "/usr/bin/[[:alpha:]]",
			"[:class:], [=c=] and [.c.] are not supported inside [...]");
	expect_bad_glob("\"/usr/bin/python\\\\\"", "/usr/bin/python\\", "ends in a lone backslash");
	expect_bad_glob("\"/usr\\\\/bin\"", "/usr\\/bin", "a '/' cannot be escaped");
	expect_bad_glob("\"/usr//bin/python3\"", "/usr//bin/python3",
			"contains an empty component (//)");
	expect_bad_glob("\"/usr/bin/../bin/sh\"", "/usr/bin/../bin/sh",
			"contains a . or .. component (write the normalized path)");
	expect_bad_glob("\"/usr/./bin/sh\"", "/usr/./bin/sh",
			"contains a . or .. component (write the normalized path)");
	expect_bad_glob("\"/usr/bin/\"", "/usr/bin/", "ends in / (write the path without it)");
	memset(long_glob, 'a', 256);
	long_glob[0] = '/';
	long_glob[256] = '\0';
	snprintf(long_json, sizeof(long_json), "\"%s\"", long_glob);
	expect_bad_glob(long_json, long_glob, "longer than 255 bytes");
}

static void expect_bad_read_only(const char *path_json, const char *msg_tail)
{
	char doc[256], msg[256];

	snprintf(doc, sizeof(doc),
		 "{\n"
		 "  \"files\": {\n"
		 "    \"read_only\": [\"/usr\", %s]\n"
		 "  }\n"
		 "}\n",
		 path_json);
	snprintf(msg, sizeof(msg), "files.read_only[1]: %s", msg_tail);
	expect_error("t", doc, 3, 27, msg);
}

static void test_bad_paths(void **state)
{
	expect_bad_read_only("\"usr/lib\"",
			     "expected an absolute normalized path, got \"usr/lib\": "
			     "not an absolute path (it must start with /)");
	expect_bad_read_only("\"./lib\"", "expected an absolute normalized path, got \"./lib\": "
					  "not an absolute path (it must start with /)");
	expect_bad_read_only("\"/usr/../etc\"",
			     "expected an absolute normalized path, got \"/usr/../etc\": "
			     "contains a . or .. component (write the normalized path)");
	expect_bad_read_only("\"/usr/lib/\"",
			     "expected an absolute normalized path, got \"/usr/lib/\": "
			     "ends in / (write the path without it)");
	expect_bad_read_only("\"/\"", "\"/\" would allow every file; name the directories instead");
	expect_bad_read_only("\"/usr/lib/python3*\"",
			     "expected a plain path, got \"/usr/lib/python3*\": "
			     "read_only entries are not globs");
	expect_bad_read_only("7", "expected an absolute path, got 7");
	expect_error(
		"t", "{\"files\": {\"scratch_root\": \"tmp/scratch\"}}", 1, 28,
		"files.scratch_root: expected an absolute normalized path, got \"tmp/scratch\": "
		"not an absolute path (it must start with /)");
	expect_error(
		"t", "{\"files\": {\"scratch_root\": \"/\"}}", 1, 28,
		"files.scratch_root: \"/\" would allow every file; name the directories instead");
}

/* ---- ranges --------------------------------------------------------------- */

enum ftype { U32, U64, DBL };

struct range_case {
	const char *section, *key;
	const char *min, *max, *below, *above; /* as written in JSON */
	const char *range;                     /* as the message prints it */
	enum ftype type;
	size_t off;
	double vmin, vmax; /* what min and max store */
};

#define RC(sec, k, m, lo, hi, b, a, rng, t, vlo, vhi)                                 \
	{                                                                             \
		sec, k, lo, hi, b, a, rng, t, offsetof(struct sg_policy, m), vlo, vhi \
	}

static const struct range_case ranges[] = {
	RC("limits", "timeout_ms", limits.timeout_ms, "1", "3600000", "0", "3600001",
	   "an integer in 1..3600000", U64, 1, 3600000),
	RC("limits", "memory_mb", limits.memory_mb, "16", "1048576", "15", "1048577",
	   "an integer in 16..1048576", U64, 16, 1048576),
	RC("limits", "max_tasks", limits.max_tasks, "1", "65536", "0", "65537",
	   "an integer in 1..65536", U32, 1, 65536),
	RC("limits", "max_forks", limits.max_forks, "1", "10000000", "0", "10000001",
	   "an integer in 1..10000000", U32, 1, 10000000),
	RC("limits", "cpu", limits.cpu, "0.01", "1024", "0.009", "1024.5", "a number in 0.01..1024",
	   DBL, 0.01, 1024),
	RC("limits", "concurrency", limits.concurrency, "1", "4096", "0", "4097",
	   "an integer in 1..4096", U32, 1, 4096),
	RC("limits", "queue_timeout_ms", limits.queue_timeout_ms, "0", "3600000", "-1", "3600001",
	   "an integer in 0..3600000", U64, 0, 3600000),
	RC("limits", "output_bytes", limits.output_bytes, "1", "1073741824", "0", "1073741825",
	   "an integer in 1..1073741824", U64, 1, 1073741824),
	RC("limits", "open_files", limits.open_files, "16", "1048576", "15", "1048577",
	   "an integer in 16..1048576", U32, 16, 1048576),
	RC("limits", "file_size_mb", limits.file_size_mb, "1", "1048576", "0", "1048577",
	   "an integer in 1..1048576", U64, 1, 1048576),
	RC("limits", "io_read_mbps", limits.io_read_mbps, "0", "1048576", "-1", "1048577",
	   "an integer in 0..1048576", U64, 0, 1048576),
	RC("limits", "io_write_mbps", limits.io_write_mbps, "0", "1048576", "-1", "1048577",
	   "an integer in 0..1048576", U64, 0, 1048576),
	RC("limits", "io_read_iops", limits.io_read_iops, "0", "10000000", "-1", "10000001",
	   "an integer in 0..10000000", U64, 0, 10000000),
	RC("limits", "io_write_iops", limits.io_write_iops, "0", "10000000", "-1", "10000001",
	   "an integer in 0..10000000", U64, 0, 10000000),
	RC("egress", "max_connections", max_connections, "1", "4096", "0", "4097",
	   "an integer in 1..4096", U32, 1, 4096),
	RC("files", "scratch_mb", scratch_mb, "1", "1048576", "0", "1048577",
	   "an integer in 1..1048576", U64, 1, 1048576),
	RC("files", "scratch_inodes", scratch_inodes, "64", "16777216", "63", "16777217",
	   "an integer in 64..16777216", U64, 64, 16777216),
	RC("failure", "max_retries", max_retries, "0", "100", "-1", "101", "an integer in 0..100",
	   U32, 0, 100),
	RC("health", "window", health.window, "1", "100000", "0", "100001",
	   "an integer in 1..100000", U32, 1, 100000),
	RC("health", "constant_rate", health.constant_rate, "0", "1.0", "-0.1", "1.5",
	   "a number in 0..1", DBL, 0, 1),
	RC("health", "invalid_rate", health.invalid_rate, "0.0", "1", "-0.1", "1.01",
	   "a number in 0..1", DBL, 0, 1),
	RC("health", "dead_windows", health.dead_windows, "1", "10000", "0", "10001",
	   "an integer in 1..10000", U32, 1, 10000),
	RC("health", "dead_epsilon", health.dead_epsilon, "0", "1", "-1e-09", "1.5",
	   "a number in 0..1", DBL, 0, 1),
};

static double stored(const struct sg_policy *p, const struct range_case *rc)
{
	const char *base = (const char *)p + rc->off;

	switch (rc->type) {
	case U32:
		return *(const uint32_t *)base;
	case U64:
		return (double)*(const uint64_t *)base;
	case DBL:
		return *(const double *)base;
	}
	return -1;
}

static void test_value_ranges(void **state)
{
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		const struct range_case *rc = &ranges[i];
		const char *bad[2] = { rc->below, rc->above };
		char doc[200], msg[200], prefix[100];
		struct sg_policy p;

		snprintf(doc, sizeof(doc), "{\"%s\": {\"%s\": %s}}", rc->section, rc->key, rc->min);
		expect_ok("t", doc, &p);
		assert_true(stored(&p, rc) == rc->vmin);
		snprintf(doc, sizeof(doc), "{\"%s\": {\"%s\": %s}}", rc->section, rc->key, rc->max);
		expect_ok("t", doc, &p);
		assert_true(stored(&p, rc) == rc->vmax);
		for (int b = 0; b < 2; b++) {
			/* The value starts right after "{"<section>": {"<key>": ". */
			int col = snprintf(prefix, sizeof(prefix),
					   "{\"%s\": {\"%s\": ", rc->section, rc->key) +
				  1;
			snprintf(doc, sizeof(doc), "%s%s}}", prefix, bad[b]);
			snprintf(msg, sizeof(msg), "%s.%s: expected %s, got %s", rc->section,
				 rc->key, rc->range, bad[b]);
			expect_error("t", doc, 1, col, msg);
		}
	}
}

/* ---- choices ---------------------------------------------------------------- */

static void test_choices(void **state)
{
	struct sg_policy p;

	expect_error("t", "{\"limits\": {\"on_excess\": \"block\"}}", 1, 26,
		     "limits.on_excess: expected one of \"wait\", \"refuse\", got \"block\"");
	expect_error("t", "{\"failure\": {\"mode\": \"abort\"}}", 1, 22,
		     "failure.mode: expected one of \"retry\", \"skip\", \"pause\", got \"abort\"");
	expect_error(
		"t", "{\"egress\": {\"allow\": [{\"cidr\": \"::1\", \"proto\": \"icmp\"}]}}", 1, 48,
		"egress.allow[0].proto: expected one of \"tcp\", \"udp\", \"any\", got \"icmp\"");
	/* Each rule takes only the actions that mean something for it. */
	expect_error("t", "{\"actions\": {\"fork\": \"deny\"}}", 1, 22,
		     "actions.fork: expected one of \"kill\", \"log\", got \"deny\"");
	expect_error("t", "{\"actions\": {\"memory\": \"log\"}}", 1, 24,
		     "actions.memory: expected \"kill\", got \"log\"");
	expect_error("t", "{\"actions\": {\"egress\": \"Deny\"}}", 1, 24,
		     "actions.egress: expected one of \"deny\", \"kill\", \"log\", got \"Deny\"");
	expect_error("t", "{\"actions\": {\"exec\": \"allow\"}}", 1, 22,
		     "actions.exec: expected one of \"deny\", \"kill\", \"log\", got \"allow\"");

	expect_ok(
		"t",
		"{\"limits\": {\"on_excess\": \"refuse\"}, \"failure\": {\"mode\": \"skip\"},"
		" \"actions\": {\"egress\": \"log\", \"file\": \"log\", \"fork\": \"log\", \"exec\": \"deny\","
		" \"memory\": \"kill\"}}",
		&p);
	assert_int_equal(p.limits.on_excess, SG_EXCESS_REFUSE);
	assert_int_equal(p.failure, SG_FAILURE_SKIP);
	assert_int_equal(p.action[SG_RULE_EGRESS], SG_POLICY_LOG);
	assert_int_equal(p.action[SG_RULE_FILE], SG_POLICY_LOG);
	assert_int_equal(p.action[SG_RULE_FORK], SG_POLICY_LOG);
	assert_int_equal(p.action[SG_RULE_EXEC], SG_POLICY_DENY);
	assert_int_equal(p.action[SG_RULE_MEMORY], SG_POLICY_KILL);
}

/* ---- array caps ------------------------------------------------------------- */

/* {"<section>": {"<key>": [<item>, <item>, ...]}} with n items. */
static char *list_doc(const char *section, const char *key, const char *item, int n,
		      int *col_of_last)
{
	size_t cap = 64 + (strlen(item) + 2) * (size_t)n;
	char *doc = malloc(cap);
	int len;

	assert_non_null(doc);
	len = snprintf(doc, cap, "{\"%s\": {\"%s\": [", section, key);
	for (int i = 0; i < n; i++) {
		if (i == n - 1)
			*col_of_last = len + 1 + (i ? 2 : 0);
		len += snprintf(doc + len, cap - (size_t)len, "%s%s", i ? ", " : "", item);
	}
	snprintf(doc + len, cap - (size_t)len, "]}}");
	return doc;
}

/* "warm": the interpreter is a choice, preloads are module names. */
static void test_warm(void **state)
{
	struct sg_policy p;

	expect_error("t", "{\"warm\": {\"interpreter\": \"node\"}}", 1, 26,
		     "warm.interpreter: expected one of \"none\", \"python3\", got \"node\"");
	expect_error("t", "{\"warm\": {\"preload\": [\"os\", \"../x\"]}}", 1, 29,
		     "warm.preload[1]: expected a Python module name such as \"reward\" or "
		     "\"pkg.mod\" (at most 63 bytes), got \"../x\"");
	expect_error("t", "{\"warm\": {\"preload\": [\"a..b\"]}}", 1, 23,
		     "warm.preload[0]: expected a Python module name such as \"reward\" or "
		     "\"pkg.mod\" (at most 63 bytes), got \"a..b\"");
	expect_error("t", "{\"warm\": {\"preload\": [\"1x\"]}}", 1, 23,
		     "warm.preload[0]: expected a Python module name such as \"reward\" or "
		     "\"pkg.mod\" (at most 63 bytes), got \"1x\"");
	expect_error("t", "{\"warm\": {\"max_calls\": 0}}", 1, 24,
		     "warm.max_calls: expected an integer in 1..1000000, got 0");

	expect_ok("t", "{}", &p);
	assert_int_equal(p.warm.interpreter, SG_WARM_OFF);
	assert_int_equal(p.warm.max_calls, 1000);
	expect_ok("t",
		  "{\"warm\": {\"interpreter\": \"python3\", \"preload\": [\"reward\", "
		  "\"pkg._m2\"], \"max_calls\": 5, \"max_age_s\": 60, \"max_growth_mb\": 8}}",
		  &p);
	assert_int_equal(p.warm.interpreter, SG_WARM_PYTHON3);
	assert_int_equal(p.warm.n_preload, 2);
	assert_string_equal(p.warm.preload[0], "reward");
	assert_string_equal(p.warm.preload[1], "pkg._m2");
	assert_int_equal(p.warm.max_calls, 5);
	assert_int_equal(p.warm.max_age_s, 60);
	assert_int_equal(p.warm.max_growth_mb, 8);
	(void)state;
}

static void test_too_many_entries(void **state)
{
	static const struct {
		const char *section, *key, *item;
		int cap;
	} lists[] = {
		{ "exec", "allow", "\"/usr/bin/a\"", SG_POLICY_GLOBS },
		{ "files", "read_only", "\"/opt/a\"", SG_POLICY_PATHS },
		{ "egress", "allow", "{\"cidr\": \"10.0.0.0/8\"}", SG_POLICY_EGRESS },
	};

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		struct sg_policy p;
		char msg[128];
		int col;
		char *doc =
			list_doc(lists[i].section, lists[i].key, lists[i].item, lists[i].cap, &col);
		expect_ok("t", doc, &p);
		free(doc);
		doc = list_doc(lists[i].section, lists[i].key, lists[i].item, lists[i].cap + 1,
			       &col);
		snprintf(msg, sizeof(msg), "%s.%s[%d]: too many entries: at most %d, got %d",
			 lists[i].section, lists[i].key, lists[i].cap, lists[i].cap,
			 lists[i].cap + 1);
		expect_error("t", doc, 1, col, msg);
		free(doc);
	}
}

static void test_full_lists_are_stored(void **state)
{
	struct sg_policy p;
	int col;
	char *doc = list_doc("exec", "allow", "\"/usr/bin/a\"", SG_POLICY_GLOBS, &col);

	expect_ok("t", doc, &p);
	assert_int_equal(p.n_exec_allow, SG_POLICY_GLOBS);
	assert_string_equal(p.exec_allow[SG_POLICY_GLOBS - 1], "/usr/bin/a");
	free(doc);
	doc = list_doc("egress", "allow", "{\"cidr\": \"10.0.0.0/8\", \"port\": 53}",
		       SG_POLICY_EGRESS, &col);
	expect_ok("t", doc, &p);
	assert_int_equal(p.n_egress, SG_POLICY_EGRESS);
	assert_int_equal(p.egress[SG_POLICY_EGRESS - 1].port, 53);
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_syntax_errors),
		cmocka_unit_test(test_duplicate_keys_point_at_the_second_key),
		cmocka_unit_test(test_unknown_keys_point_at_the_key),
		cmocka_unit_test(test_columns_count_characters),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_bad_cidrs),
		cmocka_unit_test(test_warm),
		cmocka_unit_test(test_ports),
		cmocka_unit_test(test_egress_entry_needs_a_cidr),
		cmocka_unit_test(test_bad_globs),
		cmocka_unit_test(test_bad_paths),
		cmocka_unit_test(test_value_ranges),
		cmocka_unit_test(test_choices),
		cmocka_unit_test(test_too_many_entries),
		cmocka_unit_test(test_full_lists_are_stored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
