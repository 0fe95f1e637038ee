/* Fixed-format JSON writing (see json_out.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "json_out.h"
#include "utf8.h"

void json_out_init(struct json_out *o, char *buf, size_t cap)
{
	o->buf = buf;
	o->cap = cap;
	o->len = 0;
	o->full = cap == 0;
}

/* Room for n more bytes and the final NUL. */
static bool room(struct json_out *o, size_t n)
{
	if (o->full || o->cap - o->len <= n) {
		o->full = true;
		return false;
	}
	return true;
}

void json_out_raw(struct json_out *o, const char *text, size_t n)
{
	if (!room(o, n))
		return;
	memcpy(o->buf + o->len, text, n);
	o->len += n;
}

static const char hex_upper[] = "0123456789ABCDEF";
static const char hex_lower[] = "0123456789abcdef";

/* Bytes that go out as they are: printable ASCII but the quote and the
 * backslash. Everything else takes the slow path. */
static bool plain(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* One character the JSON text must escape (a quote, a backslash, a
 * control character), as jansson does. */
static void escape_char(struct json_out *o, unsigned char c)
{
	char seq[6] = { '\\', 'u', '0', '0', hex_upper[c >> 4], hex_upper[c & 15] };

	switch (c) {
	case '"':
		json_out_lit(o, "\\\"");
		return;
	case '\\':
		json_out_lit(o, "\\\\");
		return;
	case '\b':
		json_out_lit(o, "\\b");
		return;
	case '\f':
		json_out_lit(o, "\\f");
		return;
	case '\n':
		json_out_lit(o, "\\n");
		return;
	case '\r':
		json_out_lit(o, "\\r");
		return;
	case '\t':
		json_out_lit(o, "\\t");
		return;
	default:
		json_out_raw(o, seq, sizeof(seq));
	}
}

void json_out_bytes(struct json_out *o, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	json_out_lit(o, "\"");
	while (i < n && !o->full) {
		size_t run = i, l;

		while (run < n && plain(u[run]))
			run++;
		json_out_raw(o, s + i, run - i);
		i = run;
		if (i == n)
			break;
		if (u[i] < 0x80) {
			escape_char(o, u[i]);
			i++;
		} else if ((l = utf8_seq_len(u + i, n - i))) {
			json_out_raw(o, s + i, l);
			i += l;
		} else {
			/* The text \xNN, its backslash escaped. */
			char seq[5] = { '\\', '\\', 'x', hex_lower[u[i] >> 4],
					hex_lower[u[i] & 15] };

			json_out_raw(o, seq, sizeof(seq));
			i++;
		}
	}
	json_out_lit(o, "\"");
}

void json_out_str_or_null(struct json_out *o, const char *s)
{
	if (s)
		json_out_bytes(o, s, strlen(s));
	else
		json_out_null(o);
}

void json_out_uint(struct json_out *o, uint64_t v)
{
	char digits[20];
	size_t n = 0;

	do {
		digits[sizeof(digits) - ++n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	json_out_raw(o, digits + sizeof(digits) - n, n);
}

void json_out_int(struct json_out *o, int64_t v)
{
	if (v < 0) {
		json_out_lit(o, "-");
		json_out_uint(o, -(uint64_t)v);
	} else {
		json_out_uint(o, (uint64_t)v);
	}
}

void json_out_bool(struct json_out *o, bool v)
{
	if (v)
		json_out_lit(o, "true");
	else
		json_out_lit(o, "false");
}

void json_out_null(struct json_out *o)
{
	json_out_lit(o, "null");
}

void json_out_real(struct json_out *o, double v, int precision)
{
	char text[64], *e;
	int n = snprintf(text, sizeof(text), "%.*g", precision, v);
	size_t len;

	if (n < 0 || (size_t)n >= sizeof(text) - 2) {
		o->full = true;
		return;
	}
	len = (size_t)n;
	/* jansson's form of the exponent: no '+', no leading zeros. */
	e = strchr(text, 'e');
	if (e) {
		char *digits = e + 1, *from;

		if (*digits == '-')
			digits++;
		for (from = digits; *from == '+' || *from == '0'; from++)
			;
		if (from != digits) {
			memmove(digits, from, strlen(from) + 1);
			len = strlen(text);
		}
	} else if (!strchr(text, '.')) {
		memcpy(text + len, ".0", 3);
		len += 2;
	}
	json_out_raw(o, text, len);
}

int json_out_finish(struct json_out *o)
{
	if (o->full) {
		if (o->cap)
			o->buf[o->len < o->cap ? o->len : o->cap - 1] = '\0';
		return -ENOSPC;
	}
	o->buf[o->len] = '\0';
	return (int)o->len;
}
