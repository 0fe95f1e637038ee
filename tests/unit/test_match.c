/* Glob and CIDR matching: glob_valid/glob_match (checked against
 * fnmatch(FNM_PATHNAME) on generated patterns too), cidr_parse's 16-byte
 * form, and egress_allowed over v4, v6, v4-mapped, /0, ports and protos. */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>
#include "policy/policy.h"

/* ---- globs --------------------------------------------------------------- */

static void test_glob_valid(void **state)
{
	static const char *const good[] = {
		"/",
		"/usr/bin/python3",
		"/usr/bin/python3*",
		"/usr/bin/[!a-c]*",
		"/usr/bin/[^x]",
		"/usr/bin/\\*",
		"/usr/bin/[]]x",
		"/usr/bin/[a-]",
		"/usr/bin/[-a]",
		"/a/*/b",
		"/usr/lib/gcc/x86_64-linux-gnu/*/cc1",
		"/usr/bin/[\\]]",
		"/opt/.hidden/*",
	};
	static const struct {
		const char *glob, *why;
	} bad[] = {
		{ "", "not an absolute path (it must start with /)" },
		{ "python3", "not an absolute path (it must start with /)" },
		{ "~/bin/x", "not an absolute path (it must start with /)" },
		{ "/usr//bin", "contains an empty component (//)" },
		{ "/usr/bin/", "ends in / (write the path without it)" },
		{ "/usr/./bin", "contains a . or .. component (write the normalized path)" },
		{ "/..", "contains a . or .. component (write the normalized path)" },
		{ "/usr/bin/[abc", "unbalanced '[': no ']' before the end of its path component" },
		{ "/usr/[a/b]", "unbalanced '[': no ']' before the end of its path component" },
		{ "/usr/bin/[]", "unbalanced '[': no ']' before the end of its path component" },
		{ "/usr/bin/[\\", "unbalanced '[': no ']' before the end of its path component" },
		{ "/usr/bin/[z-a]", "a range in [...] is reversed (write [a-z], not [z-a])" },
		{ "/usr/bin/[[:digit:]]",
		  "[:class:], [=c=] and [.c.] are not supported inside [...]" },
		{ "/usr/bin/x\\", "ends in a lone backslash" },
		{ "/usr\\/bin", "a '/' cannot be escaped" },
	};
	const char *why;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		why = NULL;
		if (!glob_valid(good[i], &why))
			fail_msg("glob_valid(\"%s\") refused it: %s", good[i], why);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		if (glob_valid(bad[i].glob, &why))
			fail_msg("glob_valid(\"%s\") accepted it", bad[i].glob);
		assert_non_null(why);
		assert_string_equal(why, bad[i].why);
	}
	assert_false(glob_valid(NULL, &why));
	assert_false(glob_valid("relative", NULL)); /* why is optional */

	char long_glob[300];
	memset(long_glob, 'a', sizeof(long_glob));
	long_glob[0] = '/';
	long_glob[SG_POLICY_PATHLEN - 1] = '\0'; /* 255 bytes: fits */
	assert_true(glob_valid(long_glob, &why));
	long_glob[SG_POLICY_PATHLEN - 1] = 'a';
	long_glob[SG_POLICY_PATHLEN] = '\0'; /* 256 bytes: does not */
	assert_false(glob_valid(long_glob, &why));
	assert_string_equal(why, "longer than 255 bytes");
}

