/* JSON strings from bytes we do not control (see json_text.h). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_text.h"
#include "utf8.h"

/* Length of the valid UTF-8 sequence at s[0] (n bytes left), 0 if invalid.
 * NUL is treated as invalid: it would cut C strings downstream. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	return s[0] ? utf8_seq_len(s, n) : 0;
}

/* Append the repaired form of s[0..n) to out (room for 3n bytes). */
static size_t repair(const unsigned char *s, size_t n, char *out)
{
	static const char fffd[] = "\xef\xbf\xbd";
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		size_t l = utf8_len(s + i, n - i);
		if (l) {
			memcpy(out + o, s + i, l);
			o += l;
			i += l;
		} else {
			memcpy(out + o, fffd, 3);
			o += 3;
			i++;
		}
	}
	return o;
}

json_t *json_string_lossy(const char *s, size_t n)
{
	char *buf;
	json_t *j;
	size_t len;

	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	buf = malloc(3 * n + 1);
	if (!buf)
		return NULL;
	len = repair((const unsigned char *)s, n, buf);
	j = json_stringn(buf, len);
	free(buf);
	return j;
}

json_t *json_excerpt(const char *s, size_t n, size_t cap)
{
	char mid[64], *buf;
	size_t half = cap / 2, o, mlen;
	json_t *j;

	if (n <= cap)
		return json_string_lossy(s, n);
	mlen = (size_t)snprintf(mid, sizeof(mid), "\n...[%zu bytes omitted]...\n", n - 2 * half);
	buf = malloc(6 * half + mlen + 1);
	if (!buf)
		return NULL;
	o = repair((const unsigned char *)s, half, buf);
	memcpy(buf + o, mid, mlen);
	o += mlen;
	o += repair((const unsigned char *)s + n - half, half, buf + o);
	j = json_stringn(buf, o);
	free(buf);
	return j;
}

json_t *json_real_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}
