/* Policy bounds: every number at and past its range (the exact message
 * and what the bounds store), every choice, and every list's cap (one
 * entry too many is refused, a full list is stored). Kept apart from
 * test_policy_errors.c (syntax, types, CIDRs, globs and paths): these are
 * the tables of src/policy/policy_schema.c, checked row by row. */
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
	RC("health", "band_window", health.band_window, "0", "10000", "-1", "10001",
	   "an integer in 0..10000", U32, 0, 10000),
	RC("health", "band_k", health.band_k, "0", "1000", "-0.5", "1000.5", "a number in 0..1000",
	   DBL, 0, 1000),
	RC("canary", "rate", canary.rate, "0", "1", "-0.1", "1.5", "a number in 0..1", DBL, 0, 1),
	RC("canary", "per_batch", canary.per_batch, "1", "64", "0", "65", "an integer in 1..64",
	   U32, 1, 64),
	RC("canary", "determinism_rate", canary.determinism_rate, "0", "1", "-0.1", "2",
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
		cmocka_unit_test(test_warm),
		cmocka_unit_test(test_value_ranges),
		cmocka_unit_test(test_choices),
		cmocka_unit_test(test_too_many_entries),
		cmocka_unit_test(test_full_lists_are_stored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
