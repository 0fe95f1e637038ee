/* The schema gate: a small strict scanner over the reward program's stdout.
 * A general JSON parser would accept too much (NaN with some flags, nested
 * values) and explain too little; this one knows the only valid shape,
 * [n, n, ...], and names the first thing that is not it. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "scores.h"

#define TOKEN_ECHO_MAX 32

struct scan {
	const char *buf;
	size_t len;
	size_t pos;
	char *detail;
	size_t detail_len;
};

static int bad(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct scan *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->detail, s->detail_len, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static bool json_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(struct scan *s)
{
	while (s->pos < s->len && json_ws(s->buf[s->pos]))
		s->pos++;
}

/* A byte as it reads in a message: 'x' when printable, else byte 0xNN. */
static const char *describe_byte(unsigned char c, char *buf, size_t len)
{
	if (c >= 0x20 && c < 0x7f && c != '\'')
		snprintf(buf, len, "'%c'", c);
	else
		snprintf(buf, len, "byte 0x%02x", c);
	return buf;
}

/* Tenant text quoted into a message: printable ASCII only, bounded. */
static const char *echo(const char *p, size_t n, char *buf, size_t len)
{
	size_t o = 0, max = n < TOKEN_ECHO_MAX ? n : TOKEN_ECHO_MAX;

	for (size_t i = 0; i < max && o + 1 < len; i++) {
		unsigned char c = p[i];
		buf[o++] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
	}
	if (n > max && o + 4 < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

static bool word_char(char c)
{
	return isalpha((unsigned char)c);
}

/* Characters that can belong to something meant as a number: the span
 * reported when it is not a valid JSON number ("01", "1.", "1e", "0x1f"). */
static bool numberish_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '+' || c == '-' || c == '_';
}

static bool digit(const struct scan *s, size_t p)
{
	return p < s->len && s->buf[p] >= '0' && s->buf[p] <= '9';
}

/* End of the JSON number grammar at `p`, or 0 when it does not match:
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static size_t json_number_end(const struct scan *s, size_t p)
{
	if (p < s->len && s->buf[p] == '-')
		p++;
	if (!digit(s, p))
		return 0;
	if (s->buf[p] == '0')
		p++;
	else
		while (digit(s, p))
			p++;
	if (p < s->len && s->buf[p] == '.') {
		p++;
		if (!digit(s, p))
			return 0;
		while (digit(s, p))
			p++;
	}
	if (p < s->len && (s->buf[p] == 'e' || s->buf[p] == 'E')) {
		p++;
		if (p < s->len && (s->buf[p] == '+' || s->buf[p] == '-'))
			p++;
		if (!digit(s, p))
			return 0;
		while (digit(s, p))
			p++;
	}
	return p;
}

static int scan_number(struct scan *s, size_t idx, double *out)
{
	size_t start = s->pos, end = json_number_end(s, start), span = start;
	char ebuf[TOKEN_ECHO_MAX + 8], small[64], *tok;
	double v;

	while (span < s->len && numberish_char(s->buf[span]))
		span++;
	if (!end || end != span)
		return bad(s, "score at index %zu: invalid number '%s' at byte %zu", idx,
			   echo(s->buf + start, span - start, ebuf, sizeof(ebuf)), start);

	/* strtod needs a terminated copy; a number may be long (1 MB of digits). */
	tok = end - start < sizeof(small) ? small : malloc(end - start + 1);
	if (!tok)
		return -ENOMEM;
	memcpy(tok, s->buf + start, end - start);
	tok[end - start] = '\0';
	errno = 0;
	v = strtod(tok, NULL);
	if (tok != small)
		free(tok);
	/* ERANGE with a finite result is underflow (1e-400 is 0): still a
	 * finite number as written, rounded like any decimal literal. */
	if (isinf(v))
		return bad(s, "score at index %zu (%s) overflows a double: not a finite number",
			   idx, echo(s->buf + start, end - start, ebuf, sizeof(ebuf)));
	*out = v;
	s->pos = end;
	return 0;
}

static int scan_word(struct scan *s, size_t idx)
{
	size_t start = s->pos, p = start;
	char ebuf[TOKEN_ECHO_MAX + 8];
	const char *w;
	size_t n;

	if (p < s->len && s->buf[p] == '-')
		p++;
	while (p < s->len && word_char(s->buf[p]))
		p++;
	w = s->buf + start;
	n = p - start;
	echo(w, n, ebuf, sizeof(ebuf));
	if (*w == '-') {
		w++;
		n--;
	}
	if ((n == 3 && !strncasecmp(w, "nan", 3)))
		return bad(s, "score at index %zu is NaN, not a finite number", idx);
	if ((n == 3 && !strncasecmp(w, "inf", 3)) || (n == 8 && !strncasecmp(w, "infinity", 8)))
		return bad(s, "score at index %zu is %s, not a finite number", idx, ebuf);
	if (n == 4 && !strncmp(w, "null", 4) && w == s->buf + start)
		return bad(s, "score at index %zu is null, not a number", idx);
	if (((n == 4 && !strncmp(w, "true", 4)) || (n == 5 && !strncmp(w, "false", 5))) &&
	    w == s->buf + start)
		return bad(s, "score at index %zu is a boolean (%s), not a number", idx, ebuf);
	return bad(s, "score at index %zu: invalid token '%s' at byte %zu", idx, ebuf, start);
}

