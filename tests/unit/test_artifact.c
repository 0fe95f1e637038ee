/* Pinned artifacts' parts that need no sandbox: SHA-256 against its
 * published vectors, the revocation list's add/find/remove and its
 * refusal of a malformed line, and a pin's mismatch detail (src/exec/
 * artifact.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "exec/artifact.h"
#include "artifact/artifact_revoked.h"
#include "lib/sha256.h"
#include "tmp_dir.h"

static void hex_of(const char *text, char hex[SHA256_HEX])
{
	uint8_t d[SHA256_LEN];
	struct sha256 s;

	sha256_init(&s);
	sha256_update(&s, text, strlen(text));
	sha256_final(&s, d);
	sha256_to_hex(d, hex);
}

/* FIPS 180-2's examples. */
static void test_sha256_vectors(void **state)
{
	char hex[SHA256_HEX];

	(void)state;
	hex_of("", hex);
	assert_string_equal(hex,
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	hex_of("abc", hex);
	assert_string_equal(hex,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", hex);
	assert_string_equal(hex,
			    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void test_revocations(void **state)
{
	struct artifact_revocation r = { .at = 1700000000 }, got;
	char tmp[PATH_MAX], detail[512], path[PATH_MAX + 32];
	const char *hex = "bb36a291dbe285fd9bf7454f5f8218ffceee13a7b94947354720b085570b6906";

	(void)state;
	tmp_dir_executor(tmp, sizeof(tmp), "artifact");
	snprintf(r.sha256, sizeof(r.sha256), "%s", hex);
	snprintf(r.tenant, sizeof(r.tenant), "acme");
	snprintf(r.reason, sizeof(r.reason), "finding SEC-1");
	assert_int_equal(artifact_revoked_find(tmp, "acme", hex, &got), 0); /* no list: none */
	assert_int_equal(artifact_revoke(tmp, &r, detail, sizeof(detail)), 0);
	assert_int_equal(artifact_revoked_find(tmp, "acme", hex, &got), 1);
	assert_string_equal(got.reason, "finding SEC-1");
	assert_int_equal(got.at, 1700000000);
	assert_int_equal(artifact_revoked_find(tmp, "other", hex, NULL), 0); /* per tenant */
	assert_int_equal(artifact_revoke(tmp, &r, detail, sizeof(detail)), -EEXIST);
	assert_int_equal(artifact_unrevoke(tmp, "acme", hex, detail, sizeof(detail)), 0);
	assert_int_equal(artifact_revoked_find(tmp, "acme", hex, NULL), 0);
	assert_int_equal(artifact_unrevoke(tmp, "acme", hex, detail, sizeof(detail)), -ENOENT);
	/* A malformed list is an error, never "nothing revoked". */
	snprintf(path, sizeof(path), "%s/%s", tmp, ARTIFACT_REVOKED_FILE);
	write_file(path, "not-a-digest acme 1 x\n");
	assert_int_equal(artifact_revoked_find(tmp, "acme", hex, NULL), -EBADMSG);
	tmp_dir_remove(tmp);
}

static void test_mismatch_detail(void **state)
{
	char tmp[PATH_MAX], prog[PATH_MAX + 16], detail[EXEC_DETAIL_MAX], found[SHA256_HEX];
	char *argv[] = { "/usr/bin/python3", prog, NULL };
	struct sg_policy *p = calloc(1, sizeof(*p));
	struct artifact_run a;

	(void)state;
	assert_non_null(p);
	tmp_dir_executor(tmp, sizeof(tmp), "artifact");
	snprintf(prog, sizeof(prog), "%s/reward.py", tmp);
	write_file(prog, "abc");
	hex_of("abc", found);
	policy_defaults(p);
	snprintf(p->tenant, sizeof(p->tenant), "acme");
	snprintf(p->source, sizeof(p->source), "%s/acme.json", tmp);
	p->artifacts.n_pins = 1;
	snprintf(p->artifacts.pins[0].path, SG_POLICY_PATHLEN, "%s", prog);
	memset(p->artifacts.pins[0].sha256, '0', SG_SHA256_HEX - 1);
	assert_int_equal(artifact_prepare(p, argv, &a, detail, sizeof(detail)), -EPERM);
	assert_non_null(strstr(detail, found));
	assert_non_null(strstr(detail, "expected 0000000000"));
	artifact_run_free(&a);
	/* The right digest: the command names the checked copy. */
	snprintf(p->artifacts.pins[0].sha256, SG_SHA256_HEX, "%s", found);
	assert_int_equal(artifact_prepare(p, argv, &a, detail, sizeof(detail)), 0);
	assert_int_equal(a.n_files, 1);
	assert_string_equal(a.argv[1], a.files[0].path);
	assert_int_equal(a.files[0].len, 3);
	assert_memory_equal(a.files[0].data, "abc", 3);
	artifact_run_free(&a);
	free(p);
	tmp_dir_remove(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_vectors),
		cmocka_unit_test(test_revocations),
		cmocka_unit_test(test_mismatch_detail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
