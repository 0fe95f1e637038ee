/* Which policy line decided an event: the matching entry (egress, files,
 * exec), or the list none of whose entries matched; the action and the
 * limits with their lines, and the default when a key is not in the file. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "policy/policy_locate.h"

/* Line numbers below are this text's. */
static const char policy_text[] = "{\n"                                                     /* 1 */
				  "  \"tenant\": \"acme\",\n"                               /* 2 */
				  "  \"limits\": {\n"                                       /* 3 */
				  "    \"timeout_ms\": 1500,\n"                             /* 4 */
				  "    \"max_tasks\": 16\n"                                 /* 5 */
				  "  },\n"                                                  /* 6 */
				  "  \"egress\": {\n"                                       /* 7 */
				  "    \"allow\": [\n"                                      /* 8 */
				  "      {\"cidr\": \"10.0.0.0/8\", \"port\": 443},\n"      /* 9 */
				  "      {\"cidr\": \"192.168.1.7\", \"proto\": \"udp\"}\n" /* 10 */
				  "    ]\n"                                                 /* 11 */
				  "  },\n"                                                  /* 12 */
				  "  \"files\": {\n"                                        /* 13 */
				  "    \"scratch_root\": \"/var/lib/sandguard/scratch\",\n" /* 14 */
				  "    \"read_only\": [\"/usr\", \"/etc/ssl/certs\"]\n"     /* 15 */
				  "  },\n"                                                  /* 16 */
				  "  \"exec\": {\"allow\": [\"/usr/bin/python3*\",\n"       /* 17 */
				  "                      \"/usr/bin/node\"]},\n"            /* 18 */
				  "  \"actions\": {\"egress\": \"kill\"}\n"                 /* 19 */
				  "}\n";                                                    /* 20 */

static char path[64];
static struct policy_text pt;

