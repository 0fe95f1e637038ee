/* Policies that load: the defaults (embedded copy == built-in values ==
 * policies/default.json), the example policies, overrides, tenant and file
 * names, loading files, and how policy_for_tenant falls back. The
 * rejections are in test_policy_errors.c. */
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
#include "lib/rule_names.h"

/* ---- helpers ---------------------------------------------------------- */

/* The repository root: $SANDGUARD_SRC, the current directory, or two
 * levels above this binary ($(BUILD)/tests/test_policy). */
static const char *src_dir(void)
{
	static char dir[PATH_MAX];
	char exe[PATH_MAX], probe[PATH_MAX + 32];
	const char *env = getenv("SANDGUARD_SRC");
	ssize_t n;

	if (env && *env)
		return env;
	if (access("policies/default.json", R_OK) == 0)
		return ".";
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		snprintf(dir, sizeof(dir), "%s", exe);
		for (int up = 0; up < 3; up++) {
			char *slash = strrchr(dir, '/');
			if (!slash)
				break;
			*slash = '\0';
			snprintf(probe, sizeof(probe), "%s/policies/default.json", dir);
			if (access(probe, R_OK) == 0)
				return dir;
		}
	}
	fail_msg("cannot find the source tree (policies/default.json); set SANDGUARD_SRC");
	return NULL;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		fail_msg("cannot create %s: %s", path, strerror(errno));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* ---- defaults --------------------------------------------------------- */

static void test_embedded_default_is_policy_defaults(void **state)
{
	struct sg_policy parsed, want;
	size_t len = 0;
	const char *text = policy_embedded_default(&len);

	assert_non_null(text);
	assert_true(len > 100);
	assert_int_equal(text[len], '\0'); /* NUL-terminated */
	expect_ok("<embedded>", text, &parsed);
	policy_defaults(&want);
	/* Field by field first, for a readable failure ... */
	assert_string_equal(parsed.tenant, "default");
	assert_true(parsed.enabled);
	assert_false(parsed.require_agent);
	assert_int_equal(parsed.limits.timeout_ms, want.limits.timeout_ms);
	assert_int_equal(parsed.limits.memory_mb, want.limits.memory_mb);
	assert_int_equal(parsed.limits.max_tasks, want.limits.max_tasks);
	assert_int_equal(parsed.limits.max_forks, want.limits.max_forks);
	assert_true(parsed.limits.cpu == want.limits.cpu);
	assert_int_equal(parsed.limits.concurrency, want.limits.concurrency);
	assert_int_equal(parsed.limits.on_excess, want.limits.on_excess);
	assert_int_equal(parsed.limits.queue_timeout_ms, want.limits.queue_timeout_ms);
	assert_int_equal(parsed.limits.output_bytes, want.limits.output_bytes);
	assert_int_equal(parsed.limits.open_files, want.limits.open_files);
	assert_int_equal(parsed.limits.file_size_mb, want.limits.file_size_mb);
	assert_int_equal(parsed.scratch_mb, want.scratch_mb);
	assert_int_equal(parsed.scratch_inodes, want.scratch_inodes);
	assert_int_equal(parsed.allow_listen, want.allow_listen);
	assert_int_equal(parsed.max_connections, want.max_connections);
	assert_int_equal(parsed.n_egress, want.n_egress);
	assert_int_equal(parsed.allow_unix, want.allow_unix);
	assert_string_equal(parsed.scratch_root, want.scratch_root);
	assert_int_equal(parsed.n_read_only, want.n_read_only);
	for (int i = 0; i < want.n_read_only; i++)
		assert_string_equal(parsed.read_only[i], want.read_only[i]);
	assert_int_equal(parsed.n_exec_allow, want.n_exec_allow);
	for (int i = 0; i < want.n_exec_allow; i++)
		assert_string_equal(parsed.exec_allow[i], want.exec_allow[i]);
	for (int r = 0; r < SG_RULE__COUNT; r++)
		assert_int_equal(parsed.action[r], want.action[r]);
	assert_int_equal(parsed.failure, want.failure);
	assert_int_equal(parsed.max_retries, want.max_retries);
	assert_int_equal(parsed.health.window, want.health.window);
	assert_true(parsed.health.constant_rate == want.health.constant_rate);
	assert_true(parsed.health.invalid_rate == want.health.invalid_rate);
	assert_int_equal(parsed.health.dead_windows, want.health.dead_windows);
	assert_true(parsed.health.dead_epsilon == want.health.dead_epsilon);
	assert_string_equal(parsed.source, "<embedded>");
	/* ... then every byte, so a field added later cannot drift either. */
	assert_memory_equal(&parsed, &want, sizeof(want));
}

