/* SHA-256 against the FIPS 180-4 examples and sha256sum (coreutils) over
 * every length across the padding's block boundaries, fed whole and in
 * pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <cmocka.h>
#include "lib/sha256.h"

static void test_fips_examples(void **state)
{
	char hex[SHA256_HEX];

	(void)state;
	sha256_hex("abc", 3, hex);
	assert_string_equal(hex,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256_hex("", 0, hex);
	assert_string_equal(hex,
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
	assert_string_equal(hex,
			    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* sha256sum's answer for `len` bytes of the pattern i * 7 + 1. */
static void reference(const uint8_t *data, size_t len, char hex[SHA256_HEX])
{
	char path[] = "/tmp/sg-sha256-XXXXXX", cmd[64];
	int fd = mkstemp(path);
	FILE *p;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "sha256sum %s", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(hex, SHA256_HEX, p));
	pclose(p);
	unlink(path);
}

static void test_lengths_and_pieces(void **state)
{
	uint8_t data[200], d[SHA256_BYTES];
	char want[SHA256_HEX], got[SHA256_HEX];

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	for (size_t len = 0; len <= sizeof(data); len += (len > 50 && len < 120) ? 1 : 7) {
		struct sha256 s;

		reference(data, len, want);
		sha256_hex(data, len, got);
		assert_string_equal(got, want);
		sha256_init(&s); /* in pieces of 1, 2, 3, ... bytes */
		for (size_t at = 0, n = 1; at < len; at += n, n++)
			sha256_update(&s, data + at, at + n <= len ? n : len - at);
		sha256_final(&s, d);
		sha256_to_hex(d, got);
		assert_string_equal(got, want);
	}
	assert_int_equal(sha256_file("/nonexistent/sg", got), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fips_examples),
		cmocka_unit_test(test_lengths_and_pieces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
