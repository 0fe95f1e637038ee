/* A small JSON scanner that walks the source text along a key path. It is
 * only ever run on text jansson has already accepted, but it still checks
 * every step and answers -1 rather than reading past the end. Keys are
 * compared after decoding their escapes, so "\u0074enant" finds "tenant". */
#include <stdint.h>
#include <string.h>
#include "json_locate.h"

struct scan {
	const char *s;
	size_t len, pos;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Ends a number or a literal (true, false, null). */
static bool is_delim(char c)
{
	return is_ws(c) || c == ',' || c == ':' || c == '}' || c == ']' || c == '\0';
}

static void skip_ws(struct scan *sc)
{
	while (sc->pos < sc->len && is_ws(sc->s[sc->pos]))
		sc->pos++;
}

static int hex4(const char *p, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t utf8_encode(uint32_t cp, char *buf)
{
	if (cp < 0x80) {
		buf[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		buf[0] = (char)(0xc0 | (cp >> 6));
		buf[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		buf[0] = (char)(0xe0 | (cp >> 12));
		buf[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		buf[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	buf[0] = (char)(0xf0 | (cp >> 18));
	buf[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	buf[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	buf[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Decodes the escape at sc->pos (a backslash) into buf; returns its length
 * in bytes, or 0 when malformed. */
static size_t decode_escape(struct scan *sc, char *buf)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	uint32_t cp, lo;

	if (sc->pos + 1 >= sc->len)
		return 0;
	char c = sc->s[sc->pos + 1];
	const char *m = c ? strchr(from, c) : NULL;
	if (m) {
		buf[0] = to[m - from];
		sc->pos += 2;
		return 1;
	}
	if (c != 'u' || sc->pos + 6 > sc->len || hex4(sc->s + sc->pos + 2, &cp))
		return 0;
	sc->pos += 6;
	/* A high surrogate followed by \uDCxx is one code point. */
	if (cp >= 0xd800 && cp < 0xdc00 && sc->pos + 6 <= sc->len && sc->s[sc->pos] == '\\' &&
	    sc->s[sc->pos + 1] == 'u' && !hex4(sc->s + sc->pos + 2, &lo) && lo >= 0xdc00 &&
	    lo < 0xe000) {
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		sc->pos += 6;
	}
	return utf8_encode(cp, buf);
}

/* Steps over `c` if it is next; false if it is not. */
static bool take(struct scan *sc, char c)
{
	if (sc->pos >= sc->len || sc->s[sc->pos] != c)
		return false;
	sc->pos++;
	return true;
}

/* Reads the string starting at sc->pos (its opening quote). When `want`
 * is given, *equal tells whether the decoded string is exactly `want`. */
static bool scan_string(struct scan *sc, const char *want, bool *equal)
{
	size_t wi = 0;
	bool same = want != NULL;

	if (!take(sc, '"'))
		return false;
	while (sc->pos < sc->len && sc->s[sc->pos] != '"') {
		char buf[4];
		size_t n = 1;
		if (sc->s[sc->pos] == '\\') {
			n = decode_escape(sc, buf);
			if (!n)
				return false;
		} else {
			buf[0] = sc->s[sc->pos++];
		}
		if (same) {
			if (strnlen(want + wi, n) < n || memcmp(want + wi, buf, n))
				same = false;
			else
				wi += n;
		}
	}
	if (sc->pos >= sc->len)
		return false;
	sc->pos++;
	if (equal)
		*equal = same && want[wi] == '\0';
	return true;
}

/* Steps over one value of any kind. Containers are skipped by counting
 * brackets outside strings: the text is known to be well-formed. */
static bool skip_value(struct scan *sc)
{
	skip_ws(sc);
	if (sc->pos >= sc->len)
		return false;
	char c = sc->s[sc->pos];
	if (c == '"')
		return scan_string(sc, NULL, NULL);
	if (c == '{' || c == '[') {
		long depth = 0;
		while (sc->pos < sc->len) {
			c = sc->s[sc->pos];
			if (c == '"') {
				if (!scan_string(sc, NULL, NULL))
					return false;
				continue;
			}
			if (c == '{' || c == '[')
				depth++;
			else if ((c == '}' || c == ']') && --depth == 0) {
				sc->pos++;
				return true;
			}
			sc->pos++;
		}
		return false;
	}
	size_t start = sc->pos;
	while (sc->pos < sc->len && !is_delim(sc->s[sc->pos]))
		sc->pos++;
	return sc->pos > start;
}

/* Steps over a member's or element's value and the ',' after it; false at
 * the end of the container (or on malformed text). */
static bool skip_item(struct scan *sc)
{
	if (!skip_value(sc))
		return false;
	skip_ws(sc);
	return take(sc, ',');
}

/* At an object: leaves sc->pos at the value of member `key`, and its key's
 * offset in *key_pos. */
static bool find_member(struct scan *sc, const char *key, size_t *key_pos)
{
	if (!take(sc, '{'))
		return false;
	for (;;) {
		bool match = false;
		skip_ws(sc);
		*key_pos = sc->pos;
		if (!scan_string(sc, key, &match))
			return false; /* also the end of the object: not found */
		skip_ws(sc);
		if (!take(sc, ':'))
			return false;
		skip_ws(sc);
		if (match)
			return true;
		if (!skip_item(sc))
			return false;
	}
}

static bool find_element(struct scan *sc, size_t index)
{
	if (!take(sc, '['))
		return false;
	for (size_t i = 0;; i++) {
		skip_ws(sc);
		if (sc->pos >= sc->len || sc->s[sc->pos] == ']')
			return false;
		if (i == index)
			return true;
		if (!skip_item(sc))
			return false;
	}
}

long json_locate(const char *text, size_t len, const struct json_step *path, int depth, bool at_key)
{
	struct scan sc = { .s = text, .len = len, .pos = 0 };
	size_t key_pos = 0;

	if (!text || (at_key && (depth < 1 || !path[depth - 1].key)))
		return -1;
	skip_ws(&sc);
	for (int i = 0; i < depth; i++) {
		bool found = path[i].key ? find_member(&sc, path[i].key, &key_pos)
					 : find_element(&sc, path[i].index);
		if (!found)
			return -1;
	}
	if (sc.pos >= len)
		return -1;
	return (long)(at_key ? key_pos : sc.pos);
}

void json_line_col(const char *text, size_t len, size_t offset, int *line, int *col)
{
	int l = 1, c = 1;

	for (size_t i = 0; i < offset && i < len; i++) {
		unsigned char ch = (unsigned char)text[i];
		if (ch == '\n') {
			l++;
			c = 1;
		} else if ((ch & 0xc0) != 0x80) { /* not a UTF-8 continuation byte */
			c++;
		}
	}
	*line = l;
	*col = c;
}

long json_string_start(const char *text, size_t len, size_t end)
{
	if (end < 2 || end > len || text[end - 1] != '"')
		return -1;
	for (size_t i = end - 1; i-- > 0;) {
		if (text[i] != '"')
			continue;
		size_t backslashes = 0;
		while (backslashes < i && text[i - 1 - backslashes] == '\\')
			backslashes++;
		if (backslashes % 2 == 0)
			return (long)i;
	}
	return -1;
}