static void test_default_file_is_the_embedded_copy(void **state)
{
	char path[PATH_MAX];
	size_t len, elen;
	char *text;
	const char *embedded = policy_embedded_default(&elen);
	struct sg_policy p, want;
	struct sg_policy_error err;

	snprintf(path, sizeof(path), "%s/policies/default.json", src_dir());
	text = read_all(path, &len);
	assert_int_equal(len, elen);
	assert_memory_equal(text, embedded, len);
	free(text);
	assert_int_equal(policy_load_file(path, &p, &err), 0);
	policy_defaults(&want);
	snprintf(want.source, sizeof(want.source), "%.255s", path);
	assert_memory_equal(&p, &want, sizeof(want));
}

static void test_empty_object_is_all_defaults(void **state)
{
	struct sg_policy p, want;

	expect_ok("<embedded>", "{}", &p);
	policy_defaults(&want);
	assert_memory_equal(&p, &want, sizeof(want));
}

static void test_fields_override_defaults_and_lists_replace(void **state)
{
	struct sg_policy p;

	expect_ok(
		"t",
		"{\"limits\": {\"max_tasks\": 7, \"cpu\": 2},"
		" \"files\": {\"read_only\": [\"/opt/model\"]},"
		" \"exec\": {\"allow\": []},"
		" \"actions\": {\"fork\": \"log\", \"egress\": \"kill\", \"file\": \"deny\"},"
		" \"failure\": {\"mode\": \"pause\"}, \"enabled\": false, \"require_agent\": true}",
		&p);
	assert_int_equal(p.limits.max_tasks, 7);
	assert_true(p.limits.cpu == 2.0);
	assert_int_equal(p.limits.timeout_ms, 10000); /* untouched: default */
	assert_int_equal(p.n_read_only, 1);           /* replaced, not appended */
	assert_string_equal(p.read_only[0], "/opt/model");
	assert_string_equal(p.read_only[1], "");
	assert_int_equal(p.n_exec_allow, 0);
	assert_string_equal(p.exec_allow[0], "");
	assert_int_equal(p.action[SG_RULE_FORK], SG_POLICY_LOG);
	assert_int_equal(p.action[SG_RULE_EGRESS], SG_POLICY_KILL);
	assert_int_equal(p.action[SG_RULE_FILE], SG_POLICY_DENY);
	assert_int_equal(p.action[SG_RULE_EXEC], SG_POLICY_KILL);
	assert_int_equal(p.failure, SG_FAILURE_PAUSE);
	assert_false(p.enabled);
	assert_true(p.require_agent);

	/* The sandbox's own bounds. */
	expect_ok(
		"t",
		"{\"limits\": {\"open_files\": 64, \"file_size_mb\": 8, \"io_read_mbps\": 100,"
		" \"io_write_iops\": 50},"
		" \"egress\": {\"allow_listen\": true, \"max_connections\": 3},"
		" \"files\": {\"scratch_mb\": 32, \"scratch_inodes\": 128},"
		" \"reward\": {\"command\": [\"/usr/bin/python3\", \"/srv/rewards/t/score.py\"]}}",
		&p);
	assert_int_equal(p.limits.open_files, 64);
	assert_int_equal(p.limits.file_size_mb, 8);
	assert_int_equal(p.limits.io_read_mbps, 100);
	assert_int_equal(p.limits.io_write_mbps, 0);
	assert_int_equal(p.limits.io_write_iops, 50);
	assert_true(p.allow_listen);
	assert_int_equal(p.max_connections, 3);
	assert_int_equal(p.scratch_mb, 32);
	assert_int_equal(p.scratch_inodes, 128);
	assert_int_equal(p.n_reward_command, 2);
	assert_string_equal(p.reward_command[1], "/srv/rewards/t/score.py");
	assert_string_equal(p.scratch_root, "/var/lib/sandguard/scratch");
	assert_string_equal(p.tenant, "default");
	assert_string_equal(p.source, "t");
}

