/* Python's == over json.loads() values (src/judge/py_equal.h): the text is
 * parsed into a small tree (integers kept as their digits, so that any
 * size compares exactly), then the trees are compared. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "py_equal.h"

enum pv_kind { PV_NULL, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_LIST, PV_DICT };

struct pv {
	enum pv_kind kind;
	bool b;
	double f;
	char *s; /* PV_INT: digits with an optional '-'; PV_STR: UTF-8 bytes */
	size_t n;
	struct pv *items; /* PV_LIST: n items; PV_DICT: 2n, key then value */
	size_t order;     /* a dict entry's position, for "the last key wins" */
};

struct parser {
	const char *p, *end, *start;
	int depth;
	int err; /* -EINVAL or -ENOMEM */
	char *msg;
	size_t msg_len;
};

static void pv_free(struct pv *v)
{
	size_t n = v->kind == PV_DICT ? 2 * v->n : v->kind == PV_LIST ? v->n : 0;

	for (size_t i = 0; i < n; i++)
		pv_free(&v->items[i]);
	free(v->items);
	free(v->s);
}

static int fail(struct parser *ps, const char *what)
{
	if (!ps->err) {
		ps->err = -EINVAL;
		if (ps->msg)
			snprintf(ps->msg, ps->msg_len, "at byte %zu: %s",
				 (size_t)(ps->p - ps->start), what);
	}
	return ps->err;
}

static int oom(struct parser *ps)
{
	ps->err = -ENOMEM;
	return ps->err;
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool take(struct parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
		return false;
	ps->p += n;
	return true;
}

static int hex4(struct parser *ps, unsigned *out)
{
	*out = 0;
	for (int i = 0; i < 4; i++, ps->p++) {
		char c = ps->p < ps->end ? *ps->p : 0;
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return fail(ps, "a \\u escape needs 4 hex digits");
		*out = *out * 16 + (unsigned)d;
	}
	return 0;
}

/* Code point to UTF-8; a lone surrogate is encoded like any other code
 * point, so that both sides of a comparison read it alike. */
static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int escape(struct parser *ps, char *o, size_t *n)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *e = ps->p < ps->end ? strchr(from, *ps->p) : NULL;
	unsigned cp, lo;

	if (e && *ps->p) {
		o[(*n)++] = to[e - from];
		ps->p++;
		return 0;
	}
	if (ps->p >= ps->end || *ps->p != 'u')
		return fail(ps, "unknown escape in a string");
	ps->p++;
	if (hex4(ps, &cp))
		return ps->err;
	if (cp >= 0xd800 && cp < 0xdc00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
	    ps->p[1] == 'u') {
		const char *back = ps->p;

		ps->p += 2;
		if (hex4(ps, &lo))
			return ps->err;
		if (lo >= 0xdc00 && lo < 0xe000)
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		else
			ps->p = back; /* a lone high surrogate, then another escape */
	}
	*n += put_utf8(o + *n, cp);
	return 0;
}

static int parse_string(struct parser *ps, struct pv *v)
{
	const char *q = ++ps->p;
	size_t n = 0;

	while (q < ps->end && *q != '"')
		q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
	/* Decoded, a string is never longer than its text. */
	v->kind = PV_STR;
	v->s = malloc((size_t)(q - ps->p) + 1);
	if (!v->s)
		return oom(ps);
	while (ps->p < ps->end && *ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;

		if (c < 0x20)
			return fail(ps, "a control character in a string");
		if (c == '\\') {
			ps->p++;
			if (escape(ps, v->s, &n))
				return ps->err;
			continue;
		}
		v->s[n++] = (char)c;
		ps->p++;
	}
	if (ps->p >= ps->end)
		return fail(ps, "unterminated string");
	ps->p++;
	v->n = n;
	return 0;
}

