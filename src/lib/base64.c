/* Strict base64 (see src/lib/base64.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

char *base64_encode(const void *data, size_t n, size_t *out_len)
{
	const unsigned char *in = data;
	size_t len = base64_encoded_len(n), o = 0;
	char *out;

	if (n > (SIZE_MAX - 1) / 4 * 3 - 2)
		return NULL;
	out = malloc(len + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		size_t left = n - i;

		if (left > 1)
			v |= (uint32_t)in[i + 1] << 8;
		if (left > 2)
			v |= in[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = left > 1 ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = left > 2 ? alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	if (out_len)
		*out_len = o;
	return out;
}

/* The 6-bit value of an alphabet character, or -1. */
static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int invalid_char(const char *text, size_t at, char *why, size_t why_len)
{
	unsigned char c = (unsigned char)text[at];

	if (c >= 0x21 && c < 0x7f)
		snprintf(why, why_len, "invalid character '%c' at offset %zu", c, at);
	else
		snprintf(why, why_len, "invalid byte 0x%02x at offset %zu", c, at);
	return -EINVAL;
}

int base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len, char *why,
		  size_t why_len)
{
	size_t pad = 0, n, o = 0;
	unsigned char *buf;

	*out = NULL;
	*out_len = 0;
	if (len % 4) {
		snprintf(why, why_len, "length %zu is not a multiple of 4", len);
		return -EINVAL;
	}
	if (len && text[len - 1] == '=')
		pad = len >= 2 && text[len - 2] == '=' ? 2 : 1;
	n = len / 4 * 3 - pad;
	buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		size_t chars = last ? 4 - pad : 4;
		uint32_t v = 0;

		for (size_t k = 0; k < 4; k++) {
			int d = k < chars ? value_of((unsigned char)text[i + k]) : 0;

			if (d < 0) {
				free(buf);
				return invalid_char(text, i + k, why, why_len);
			}
			v = v << 6 | (uint32_t)d;
		}
		/* Leftover bits under the padding must be zero. */
		if (last && ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))) {
			free(buf);
			snprintf(why, why_len,
				 "non-zero padding bits in the last group (offset %zu)", i);
			return -EINVAL;
		}
		buf[o++] = (unsigned char)(v >> 16);
		if (chars > 2)
			buf[o++] = (unsigned char)(v >> 8);
		if (chars > 3)
			buf[o++] = (unsigned char)v;
	}
	buf[o] = '\0';
	*out = buf;
	*out_len = o;
	return 0;
}