static void test_example_policies_are_valid(void **state)
{
	static const char *const tiers[] = { "function", "verifier", "reward-model",
					     "environment" };
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(tiers) / sizeof(tiers[0]); i++) {
		struct sg_policy p;
		struct sg_policy_error err;
		snprintf(path, sizeof(path), "%s/policies/examples/%s.json", src_dir(), tiers[i]);
		if (policy_load_file(path, &p, &err)) {
			char line[600];
			policy_error_format(&err, line, sizeof(line));
			fail_msg("%s", line);
		}
		assert_string_equal(p.tenant, tiers[i]);
	}
	/* The environment tier's one exception: the logged egress proxy. */
	struct sg_policy env;
	struct sg_policy_error err;
	static const uint8_t proxy[16] = { [10] = 0xff, [11] = 0xff, 10, 8, 0, 10 };
	snprintf(path, sizeof(path), "%s/policies/examples/environment.json", src_dir());
	assert_int_equal(policy_load_file(path, &env, &err), 0);
	assert_int_equal(env.n_egress, 2);
	assert_int_equal(env.egress[0].family, AF_INET);
	assert_memory_equal(env.egress[0].addr, proxy, 16);
	assert_int_equal(env.egress[0].prefix, 128);
	assert_int_equal(env.egress[0].port, 3128);
	assert_int_equal(env.egress[0].proto, IPPROTO_TCP);
	assert_int_equal(env.egress[1].family, AF_INET6);
	assert_true(env.require_agent);
}

/* ---- tenants and file names ------------------------------------------------- */

static void test_tenant_name_valid(void **state)
{
	char longest[64], too_long[65];

	memset(longest, 'a', 63);
	longest[63] = '\0';
	memset(too_long, 'a', 64);
	too_long[64] = '\0';
	assert_true(tenant_name_valid("a"));
	assert_true(tenant_name_valid("0"));
	assert_true(tenant_name_valid("acme"));
	assert_true(tenant_name_valid("acme-prod_2"));
	assert_true(tenant_name_valid(longest));
	assert_false(tenant_name_valid(too_long));
	assert_false(tenant_name_valid(""));
	assert_false(tenant_name_valid(NULL));
	assert_false(tenant_name_valid("Acme"));
	assert_false(tenant_name_valid("-acme"));
	assert_false(tenant_name_valid("_acme"));
	assert_false(tenant_name_valid("acme.prod"));
	assert_false(tenant_name_valid("acme prod"));
	assert_false(tenant_name_valid("acme/x"));
	assert_false(tenant_name_valid("été"));

	expect_error("t", "{\"tenant\": \"Acme\"}", 1, 12,
		     "tenant: expected a tenant name ([a-z0-9][a-z0-9_-]{0,62}), got \"Acme\"");
	expect_error("t", "{\"tenant\": \"\"}", 1, 12,
		     "tenant: expected a tenant name ([a-z0-9][a-z0-9_-]{0,62}), got \"\"");
	expect_error("t", "{\"tenant\": \"../etc\"}", 1, 12,
		     "tenant: expected a tenant name ([a-z0-9][a-z0-9_-]{0,62}), got \"../etc\"");
}

static void test_file_name_must_match_tenant(void **state)
{
	struct sg_policy p;

	expect_error("acme.json",
		     "{\n"
		     "  \"tenant\": \"other\"\n"
		     "}\n",
		     2, 13, "tenant: expected \"acme\" (the file is acme.json), got \"other\"");
	expect_error("policies/default.json", "{\"tenant\": \"acme\"}", 1, 12,
		     "tenant: expected \"default\" (the file is default.json), got \"acme\"");
	expect_error("Bad Name.json", "{}", 1, 1,
		     "no \"tenant\" key, and the file name \"Bad Name.json\" is not <tenant>.json "
		     "with tenant [a-z0-9][a-z0-9_-]{0,62}");
	expect_error("Bad.json", "{\"tenant\": \"bad\"}", 1, 12,
		     "tenant: the file name \"Bad.json\" is not <tenant>.json with tenant "
		     "[a-z0-9][a-z0-9_-]{0,62}");

	expect_ok("/etc/sandguard/acme.json", "{}", &p);
	assert_string_equal(p.tenant, "acme"); /* from the file name */
	expect_ok("/etc/sandguard/acme.json", "{\"tenant\": \"acme\"}", &p);
	assert_string_equal(p.tenant, "acme");
	expect_ok("default.json", "{}", &p);
	assert_string_equal(p.tenant, "default");
	expect_ok("acme.policy", "{\"tenant\": \"other\"}", &p); /* not a .json file name */
	assert_string_equal(p.tenant, "other");
}

