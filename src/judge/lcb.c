/* LiveCodeBench-style output comparison (see src/judge/lcb.h for the exact
 * rules and where they come from). Works on bytes; nothing is copied
 * except a number token while it is being normalized. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "lcb.h"

#define EXP_DIGITS_MAX 18 /* |exponent| < 10^18, see lcb.h */

struct span {
	const unsigned char *p;
	size_t n;
};

/* Length of the Python whitespace character at s[i], 0 if there is none. */
static size_t space_len(const unsigned char *s, size_t n, size_t i)
{
	unsigned char c = s[i], d, e;

	if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20))
		return 1;
	if (c == 0xc2 && i + 1 < n && (s[i + 1] == 0x85 || s[i + 1] == 0xa0))
		return 2;
	if (i + 2 >= n)
		return 0;
	d = s[i + 1];
	e = s[i + 2];
	if ((c == 0xe1 && d == 0x9a && e == 0x80) || /* U+1680 */
	    (c == 0xe2 && d == 0x80 &&
	     ((e >= 0x80 && e <= 0x8a) || /* U+2000-U+200A */
	      e == 0xa8 || e == 0xa9 || e == 0xaf)) ||
	    (c == 0xe2 && d == 0x81 && e == 0x9f) || /* U+205F */
	    (c == 0xe3 && d == 0x80 && e == 0x80))   /* U+3000 */
		return 3;
	return 0;
}

static struct span strip(struct span s)
{
	size_t i = 0, start, end;

	while (i < s.n) {
		size_t w = space_len(s.p, s.n, i);
		if (!w)
			break;
		i += w;
	}
	start = end = i;
	while (i < s.n) {
		size_t w = space_len(s.p, s.n, i);
		if (w) {
			i += w;
		} else {
			i++;
			end = i;
		}
	}
	return (struct span){ s.p + start, end - start };
}

/* The next "\n"-separated line of *rest (consumed), not yet stripped. */
static struct span next_line(struct span *rest)
{
	const unsigned char *nl = rest->n ? memchr(rest->p, '\n', rest->n) : NULL;
	struct span line = { rest->p, nl ? (size_t)(nl - rest->p) : rest->n };

	rest->p += nl ? line.n + 1 : line.n;
	rest->n -= nl ? line.n + 1 : line.n;
	return line;
}

static size_t count_lines(struct span s)
{
	size_t n = 1;

	if (!s.n)
		return 1;
	for (const unsigned char *p = s.p; (p = memchr(p, '\n', s.n - (size_t)(p - s.p))); p++)
		n++;
	return n;
}

/* The next whitespace-separated token of *rest (consumed); n = 0 at the end. */
static struct span next_token(struct span *rest)
{
	size_t i = 0, start;

	while (i < rest->n) {
		size_t w = space_len(rest->p, rest->n, i);
		if (!w)
			break;
		i += w;
	}
	start = i;
	while (i < rest->n && !space_len(rest->p, rest->n, i))
		i++;
	struct span tok = { rest->p + start, i - start };
	rest->p += i;
	rest->n -= i;
	return tok;
}

enum dec_kind { DEC_FINITE, DEC_INF, DEC_NAN };

/* A decimal in normal form: value = (neg ? -1 : 1) * digits * 10^exp, with
 * digits free of leading and trailing zeros (empty for zero). */
struct decimal {
	enum dec_kind kind;
	bool neg;
	char *digits;
	size_t n_digits;
	long long exp;
};