static int parse_number(struct parser *ps, struct pv *v)
{
	const char *s = ps->p, *d;
	bool is_float = false;
	char *buf;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (take(ps, "Infinity")) {
		v->kind = PV_FLOAT;
		v->f = *s == '-' ? -INFINITY : INFINITY;
		return 0;
	}
	d = ps->p;
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
		ps->p++;
	if (ps->p == d || (*d == '0' && ps->p - d > 1))
		return fail(ps, "a malformed number");
	if (ps->p < ps->end && *ps->p == '.') {
		is_float = true;
		d = ++ps->p;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
		if (ps->p == d)
			return fail(ps, "a malformed number");
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		is_float = true;
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		d = ps->p;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
		if (ps->p == d)
			return fail(ps, "a malformed number");
	}
	buf = strndup(s, (size_t)(ps->p - s));
	if (!buf)
		return oom(ps);
	if (is_float) {
		v->kind = PV_FLOAT;
		v->f = strtod(buf, NULL);
		free(buf);
		return 0;
	}
	v->kind = PV_INT;
	v->s = buf;
	if (!strcmp(buf, "-0"))
		memmove(buf, buf + 1, 2);
	return 0;
}

static int parse_value(struct parser *ps, struct pv *v);

/* An array's items or an object's entries, up to `close`. */
static int parse_items(struct parser *ps, struct pv *v, char close)
{
	size_t cap = 0, per = v->kind == PV_DICT ? 2 : 1;

	ps->p++;
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		if ((v->n + 1) * per > cap) {
			size_t want = cap ? cap * 2 : 8;
			struct pv *grown = realloc(v->items, want * sizeof(*grown));

			if (!grown)
				return oom(ps);
			v->items = grown;
			cap = want;
		}
		struct pv *slot = &v->items[v->n * per];

		memset(slot, 0, per * sizeof(*slot));
		v->n++;
		skip_space(ps);
		if (per == 2) {
			if (ps->p >= ps->end || *ps->p != '"')
				return fail(ps, "an object key must be a string");
			slot->order = v->n;
			if (parse_string(ps, slot))
				return ps->err;
			skip_space(ps);
			if (ps->p >= ps->end || *ps->p != ':')
				return fail(ps, "expected ':' after an object key");
			ps->p++;
			slot++;
		}
		if (parse_value(ps, slot))
			return ps->err;
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return 0;
		}
		return fail(ps, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
	}
}

static int parse_value(struct parser *ps, struct pv *v)
{
	int ret;

	skip_space(ps);
	if (ps->p >= ps->end)
		return fail(ps, "expected a value");
	switch (*ps->p) {
	case '"':
		return parse_string(ps, v);
	case '[':
	case '{':
		if (++ps->depth > PY_JSON_DEPTH_MAX)
			return fail(ps, "nested too deeply");
		v->kind = *ps->p == '[' ? PV_LIST : PV_DICT;
		ret = parse_items(ps, v, *ps->p == '[' ? ']' : '}');
		ps->depth--;
		return ret;
	}
	if (take(ps, "null")) {
		v->kind = PV_NULL;
		return 0;
	}
	if (take(ps, "true") || take(ps, "false")) {
		v->kind = PV_BOOL;
		v->b = ps->p[-1] == 'e' && ps->p[-2] == 'u';
		return 0;
	}
	if (take(ps, "NaN")) {
		v->kind = PV_FLOAT;
		v->f = NAN;
		return 0;
	}
	if (*ps->p != '-' && *ps->p != 'I' && (*ps->p < '0' || *ps->p > '9'))
		return fail(ps, "expected a value");
	return parse_number(ps, v);
}

static int parse(const char *text, size_t len, struct pv *v, char *err, size_t err_len)
{
	struct parser ps = {
		.p = text, .end = text + len, .start = text, .msg = err, .msg_len = err_len
	};

	memset(v, 0, sizeof(*v));
	if (!parse_value(&ps, v)) {
		skip_space(&ps);
		if (ps.p != ps.end)
			fail(&ps, "extra data after the value");
	}
	if (ps.err)
		pv_free(v);
	return ps.err;
}