static const struct {
	const char *glob, *path;
	bool match;
} glob_cases[] = {
	{ "/usr/bin/python3*", "/usr/bin/python3", true },
	{ "/usr/bin/python3*", "/usr/bin/python3.11", true },
	{ "/usr/bin/python3*", "/usr/bin/python3/evil", false }, /* '*' stops at '/' */
	{ "/usr/bin/python3*", "/usr/bin/python", false },
	{ "/usr/bin/python3*", "/usr/local/bin/python3", false },
	{ "/usr/*/python3", "/usr/bin/python3", true },
	{ "/usr/*/python3", "/usr/local/bin/python3", false },
	{ "/usr/*", "/usr/", true },
	{ "/*", "/", true },
	{ "/*", "/etc/passwd", false },
	{ "/**", "/a", true },
	{ "/**", "/a/b", false },
	{ "/usr/bin/?", "/usr/bin/a", true },
	{ "/usr/bin/?", "/usr/bin/ab", false },
	{ "/usr/bin/?", "/usr/bin/", false },
	{ "/usr/bin?ls", "/usr/bin/ls", false }, /* '?' never matches '/' */
	{ "/usr/bin/[a-c]at", "/usr/bin/cat", true },
	{ "/usr/bin/[a-c]at", "/usr/bin/dat", false },
	{ "/usr/bin/[!a-c]at", "/usr/bin/dat", true },
	{ "/usr/bin/[!a-c]at", "/usr/bin/cat", false },
	{ "/usr/bin/[^c]at", "/usr/bin/bat", true },
	{ "/usr[!a]bin", "/usr/bin", false }, /* nor does a negated set */
	{ "/usr/bin/[]]x", "/usr/bin/]x", true },
	{ "/usr/bin/[a-]", "/usr/bin/-", true },
	{ "/usr/bin/\\*", "/usr/bin/*", true },
	{ "/usr/bin/\\*", "/usr/bin/x", false },
	{ "/usr/bin/\\[x\\]", "/usr/bin/[x]", true },
	{ "/a*b*c", "/abc", true },
	{ "/a*b*c", "/aXbYc", true },
	{ "/a*b*c", "/aXcYb", false },
	{ "/a*b*c", "/abcbc", true },
	{ "/*.py", "/.hidden.py", true }, /* no FNM_PERIOD */
	{ "/usr/bin/python3", "/usr/bin/python3", true },
	{ "/usr/bin/python3", "/usr/bin/python3x", false },
	{ "/usr/bin/python3", "/usr/bin/python", false },
	{ "/a/*/c", "/a/b/c", true },
	{ "/a/*/c", "/a/b/x/c", false },
	{ "/a/*x/c", "/a/bx/yx/c", false },
	{ "/a/*x*/c", "/a/1x2x3/c", true },
	{ "/var/lib/sandguard/scratch/*/*", "/var/lib/sandguard/scratch/sb1/a.out", true },
	{ "/var/lib/sandguard/scratch/*/*", "/var/lib/sandguard/scratch/sb1/d/a.out", false },
	/* Invalid patterns never match, not even themselves. */
	{ "/usr/bin/[abc", "/usr/bin/[abc", false },
	{ "relative*", "relative", false },
	{ "/usr//bin", "/usr//bin", false },
};

static void test_glob_match(void **state)
{
	for (size_t i = 0; i < sizeof(glob_cases) / sizeof(glob_cases[0]); i++)
		if (glob_match(glob_cases[i].glob, glob_cases[i].path) != glob_cases[i].match)
			fail_msg("glob_match(\"%s\", \"%s\") != %s", glob_cases[i].glob,
				 glob_cases[i].path, glob_cases[i].match ? "true" : "false");
	assert_false(glob_match("/usr/bin/*", NULL));
	assert_false(glob_match(NULL, "/usr/bin/x"));
}

/* The path is tenant-controlled (an exec's filename): many stars against a
 * long near-miss must not backtrack exponentially. This finishes in
 * microseconds; the exponential version would not finish at all. */
