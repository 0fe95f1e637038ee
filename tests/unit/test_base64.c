/* Strict base64: the RFC 4648 test vectors both ways, a round trip over
 * every byte value and length, and an exact reason for every malformed
 * input that a lenient decoder would have let through. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/base64.h"

static const struct {
	const char *plain, *coded;
} rfc4648[] = {
	{ "", "" },
	{ "f", "Zg==" },
	{ "fo", "Zm8=" },
	{ "foo", "Zm9v" },
	{ "foob", "Zm9vYg==" },
	{ "fooba", "Zm9vYmE=" },
	{ "foobar", "Zm9vYmFy" },
};

static void test_vectors(void **state)
{
	for (size_t i = 0; i < sizeof(rfc4648) / sizeof(rfc4648[0]); i++) {
		const char *plain = rfc4648[i].plain, *coded = rfc4648[i].coded;
		unsigned char *dec;
		size_t len;
		char why[128], *enc = base64_encode(plain, strlen(plain), &len);

		assert_non_null(enc);
		assert_string_equal(enc, coded);
		assert_int_equal(len, strlen(coded));
		assert_int_equal(base64_encoded_len(strlen(plain)), strlen(coded));
		free(enc);
		assert_int_equal(base64_decode(coded, strlen(coded), &dec, &len, why, sizeof(why)),
				 0);
		assert_int_equal(len, strlen(plain));
		assert_memory_equal(dec, plain, len);
		assert_int_equal(dec[len], 0);
		free(dec);
	}
}

static void test_round_trip(void **state)
{
	unsigned char data[300];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 3);
	for (size_t n = 0; n <= sizeof(data); n++) {
		size_t len, dlen;
		char why[128], *enc = base64_encode(data, n, &len);
		unsigned char *dec;

		assert_non_null(enc);
		assert_int_equal(len % 4, 0);
		assert_int_equal(base64_decode(enc, len, &dec, &dlen, why, sizeof(why)), 0);
		assert_int_equal(dlen, n);
		assert_memory_equal(dec, data, n);
		free(dec);
		free(enc);
	}
}

static void expect_bad(const char *text, const char *want)
{
	unsigned char *out = (unsigned char *)"untouched";
	size_t len = 99;
	char why[128] = "";

	assert_int_equal(base64_decode(text, strlen(text), &out, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, want);
	assert_null(out);
	assert_int_equal(len, 0);
}

static void test_strict(void **state)
{
	expect_bad("Zm9", "length 3 is not a multiple of 4");
	expect_bad("Zm9vY", "length 5 is not a multiple of 4");
	expect_bad("Zm9v\nYmFy", "length 9 is not a multiple of 4");
	expect_bad("Zm9\nYmFy", "invalid byte 0x0a at offset 3");
	expect_bad("Zm 9v", "length 5 is not a multiple of 4");
	expect_bad("Zm 9", "invalid byte 0x20 at offset 2");
	expect_bad("Zm-_", "invalid character '-' at offset 2"); /* URL-safe alphabet */
	expect_bad("Zm9v*mFy", "invalid character '*' at offset 4");
	expect_bad("Zg=v", "invalid character '=' at offset 2");     /* '=' inside */
	expect_bad("Zg==Zm9v", "invalid character '=' at offset 2"); /* padding mid-stream */
	expect_bad("Z===", "invalid character '=' at offset 1");
	expect_bad("====", "invalid character '=' at offset 0");
	expect_bad("Zh==", "non-zero padding bits in the last group (offset 0)"); /* 'f' is Zg== */
	expect_bad("Zm9=", "non-zero padding bits in the last group (offset 0)"); /* 'fo' is Zm8= */
	expect_bad("Zm8A\xc3\xa9\xc3\xa9", "invalid byte 0xc3 at offset 4");
}

static void test_binary(void **state)
{
	const unsigned char bytes[] = { 0x00, 0xff, 0x10, 0x80, 0x00 };
	unsigned char *dec;
	size_t len, dlen;
	char why[64], *enc = base64_encode(bytes, sizeof(bytes), &len);

	assert_string_equal(enc, "AP8QgAA=");
	assert_int_equal(base64_decode(enc, len, &dec, &dlen, why, sizeof(why)), 0);
	assert_int_equal(dlen, sizeof(bytes));
	assert_memory_equal(dec, bytes, sizeof(bytes)); /* NULs survive */
	free(dec);
	free(enc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_strict),
		cmocka_unit_test(test_binary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