/* ---- files and directories --------------------------------------------------- */

struct tmpdir {
	char path[64];
};

static void tmpdir_make(struct tmpdir *t)
{
	snprintf(t->path, sizeof(t->path), "/tmp/sg-test-policy.XXXXXX");
	assert_non_null(mkdtemp(t->path));
}

static void tmpdir_file(const struct tmpdir *t, const char *name, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", t->path, name);
	write_file(path, text);
}

static void tmpdir_remove(const struct tmpdir *t)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->path);
	assert_int_equal(system(cmd), 0);
}

static void test_load_file_errors(void **state)
{
	struct tmpdir t;
	struct sg_policy p;
	struct sg_policy_error err;
	char path[PATH_MAX], line[600];

	tmpdir_make(&t);
	snprintf(path, sizeof(path), "%s/nosuch.json", t.path);
	assert_int_equal(policy_load_file(path, &p, &err), -ENOENT);
	assert_int_equal(err.line, 0);
	assert_string_equal(err.file, path);
	assert_string_equal(err.msg, "cannot read: No such file or directory");

	/* A directory or a FIFO is not a policy (and must not block). */
	snprintf(path, sizeof(path), "%s/dir.json", t.path);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(policy_load_file(path, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "not a regular file");
	snprintf(path, sizeof(path), "%s/fifo.json", t.path);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(policy_load_file(path, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "not a regular file");

	/* Over 1 MiB is refused before parsing. */
	snprintf(path, sizeof(path), "%s/big.json", t.path);
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (1 << 20) + 1), 0);
	close(fd);
	assert_int_equal(policy_load_file(path, &p, &err), -EFBIG);

	/* An invalid file reports its path. */
	snprintf(path, sizeof(path), "%s/acme.json", t.path);
	write_file(path, "{\n  \"limits\": {\"max_tasks\": 0}\n}\n");
	assert_int_equal(policy_load_file(path, &p, &err), -EINVAL);
	policy_error_format(&err, line, sizeof(line));
	char want[PATH_MAX + 100];
	snprintf(want, sizeof(want),
		 "%s:2:27: limits.max_tasks: expected an integer in 1..65536, got 0", path);
	assert_string_equal(line, want);
	tmpdir_remove(&t);
}

static void test_error_format(void **state)
{
	struct sg_policy_error e = {
		.file = "acme.json", .line = 7, .col = 18, .msg = "limits.max_tasks: x"
	};
	char buf[600];

	policy_error_format(&e, buf, sizeof(buf));
	assert_string_equal(buf, "acme.json:7:18: limits.max_tasks: x");
	e.line = e.col = 0;
	snprintf(e.msg, sizeof(e.msg), "cannot read: Permission denied");
	policy_error_format(&e, buf, sizeof(buf));
	assert_string_equal(buf, "acme.json: cannot read: Permission denied");
}