int py_json_check(const char *text, size_t len, char *err, size_t err_len)
{
	struct pv v;
	int ret = parse(text, len, &v, err, err_len);

	if (!ret)
		pv_free(&v);
	return ret;
}

static bool numeric(const struct pv *v)
{
	return v->kind == PV_BOOL || v->kind == PV_INT || v->kind == PV_FLOAT;
}

/* An integer's digits against a float: equal only when the float is that
 * integer exactly (glibc prints an integral double's exact digits). */
static bool int_equals_float(const char *digits, double f)
{
	char buf[400];

	if (!isfinite(f) || f != floor(f))
		return false;
	snprintf(buf, sizeof(buf), "%.0f", f);
	return !strcmp(buf, "-0") ? !strcmp(digits, "0") : !strcmp(buf, digits);
}

static bool numbers_equal(const struct pv *a, const struct pv *b)
{
	const char *ai = a->kind == PV_BOOL ? (a->b ? "1" : "0") : a->s;
	const char *bi = b->kind == PV_BOOL ? (b->b ? "1" : "0") : b->s;

	if (a->kind == PV_FLOAT && b->kind == PV_FLOAT)
		return a->f == b->f;
	if (a->kind == PV_FLOAT)
		return int_equals_float(bi, a->f);
	if (b->kind == PV_FLOAT)
		return int_equals_float(ai, b->f);
	return !strcmp(ai, bi);
}

static int key_cmp(const void *x, const void *y)
{
	const struct pv *a = x, *b = y;
	size_t n = a->n < b->n ? a->n : b->n;
	int c = n ? memcmp(a->s, b->s, n) : 0;

	if (c)
		return c;
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* Sort a dict's entries by key, keep the last of each key: its size. */
static size_t dict_settle(struct pv *d)
{
	size_t out = 0;

	qsort(d->items, d->n, 2 * sizeof(*d->items), key_cmp);
	for (size_t i = 0; i < d->n; i++) {
		const struct pv *k = &d->items[2 * i], *next = &d->items[2 * i + 2];

		if (i + 1 < d->n && next->n == k->n && !memcmp(next->s, k->s, k->n))
			continue; /* a later duplicate wins */
		if (out != i) {
			struct pv tmp[2] = { d->items[2 * out], d->items[2 * out + 1] };

			d->items[2 * out] = d->items[2 * i];
			d->items[2 * out + 1] = d->items[2 * i + 1];
			d->items[2 * i] = tmp[0];
			d->items[2 * i + 1] = tmp[1];
		}
		out++;
	}
	return out;
}

static bool values_equal(struct pv *a, struct pv *b)
{
	if (numeric(a) && numeric(b))
		return numbers_equal(a, b);
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case PV_NULL:
		return true;
	case PV_STR:
		return a->n == b->n && (!a->n || !memcmp(a->s, b->s, a->n));
	case PV_LIST:
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++)
			if (!values_equal(&a->items[i], &b->items[i]))
				return false;
		return true;
	case PV_DICT: {
		size_t na = dict_settle(a), nb = dict_settle(b);

		if (na != nb)
			return false;
		for (size_t i = 0; i < na; i++) {
			struct pv *ka = &a->items[2 * i], *kb = &b->items[2 * i];

			if (ka->n != kb->n || (ka->n && memcmp(ka->s, kb->s, ka->n)) ||
			    !values_equal(ka + 1, kb + 1))
				return false;
		}
		return true;
	}
	default:
		return false;
	}
}

int py_json_equal(const char *a, size_t a_len, const char *b, size_t b_len)
{
	struct pv va, vb;
	int ret = parse(a, a_len, &va, NULL, 0);

	if (ret)
		return ret;
	ret = parse(b, b_len, &vb, NULL, 0);
	if (ret) {
		pv_free(&va);
		return ret;
	}
	ret = values_equal(&va, &vb);
	pv_free(&va);
	pv_free(&vb);
	return ret;
}