static void test_glob_match_is_not_exponential(void **state)
{
	char path[256], glob[64];

	memset(path, 'a', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	snprintf(glob, sizeof(glob), "/*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
	for (int i = 0; i < 1000; i++)
		assert_false(glob_match(glob, path));
	path[sizeof(path) - 2] = 'b';
	assert_true(glob_match(glob, path));
}

/* Differential check against glibc's fnmatch(FNM_PATHNAME) on generated
 * patterns and paths (fixed seed: the same cases every run). */
static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static void test_glob_match_agrees_with_fnmatch(void **state)
{
	static const char pat_chars[] = "ab/*?[]!-\\";
	static const char path_chars[] = "ab/-]*";
	uint32_t seed = 42;
	int valid = 0;

	for (int i = 0; i < 200000; i++) {
		char glob[16], path[12];
		size_t gl = 1 + lcg(&seed) % 10, pl = 1 + lcg(&seed) % 8;
		glob[0] = path[0] = '/';
		for (size_t k = 1; k < gl; k++)
			glob[k] = pat_chars[lcg(&seed) % (sizeof(pat_chars) - 1)];
		glob[gl] = '\0';
		for (size_t k = 1; k < pl; k++)
			path[k] = path_chars[lcg(&seed) % (sizeof(path_chars) - 1)];
		path[pl] = '\0';
		if (!glob_valid(glob, NULL))
			continue;
		valid++;
		bool want = fnmatch(glob, path, FNM_PATHNAME) == 0;
		if (glob_match(glob, path) != want)
			fail_msg("glob_match(\"%s\", \"%s\") = %d, fnmatch says %d", glob, path,
				 !want, want);
	}
	assert_true(valid > 10000); /* the generator really exercises valid globs */
}

/* ---- CIDRs ----------------------------------------------------------------- */

static void v6(const char *text, uint8_t out[16])
{
	assert_int_equal(inet_pton(AF_INET6, text, out), 1);
}

/* An IPv4 address in the 16-byte form egress_allowed takes. */
static void v4(const char *text, uint8_t out[16])
{
	memset(out, 0, 16);
	out[10] = out[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, text, out + 12), 1);
}

static void expect_cidr(const char *text, int family, const char *addr16, int prefix)
{
	struct sg_egress_allow e = { .port = 8080, .proto = IPPROTO_UDP };
	uint8_t want[16];

	v6(addr16, want);
	if (cidr_parse(text, &e))
		fail_msg("cidr_parse(\"%s\") refused it", text);
	assert_int_equal(e.family, family);
	assert_memory_equal(e.addr, want, 16);
	assert_int_equal(e.prefix, prefix);
	assert_int_equal(e.port, 8080); /* port and proto are the caller's */
	assert_int_equal(e.proto, IPPROTO_UDP);
}

static void test_cidr_parse(void **state)
{
	static const char *const bad[] = {
		"10.0.0.0/33",
		"300.1.1.1/8",
		"10.0.0.0/8x",
		"10.0.0.0/",
		"10.0.0.0/08",
		"10.0.0.0/-1",
		"10.0.0.0/+8",
		"10.0.0/8",
		"10.0.0.0.0/8",
		"010.0.0.0/8",
		" 10.0.0.0/8",
		"10.0.0.0/8 ",
		"10.1.2.3/8",
		"fd00::1/8",
		"fd00::/129",
		"fd00:::/8",
		"fe80::1%eth0",
		"/8",
		"",
		"/",
		"10.0.0.0//8",
		"10.0.0.0/8/8",
		"::ffff:10.0.0.1/104",
		"localhost",
		"1.2.3.4/1000",
	};

	expect_cidr("10.0.0.0/8", AF_INET, "::ffff:10.0.0.0", 104);
	expect_cidr("192.168.1.7", AF_INET, "::ffff:192.168.1.7", 128);
	expect_cidr("192.168.1.7/32", AF_INET, "::ffff:192.168.1.7", 128);
	expect_cidr("0.0.0.0/0", AF_INET, "::ffff:0.0.0.0", 96);
	expect_cidr("10.128.0.0/9", AF_INET, "::ffff:10.128.0.0", 105);
	expect_cidr("fd00::/8", AF_INET6, "fd00::", 8);
	expect_cidr("fc00::/7", AF_INET6, "fc00::", 7);
	expect_cidr("::/0", AF_INET6, "::", 0);
	expect_cidr("2001:db8::1", AF_INET6, "2001:db8::1", 128);
	/* Written as v4-mapped IPv6, it is the same set as 10.0.0.0/8. */
	expect_cidr("::ffff:10.0.0.0/104", AF_INET6, "::ffff:10.0.0.0", 104);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sg_egress_allow e, before;
		memset(&e, 0x5a, sizeof(e));
		before = e;
		if (cidr_parse(bad[i], &e) != -EINVAL)
			fail_msg("cidr_parse(\"%s\") accepted it", bad[i]);
		assert_memory_equal(&e, &before, sizeof(e));
	}
	struct sg_egress_allow e;
	assert_int_equal(cidr_parse(NULL, &e), -EINVAL);
}

/* ---- egress_allowed ----------------------------------------------------------- */

static void add_rule(struct sg_policy *p, const char *cidr, uint16_t port, uint8_t proto)
{
	struct sg_egress_allow *e = &p->egress[p->n_egress++];
	memset(e, 0, sizeof(*e));
	assert_int_equal(cidr_parse(cidr, e), 0);
	e->port = port;
	e->proto = proto;
}

static bool allowed4(const struct sg_policy *p, const char *addr, uint16_t port, uint8_t proto)
{
	uint8_t a[16];
	v4(addr, a);
	return egress_allowed(p, a, port, proto);
}

static bool allowed6(const struct sg_policy *p, const char *addr, uint16_t port, uint8_t proto)
{
	uint8_t a[16];
	v6(addr, a);
	return egress_allowed(p, a, port, proto);
}