static void test_policy_for_tenant(void **state)
{
	struct tmpdir t;
	struct sg_policy p, want;
	struct sg_policy_error err;
	char path[PATH_MAX];

	/* No directory at all: the embedded default, for the asked tenant. */
	policy_defaults(&want);
	snprintf(want.tenant, sizeof(want.tenant), "acme");
	assert_int_equal(policy_for_tenant("/nonexistent/sandguard-policies", "acme", &p, &err), 0);
	assert_memory_equal(&p, &want, sizeof(want));
	assert_int_equal(policy_for_tenant(NULL, "acme", &p, &err), 0);
	assert_memory_equal(&p, &want, sizeof(want));

	/* An empty directory: the same. */
	tmpdir_make(&t);
	assert_int_equal(policy_for_tenant(t.path, "acme", &p, &err), 0);
	assert_memory_equal(&p, &want, sizeof(want));

	/* default.json applies to tenants without their own file. */
	tmpdir_file(&t, "default.json",
		    "{\"tenant\": \"default\", \"limits\": {\"max_tasks\": 9}}");
	assert_int_equal(policy_for_tenant(t.path, "acme", &p, &err), 0);
	assert_string_equal(p.tenant, "acme");
	assert_int_equal(p.limits.max_tasks, 9);
	snprintf(path, sizeof(path), "%s/default.json", t.path);
	assert_string_equal(p.source, path);

	/* <tenant>.json wins over default.json. */
	tmpdir_file(&t, "acme.json", "{\"tenant\": \"acme\", \"limits\": {\"max_tasks\": 3}}");
	assert_int_equal(policy_for_tenant(t.path, "acme", &p, &err), 0);
	assert_int_equal(p.limits.max_tasks, 3);
	assert_int_equal(policy_for_tenant(t.path, "other", &p, &err), 0);
	assert_int_equal(p.limits.max_tasks, 9);
	assert_string_equal(p.tenant, "other");

	/* An invalid tenant file is an error, never a fallback to default;
	 * parsed in place, it leaves no policy behind (all zero: nothing
	 * enabled), neither what `p` held nor half of the file's. */
	tmpdir_file(&t, "acme.json", "{\"tenant\": \"acme\", \"limits\": {\"max_tasks\": -3}}");
	memset(&p, 0x5a, sizeof(p));
	memset(&want, 0, sizeof(want));
	assert_int_equal(policy_for_tenant(t.path, "acme", &p, &err), -EINVAL);
	assert_int_equal(err.line, 1);
	assert_int_equal(err.col, 44);
	assert_memory_equal(&p, &want, sizeof(want));

	/* So is an unreadable one: a dangling symlink, a directory. */
	snprintf(path, sizeof(path), "%s/bob.json", t.path);
	assert_int_equal(symlink("/nonexistent/bob.json", path), 0);
	assert_int_equal(policy_for_tenant(t.path, "bob", &p, &err), -ENOENT);
	assert_string_equal(err.file, path);
	snprintf(path, sizeof(path), "%s/carol.json", t.path);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(policy_for_tenant(t.path, "carol", &p, &err), -EINVAL);

	/* And an invalid default.json, for a tenant that falls back to it. */
	tmpdir_file(&t, "default.json", "{\"tenant\": \"acme\"}");
	assert_int_equal(policy_for_tenant(t.path, "dave", &p, &err), -EINVAL);
	assert_string_equal(
		err.msg, "tenant: expected \"default\" (the file is default.json), got \"acme\"");

	/* A "directory" that is a file is not a missing directory. */
	snprintf(path, sizeof(path), "%s/acme.json", t.path);
	assert_int_equal(policy_for_tenant(path, "acme", &p, &err), -ENOTDIR);

	/* A bad tenant name never reaches the file system. */
	assert_int_equal(policy_for_tenant(t.path, "../etc/passwd", &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "invalid tenant name"));
	tmpdir_remove(&t);
}

static void test_names(void **state)
{
	assert_string_equal(rule_name(SG_RULE_EGRESS), "egress");
	assert_string_equal(rule_name(SG_RULE_FILE), "file");
	assert_string_equal(rule_name(SG_RULE_FORK), "fork");
	assert_string_equal(rule_name(SG_RULE_EXEC), "exec");
	assert_string_equal(rule_name(SG_RULE_MEMORY), "memory");
	assert_null(rule_name(SG_RULE__COUNT));
	assert_string_equal(policy_action_name(SG_POLICY_DENY), "deny");
	assert_string_equal(policy_action_name(SG_POLICY_KILL), "kill");
	assert_string_equal(policy_action_name(SG_POLICY_LOG), "log");
	assert_string_equal(policy_action_name(0), "unknown");
	assert_string_equal(failure_mode_name(SG_FAILURE_RETRY), "retry");
	assert_string_equal(failure_mode_name(SG_FAILURE_SKIP), "skip");
	assert_string_equal(failure_mode_name(SG_FAILURE_PAUSE), "pause");
	assert_string_equal(failure_mode_name((enum sg_failure_mode)0), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedded_default_is_policy_defaults),
		cmocka_unit_test(test_default_file_is_the_embedded_copy),
		cmocka_unit_test(test_empty_object_is_all_defaults),
		cmocka_unit_test(test_fields_override_defaults_and_lists_replace),
		cmocka_unit_test(test_example_policies_are_valid),
		cmocka_unit_test(test_tenant_name_valid),
		cmocka_unit_test(test_file_name_must_match_tenant),
		cmocka_unit_test(test_load_file_errors),
		cmocka_unit_test(test_error_format),
		cmocka_unit_test(test_policy_for_tenant),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
