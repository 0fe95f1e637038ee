/* Policy validation errors: every kind of rejection, each with its exact
 * file:line:col and message, and that a rejected document leaves no policy
 * in the output (all zero). Columns are counted by hand in each document (1-based, in
 * characters). Numbers out of range, choices and list caps are in
 * test_policy_bounds.c. */
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
		"egress, files, exec, actions, failure, health, canary, warm, session, reward, verify, artifacts, tier, inference_devices)");
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
		"dead_windows, dead_epsilon, band_window, band_k, band_min_iqr)");
	expect_error("t", "{\"failure\": {\"retries\": 5}}", 1, 14,
		     "failure.retries: unknown key (expected one of: mode, max_retries)");
	expect_error("t", "{\"files\": {\"scratch\": \"/tmp\"}}", 1, 12,
		     "files.scratch: unknown key (expected one of: scratch_root, scratch_mb, "
		     "scratch_inodes, read_only)");
	expect_error("t", "{\"exec\": {\"deny\": []}}", 1, 11,
		     "exec.deny: unknown key (expected one of: allow)");
	/* The first problem in document order is the one reported. */
	expect_error(
		"t", "{\"zzz\": 1, \"enabled\": 1}", 1, 2,
		"zzz: unknown key (expected one of: tenant, enabled, require_agent, limits, "
		"egress, files, exec, actions, failure, health, canary, warm, session, reward, verify, artifacts, tier, inference_devices)");
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
	/* A reward program's argv: absolute paths, as read_only. */
	expect_error("t", "{\"reward\": {\"command\": [\"python3\"]}}", 1, 25,
		     "reward.command[0]: expected an absolute normalized path, got \"python3\": "
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
	expect_error(
		"t", "{\"été\": 1}", 1, 2,
		"été: unknown key (expected one of: tenant, enabled, require_agent, limits, "
		"egress, files, exec, actions, failure, health, canary, warm, session, reward, verify, artifacts, tier, inference_devices)");
	expect_error("t", "{\"verify\": {\"grader\": \"exact\"}}", 1, 23,
		     "verify.grader: expected one of \"strict\", \"lcb\", got \"exact\"");
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

/* artifacts.pins: {path, sha256}, both required, a digest of 64
 * lowercase hex digits (src/exec/artifact.h). */
static void test_artifact_pins(void **state)
{
	static const char hex[] =
		"bb36a291dbe285fd9bf7454f5f8218ffceee13a7b94947354720b085570b6906";
	char doc[512];
	struct sg_policy p;

	(void)state;
	snprintf(doc, sizeof(doc),
		 "{\"artifacts\": {\"require\": true, \"pins\": [{\"path\": \"/srv/r.py\", "
		 "\"sha256\": \"%s\"}]}}",
		 hex);
	expect_ok("acme.json", doc, &p);
	assert_true(p.artifacts.require);
	assert_int_equal(p.artifacts.n_pins, 1);
	assert_string_equal(p.artifacts.pins[0].path, "/srv/r.py");
	assert_string_equal(p.artifacts.pins[0].sha256, hex);
	expect_error(
		"acme.json",
		"{\"artifacts\": {\"pins\": [{\"path\": \"/srv/r.py\", \"sha256\": \"AB\"}]}}", 1,
		57,
		"artifacts.pins[0].sha256: expected a SHA-256 digest (64 lowercase hex digits), "
		"got \"AB\"");
	expect_error("acme.json", "{\"artifacts\": {\"pins\": [{\"path\": \"/srv/r.py\"}]}}", 1, 25,
		     "artifacts.pins[0]: missing key \"sha256\"");
	expect_error("acme.json", "{\"artifacts\": {\"public_keys\": [\"nope\"]}}", 1, 32,
		     "artifacts.public_keys[0]: expected a minisign Ed25519 public key (the base64 "
		     "line of its .pub file, starting \"RW\"), got \"nope\"");
}

/* Only the reward-model tier names an inference pool's devices, each a
 * node under /dev that is not the sandbox's own; "tier" may come after. */
static void test_inference_devices(void **state)
{
	struct sg_policy p;

	(void)state;
	expect_ok("acme.json",
		  "{\"inference_devices\": [\"/dev/nvidia3\", \"/dev/dri/renderD129\"], "
		  "\"tier\": \"reward-model\"}",
		  &p);
	assert_int_equal(p.tier, SG_TIER_REWARD_MODEL);
	assert_int_equal(p.n_inference_devices, 2);
	assert_string_equal(p.inference_devices[1], "/dev/dri/renderD129");
	expect_ok("acme.json", "{\"tier\": \"verifier\"}", &p);
	assert_int_equal(p.n_inference_devices, 0);
	expect_error("acme.json",
		     "{\"tier\": \"verifier\",\n \"inference_devices\": [\"/dev/nvidia3\"]}", 2, 2,
		     "inference_devices: only a policy with \"tier\": \"reward-model\" may name an "
		     "inference pool's devices (tenant code on a trainer's GPU could read or "
		     "corrupt the training job)");
	expect_error("acme.json", "{\"inference_devices\": [\"/dev/nvidia3\"]}", 1, 2,
		     "inference_devices: only a policy with \"tier\": \"reward-model\" may name an "
		     "inference pool's devices (tenant code on a trainer's GPU could read or "
		     "corrupt the training job)");
	static const char *const bad[] = { "/srv/gpu0", "/dev/a/b/c", "/dev/null", "/dev/shm/x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char doc[160], msg[400];

		snprintf(doc, sizeof(doc),
			 "{\"tier\": \"reward-model\", \"inference_devices\": [\"%s\"]}", bad[i]);
		snprintf(msg, sizeof(msg),
			 "inference_devices[0]: expected a device node under /dev, at most one "
			 "directory deep and not the sandbox's own (null, zero, random, urandom, "
			 "shm, fd, stdin, stdout, stderr), such as \"/dev/nvidia3\" or "
			 "\"/dev/dri/renderD129\", got \"%s\"",
			 bad[i]);
		expect_error("acme.json", doc, 1, 48, msg);
	}
	expect_error("acme.json", "{\"tier\": \"trainer\"}", 1, 10,
		     "tier: expected one of \"none\", \"function\", \"verifier\", "
		     "\"reward-model\", \"environment\", got \"trainer\"");
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
		cmocka_unit_test(test_ports),
		cmocka_unit_test(test_egress_entry_needs_a_cidr),
		cmocka_unit_test(test_bad_globs),
		cmocka_unit_test(test_bad_paths),
		cmocka_unit_test(test_artifact_pins),
		cmocka_unit_test(test_inference_devices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