static void test_egress_allowed(void **state)
{
	struct sg_policy p;

	policy_defaults(&p);
	assert_int_equal(p.n_egress, 0); /* default: deny all */
	assert_false(allowed4(&p, "10.0.0.1", 80, IPPROTO_TCP));
	assert_false(allowed6(&p, "::1", 80, IPPROTO_TCP));

	add_rule(&p, "10.0.0.0/8", 0, 0);
	add_rule(&p, "127.0.0.1", 8080, IPPROTO_TCP);
	add_rule(&p, "fd00::/8", 53, IPPROTO_UDP);
	add_rule(&p, "10.128.0.0/9", 0, 0);

	assert_true(allowed4(&p, "10.1.2.3", 443, IPPROTO_TCP)); /* any port, any proto */
	assert_true(allowed4(&p, "10.255.255.255", 1, IPPROTO_UDP));
	assert_false(allowed4(&p, "11.0.0.1", 443, IPPROTO_TCP));
	assert_false(allowed4(&p, "9.255.255.255", 443, IPPROTO_TCP));
	assert_true(allowed4(&p, "127.0.0.1", 8080, IPPROTO_TCP));
	assert_false(allowed4(&p, "127.0.0.1", 8080, IPPROTO_UDP)); /* proto */
	assert_false(allowed4(&p, "127.0.0.1", 8081, IPPROTO_TCP)); /* port */
	assert_false(allowed4(&p, "127.0.0.1", 8080, 0));           /* unknown proto */
	assert_false(allowed4(&p, "127.0.0.2", 8080, IPPROTO_TCP));
	assert_true(allowed6(&p, "fd00::1", 53, IPPROTO_UDP));
	assert_true(allowed6(&p, "fdff:ffff::1", 53, IPPROTO_UDP));
	assert_false(allowed6(&p, "fd00::1", 53, IPPROTO_TCP));
	assert_false(allowed6(&p, "fe00::1", 53, IPPROTO_UDP));
	/* IPv4 rules match only the v4-mapped form, not v4-compatible ::a00:1. */
	assert_true(allowed6(&p, "::ffff:10.0.0.1", 80, IPPROTO_TCP));
	assert_false(allowed6(&p, "::a00:1", 80, IPPROTO_TCP));
	assert_false(egress_allowed(NULL, (uint8_t[16]){ 0 }, 80, IPPROTO_TCP));
}

static void test_egress_allowed_zero_prefixes(void **state)
{
	struct sg_policy p;

	policy_defaults(&p);
	add_rule(&p, "0.0.0.0/0", 53, IPPROTO_UDP); /* every IPv4, DNS only */
	assert_true(allowed4(&p, "8.8.8.8", 53, IPPROTO_UDP));
	assert_true(allowed4(&p, "255.255.255.255", 53, IPPROTO_UDP));
	assert_false(allowed4(&p, "8.8.8.8", 53, IPPROTO_TCP));
	assert_false(allowed4(&p, "8.8.8.8", 54, IPPROTO_UDP));
	assert_false(allowed6(&p, "2001:4860::8888", 53, IPPROTO_UDP)); /* not IPv6 */

	policy_defaults(&p);
	add_rule(&p, "::/0", 0, 0); /* every address, v4-mapped too */
	assert_true(allowed6(&p, "2001:db8::1", 1, IPPROTO_TCP));
	assert_true(allowed6(&p, "::1", 65535, IPPROTO_UDP));
	assert_true(allowed4(&p, "1.2.3.4", 80, IPPROTO_TCP));
}

static void test_egress_allowed_from_a_parsed_policy(void **state)
{
	static const char doc[] =
		"{\"egress\": {\"allow\": ["
		"{\"cidr\": \"10.8.0.10/32\", \"port\": 3128, \"proto\": \"tcp\"},"
		"{\"cidr\": \"fc00::/7\", \"proto\": \"udp\"}]}}";
	struct sg_policy p;
	struct sg_policy_error err;

	assert_int_equal(policy_parse(doc, strlen(doc), "t", &p, &err), 0);
	assert_true(allowed4(&p, "10.8.0.10", 3128, IPPROTO_TCP));
	assert_false(allowed4(&p, "10.8.0.11", 3128, IPPROTO_TCP));
	assert_false(allowed4(&p, "10.8.0.10", 3129, IPPROTO_TCP));
	assert_true(allowed6(&p, "fd12::5", 9999, IPPROTO_UDP));
	assert_false(allowed6(&p, "fe80::1", 9999, IPPROTO_UDP));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob_valid),
		cmocka_unit_test(test_glob_match),
		cmocka_unit_test(test_glob_match_is_not_exponential),
		cmocka_unit_test(test_glob_match_agrees_with_fnmatch),
		cmocka_unit_test(test_cidr_parse),
		cmocka_unit_test(test_egress_allowed),
		cmocka_unit_test(test_egress_allowed_zero_prefixes),
		cmocka_unit_test(test_egress_allowed_from_a_parsed_policy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