static bool all_digits(const char *s)
{
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* Parse `t` (underscores already removed, NUL-terminated) into *d, the
 * digits going to `digits` (room for strlen(t) bytes). */
static bool decimal_parse(const char *t, char *digits, struct decimal *d)
{
	long long exp = 0, frac = 0;
	size_t n = 0, lead;
	bool any = false;

	memset(d, 0, sizeof(*d));
	d->digits = digits;
	if (*t == '+' || *t == '-')
		d->neg = *t++ == '-';
	if (!strcasecmp(t, "inf") || !strcasecmp(t, "infinity")) {
		d->kind = DEC_INF;
		return true;
	}
	if ((!strncasecmp(t, "nan", 3) && all_digits(t + 3)) ||
	    (!strncasecmp(t, "snan", 4) && all_digits(t + 4))) {
		d->kind = DEC_NAN;
		return true;
	}
	for (; *t >= '0' && *t <= '9'; t++, any = true)
		digits[n++] = *t;
	if (*t == '.')
		for (t++; *t >= '0' && *t <= '9'; t++, frac++, any = true)
			digits[n++] = *t;
	if (!any)
		return false;
	if (*t == 'e' || *t == 'E') {
		bool eneg = false;
		int sig = 0;

		t++;
		if (*t == '+' || *t == '-')
			eneg = *t++ == '-';
		if (*t < '0' || *t > '9')
			return false;
		while (*t == '0')
			t++;
		for (; *t >= '0' && *t <= '9'; t++) {
			if (++sig > EXP_DIGITS_MAX)
				return false;
			exp = exp * 10 + (*t - '0');
		}
		if (eneg)
			exp = -exp;
	}
	if (*t)
		return false;
	for (lead = 0; lead < n && digits[lead] == '0'; lead++)
		;
	memmove(digits, digits + lead, n - lead);
	n -= lead;
	exp -= frac;
	while (n && digits[n - 1] == '0') {
		n--;
		exp++;
	}
	d->n_digits = n;
	d->exp = exp;
	return true;
}

/* Copy a token without its underscores, as Decimal() reads it. */
static char *without_underscores(const char *s, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++)
		if (s[i] != '_')
			out[o++] = s[i];
	out[o] = '\0';
	return out;
}

bool lcb_decimal_equal(const char *a, size_t a_len, const char *b, size_t b_len)
{
	/* One allocation: both cleaned tokens and both digit strings. */
	char *buf = malloc(2 * (a_len + 1) + 2 * (b_len + 1));
	struct decimal da, db;
	bool eq = false;

	/* A NUL is no character of a number: Decimal() raises on it, where
	 * the NUL-terminated parse below would stop at it and read a number. */
	if (!buf || memchr(a, '\0', a_len) || memchr(b, '\0', b_len)) {
		free(buf);
		return false;
	}
	char *ca = without_underscores(a, a_len, buf);
	char *cb = without_underscores(b, b_len, buf + a_len + 1);
	char *dga = buf + a_len + 1 + b_len + 1;
	char *dgb = dga + a_len + 1;

	if (!decimal_parse(ca, dga, &da) || !decimal_parse(cb, dgb, &db))
		goto out;
	if (da.kind == DEC_NAN || db.kind == DEC_NAN || da.kind != db.kind)
		goto out;
	if (da.kind == DEC_INF) {
		eq = da.neg == db.neg;
		goto out;
	}
	if (!da.n_digits || !db.n_digits) {
		eq = !da.n_digits && !db.n_digits; /* -0 == 0 */
		goto out;
	}
	eq = da.neg == db.neg && da.exp == db.exp && da.n_digits == db.n_digits &&
	     !memcmp(da.digits, db.digits, da.n_digits);
out:
	free(buf);
	return eq;
}

static bool lines_match(struct span got, struct span want)
{
	if (got.n == want.n && (!got.n || !memcmp(got.p, want.p, got.n)))
		return true;
	for (;;) {
		struct span g = next_token(&got), w = next_token(&want);

		if (!g.n || !w.n)
			return !g.n && !w.n;
		if (!lcb_decimal_equal((const char *)g.p, g.n, (const char *)w.p, w.n))
			return false;
	}
}

bool lcb_match(const char *got, size_t got_len, const char *want, size_t want_len, char *why,
	       size_t why_len)
{
	struct span g = strip((struct span){ (const unsigned char *)got, got_len });
	struct span w = strip((struct span){ (const unsigned char *)want, want_len });
	size_t ng = count_lines(g), nw = count_lines(w);

	if (ng != nw) {
		if (why)
			snprintf(why, why_len, "expected %zu lines, got %zu", nw, ng);
		return false;
	}
	for (size_t i = 1; i <= nw; i++) {
		struct span gl = strip(next_line(&g)), wl = strip(next_line(&w));

		if (!lines_match(gl, wl)) {
			if (why)
				snprintf(why, why_len, "line %zu differs", i);
			return false;
		}
	}
	if (why && why_len)
		why[0] = '\0';
	return true;
}