static int setup(void **state)
{
	char err[256];
	int fd;

	snprintf(path, sizeof(path), "/tmp/sg-locate-XXXXXX/acme.json");
	path[strlen("/tmp/sg-locate-XXXXXX")] = '\0';
	if (!mkdtemp(path))
		return -1;
	strcat(path, "/acme.json");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, policy_text, strlen(policy_text)) != (ssize_t)strlen(policy_text))
		return -1;
	close(fd);
	if (policy_text_load(path, &pt, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	policy_text_free(&pt);
	snprintf(cmd, sizeof(cmd), "rm -rf %.*s", (int)(strrchr(path, '/') - path), path);
	return system(cmd);
}

static void test_egress(void **state)
{
	struct policy_finding f;

	policy_find_egress(&pt, "tcp", "inet", "10.1.2.3:443", &f);
	assert_true(f.matched);
	assert_string_equal(f.entry.key, "egress.allow[0]");
	assert_int_equal(f.entry.line, 9);
	assert_string_equal(f.entry.value, "10.0.0.0/8 port 443");
	assert_string_equal(f.entry.text, "{\"cidr\": \"10.0.0.0/8\", \"port\": 443},");
	assert_string_equal(f.action.key, "actions.egress");
	assert_string_equal(f.action.value, "kill");
	assert_int_equal(f.action.line, 19);

	policy_find_egress(&pt, "udp", "inet", "192.168.1.7:53", &f);
	assert_true(f.matched);
	assert_int_equal(f.entry.line, 10);
	assert_string_equal(f.entry.value, "192.168.1.7/32 udp");

	/* The wrong port, the wrong protocol: none matched, the list's line. */
	policy_find_egress(&pt, "tcp", "inet", "10.1.2.3:80", &f);
	assert_false(f.matched);
	assert_string_equal(f.entry.key, "egress.allow");
	assert_int_equal(f.entry.line, 8);
	assert_string_equal(f.entry.value, "2 entries");
	assert_string_equal(f.says, "no entry of egress.allow matched tcp 10.1.2.3:80");
	/* ... and what the list does allow, each with its line. */
	assert_int_equal(f.n_listed, 2);
	assert_string_equal(f.listed[0].key, "egress.allow[0]");
	assert_string_equal(f.listed[0].value, "10.0.0.0/8 port 443");
	assert_int_equal(f.listed[1].line, 10);
	assert_string_equal(f.listed[1].value, "192.168.1.7/32 udp");
	policy_find_egress(&pt, "tcp", "inet", "192.168.1.7:53", &f);
	assert_false(f.matched);
	policy_find_egress(&pt, "tcp", "inet6", "[::1]:9", &f);
	assert_false(f.matched);

	/* Unix sockets are one switch, not in this file: the default. */
	policy_find_egress(&pt, NULL, "unix", "@abstract", &f);
	assert_false(f.matched);
	assert_string_equal(f.entry.key, "egress.allow_unix");
	assert_int_equal(f.entry.line, 0);

	/* A destination that is not an address is said so, not guessed. */
	policy_find_egress(&pt, "tcp", "inet", "garbage", &f);
	assert_false(f.has_entry);
	assert_string_equal(f.says, "the destination garbage cannot be matched");
}

static void test_files(void **state)
{
	struct policy_finding f;

	policy_find_file(&pt, "/etc/ssl/certs/ca.pem", false, &f);
	assert_true(f.matched);
	assert_string_equal(f.entry.key, "files.read_only[1]");
	assert_string_equal(f.entry.value, "/etc/ssl/certs");
	assert_int_equal(f.entry.line, 15);
	/* Not a prefix match on the string: /usrx is not under /usr. */
	policy_find_file(&pt, "/usrx/lib", false, &f);
	assert_false(f.matched);
	assert_string_equal(f.entry.key, "files.read_only");
	assert_string_equal(f.entry.value, "2 entries");
	assert_string_equal(f.says, "no entry of files.read_only covers /usrx/lib");
	/* Read-only entries do not allow writing. */
	policy_find_file(&pt, "/usr/lib/x", true, &f);
	assert_true(f.matched);
	assert_non_null(strstr(f.says, "only for reading"));
	/* The file action is not in the file: the default, kill. */
	assert_string_equal(f.action.key, "actions.file");
	assert_int_equal(f.action.line, 0);
	assert_string_equal(f.action.value, "kill");
}

static void test_exec_and_limits(void **state)
{
	struct policy_finding f;

	policy_find_exec(&pt, "/usr/bin/node", &f);
	assert_true(f.matched);
	assert_string_equal(f.entry.key, "exec.allow[1]");
	assert_int_equal(f.entry.line, 18);
	policy_find_exec(&pt, "/bin/sh", &f);
	assert_false(f.matched);
	assert_int_equal(f.entry.line, 17);
	assert_string_equal(f.says, "no entry of exec.allow matched /bin/sh");

	policy_find_limit(&pt, "timeout_ms", &f);
	assert_string_equal(f.entry.key, "limits.timeout_ms");
	assert_string_equal(f.entry.value, "1500");
	assert_int_equal(f.entry.line, 4);
	assert_false(f.has_action);
	policy_find_limit(&pt, "max_tasks", &f);
	assert_int_equal(f.entry.line, 5);
	assert_string_equal(f.action.key, "actions.fork");
	policy_find_limit(&pt, "memory_mb", &f); /* not in the file */
	assert_int_equal(f.entry.line, 0);
	assert_string_equal(f.entry.value, "512");
}

static void test_load(void **state)
{
	struct policy_text e;
	char err[256];
	char bad[96];
	int fd;

	assert_int_equal(policy_text_load("<embedded>", &e, err, sizeof(err)), 0);
	assert_string_equal(e.policy.tenant, "default");
	policy_text_free(&e);
	assert_int_equal(policy_text_load("/nonexistent/acme.json", &e, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "/nonexistent/acme.json: No such file or directory");
	assert_int_equal(policy_text_load("/tmp", &e, err, sizeof(err)), -EINVAL);
	snprintf(bad, sizeof(bad), "%.*s/bad.json", (int)(strrchr(path, '/') - path), path);
	fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\"limits\": {\"max_tasks\": -3}}", 29), 29);
	close(fd);
	assert_int_equal(policy_text_load(bad, &e, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bad.json:1:26: limits.max_tasks"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_egress),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_exec_and_limits),
		cmocka_unit_test(test_load),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