/* One array element: a finite number, or the reason it is not. */
static int scan_score(struct scan *s, size_t idx, bool after_comma, double *out)
{
	char cbuf[16];
	char c;

	if (s->pos >= s->len)
		return bad(s, "unterminated array: output ended after %zu scores", idx);
	c = s->buf[s->pos];
	if (c == '-' && s->pos + 1 < s->len && word_char(s->buf[s->pos + 1]))
		return scan_word(s, idx);
	if (c == '-' || (c >= '0' && c <= '9'))
		return scan_number(s, idx, out);
	if (word_char(c))
		return scan_word(s, idx);
	switch (c) {
	case '"':
		return bad(s, "score at index %zu is a string, not a number", idx);
	case '[':
		return bad(s, "score at index %zu is an array: nested values are not allowed", idx);
	case '{':
		return bad(s, "score at index %zu is an object: nested values are not allowed",
			   idx);
	case ']':
		if (after_comma)
			return bad(s, "trailing comma after score at index %zu (byte %zu)", idx - 1,
				   s->pos);
		break;
	}
	return bad(s, "expected a score at index %zu, got %s at byte %zu", idx,
		   describe_byte((unsigned char)c, cbuf, sizeof(cbuf)), s->pos);
}

/* What a non-array output starts with, for the top-level message. */
static const char *describe_top(const struct scan *s, char *buf, size_t len)
{
	char c = s->buf[s->pos], ebuf[TOKEN_ECHO_MAX + 8];
	size_t p = s->pos;

	switch (c) {
	case '{':
		return "an object";
	case '"':
		return "a string";
	}
	if (c == '-' || (c >= '0' && c <= '9'))
		return "a number";
	if (word_char(c)) {
		while (p < s->len && word_char(s->buf[p]))
			p++;
		snprintf(buf, len, "'%s'", echo(s->buf + s->pos, p - s->pos, ebuf, sizeof(ebuf)));
		return buf;
	}
	return describe_byte((unsigned char)c, buf, len);
}

static int scan_array(struct scan *s, size_t expected, double *scores)
{
	char cbuf[16], ebuf[TOKEN_ECHO_MAX + 8], wbuf[TOKEN_ECHO_MAX + 16];
	size_t count = 0;
	int ret;

	skip_ws(s);
	if (s->pos >= s->len)
		return bad(s, "empty output");
	if (s->buf[s->pos] != '[')
		return bad(s, "expected a JSON array of %zu numbers, got %s at byte %zu", expected,
			   describe_top(s, wbuf, sizeof(wbuf)), s->pos);
	s->pos++;
	skip_ws(s);
	if (s->pos < s->len && s->buf[s->pos] == ']') {
		s->pos++;
	} else {
		for (;;) {
			double v = 0;

			skip_ws(s);
			ret = scan_score(s, count, count > 0, &v);
			if (ret)
				return ret;
			if (count < expected)
				scores[count] = v;
			count++;
			skip_ws(s);
			if (s->pos >= s->len)
				return bad(s, "unterminated array: output ended after %zu scores",
					   count);
			if (s->buf[s->pos] == ']') {
				s->pos++;
				break;
			}
			if (s->buf[s->pos] != ',')
				return bad(
					s,
					"expected ',' or ']' after score at index %zu, got %s at byte %zu",
					count - 1,
					describe_byte((unsigned char)s->buf[s->pos], cbuf,
						      sizeof(cbuf)),
					s->pos);
			s->pos++;
		}
	}
	skip_ws(s);
	if (s->pos < s->len)
		return bad(s, "trailing garbage after the array at byte %zu: '%s'", s->pos,
			   echo(s->buf + s->pos, s->len - s->pos, ebuf, sizeof(ebuf)));
	if (count != expected)
		return bad(s, "expected %zu scores, got %zu", expected, count);
	return 0;
}

int scores_parse(const char *buf, size_t len, size_t expected, double **scores, char *detail,
		 size_t detail_len)
{
	struct scan s = { .buf = buf, .len = len, .detail = detail, .detail_len = detail_len };
	double *out = NULL;
	int ret;

	*scores = NULL;
	if (detail_len)
		detail[0] = '\0';
	if (expected) {
		out = calloc(expected, sizeof(*out));
		if (!out)
			return -ENOMEM;
	}
	ret = scan_array(&s, expected, out);
	if (ret) {
		free(out);
		return ret;
	}
	*scores = out;
	return 0;
}

void scores_stats(const double *scores, size_t n, struct score_stats *st)
{
	double scale = 0, mean = 0, m2 = 0;

	memset(st, 0, sizeof(*st));
	st->n = n;
	if (!n)
		return;
	/* Scale by the largest magnitude so that differences of values near
	 * DBL_MAX do not overflow in the running update (Welford). */
	for (size_t i = 0; i < n; i++)
		if (fabs(scores[i]) > scale)
			scale = fabs(scores[i]);
	st->constant = n >= 2;
	for (size_t i = 0; i < n; i++) {
		double x = scale > 0 ? scores[i] / scale : 0, delta = x - mean;

		mean += delta / (double)(i + 1);
		m2 += delta * (x - mean);
		if (scores[i] != scores[0])
			st->constant = false;
	}
	st->mean = mean * scale;
	st->variance = st->constant ? 0 : (m2 / (double)n) * scale * scale;
}
