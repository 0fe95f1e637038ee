/* Matching for policies: exec globs against absolute paths, and egress
 * destinations against {cidr, port, proto} allow rules.
 *
 * Globs are our own small fnmatch(FNM_PATHNAME) so that validation and
 * matching agree on one grammar: '*' (any run of characters but '/'), '?'
 * (one character but '/'), [set] with ranges and '!'/'^' negation (never
 * matching '/'), and '\' escaping the next character. Matching runs in
 * O(pattern * path) on tenant-controlled paths: no exponential backtracking. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include "match.h"

bool path_normalized(const char *path, const char **why)
{
	const char *dummy;

	if (!why)
		why = &dummy;
	if (!path || path[0] != '/') {
		*why = "not an absolute path (it must start with /)";
		return false;
	}
	if (strlen(path) >= SG_POLICY_PATHLEN) {
		*why = "longer than 255 bytes";
		return false;
	}
	if (!strcmp(path, "/"))
		return true;
	for (const char *c = path + 1;;) {
		size_t n = strcspn(c, "/");
		if (n == 0) {
			*why = c[0] ? "contains an empty component (//)"
				    : "ends in / (write the path without it)";
			return false;
		}
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
			*why = "contains a . or .. component (write the normalized path)";
			return false;
		}
		if (!c[n])
			return true;
		c += n + 1;
	}
}

/* One character of a bracket expression, escaped or not. */
static bool bracket_char(const char **q, unsigned char *out, const char **why)
{
	const char *s = *q;

	if (s[0] == '[' && (s[1] == ':' || s[1] == '=' || s[1] == '.')) {
		*why = "[:class:], [=c=] and [.c.] are not supported inside [...]";
		return false;
	}
	if (*s == '\\')
		s++;
	if (*s == '\0' || *s == '/') {
		*why = "unbalanced '[': no ']' before the end of its path component";
		return false;
	}
	*out = (unsigned char)*s;
	*q = s + 1;
	return true;
}

/* Parses the bracket expression at p (its '['). Returns the pattern past
 * its ']', or NULL with *why. *hit tells whether character c is in it. */
static const char *bracket(const char *p, unsigned char c, bool *hit, const char **why)
{
	const char *q = p + 1;
	bool negate = false, in = false, first = true;

	if (*q == '!' || *q == '^') {
		negate = true;
		q++;
	}
	/* A ']' right after the '[' (or '[!') is a member, not the end. */
	while (first || *q != ']') {
		unsigned char lo, hi;
		if (!bracket_char(&q, &lo, why))
			return NULL;
		hi = lo;
		if (q[0] == '-' && q[1] != ']' && q[1] != '\0') {
			q++;
			if (!bracket_char(&q, &hi, why))
				return NULL;
			if (hi < lo) {
				*why = "a range in [...] is reversed (write [a-z], not [z-a])";
				return NULL;
			}
		}
		if (c >= lo && c <= hi)
			in = true;
		first = false;
	}
	*hit = in != negate;
	return q + 1;
}

bool glob_valid(const char *pattern, const char **why)
{
	const char *dummy;
	bool hit;

	if (!why)
		why = &dummy;
	if (!path_normalized(pattern, why))
		return false;
	for (const char *p = pattern; *p;) {
		if (*p == '\\') {
			if (p[1] == '\0' || p[1] == '/') {
				*why = p[1] ? "a '/' cannot be escaped"
					    : "ends in a lone backslash";
				return false;
			}
			p += 2;
		} else if (*p == '[') {
			p = bracket(p, 0, &hit, why);
			if (!p)
				return false;
		} else {
			p++;
		}
	}
	return true;
}

/* If pattern element p matches character c, the pattern past it; else NULL. */
static const char *match_one(const char *p, char c)
{
	const char *why;
	bool hit = false;

	switch (*p) {
	case '\0':
		return NULL;
	case '?':
		return c != '/' ? p + 1 : NULL;
	case '[':
		if (c == '/')
			return NULL;
		p = bracket(p, (unsigned char)c, &hit, &why);
		return p && hit ? p : NULL;
	case '\\':
		p++;
		/* fall through */
	default:
		return *p == c ? p + 1 : NULL;
	}
}

bool glob_match(const char *pattern, const char *path)
{
	const char *p = pattern, *s = path;
	const char *star_p = NULL, *star_s = NULL;

	if (!path || !glob_valid(pattern, NULL))
		return false;
	while (*s) {
		if (*p == '*') {
			while (*p == '*')
				p++;
			star_p = p;
			star_s = s;
			continue;
		}
		const char *next = match_one(p, *s);
		if (next) {
			/* Nothing matches '/' but a '/': an earlier '*' can never
			 * grow past it, so forget it and never rescan the
			 * components already matched. */
			if (*s == '/')
				star_p = NULL;
			p = next;
			s++;
		} else if (star_p && *star_s != '/') {
			p = star_p; /* let the last '*' take one more character */
			s = ++star_s;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

/* Parses "0".."max" with no sign, spaces or leading zeros. */
static bool parse_prefix(const char *d, unsigned max, unsigned *out)
{
	unsigned v = 0;
	size_t n = strlen(d);

	if (n == 0 || n > 3 || (n > 1 && d[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (d[i] < '0' || d[i] > '9')
			return false;
		v = v * 10 + (unsigned)(d[i] - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

int cidr_parse_why(const char *text, struct sg_egress_allow *out, const char **why)
{
	uint8_t addr[16] = { 0 }, a4[4];
	char buf[64];
	const char *dummy, *slash;
	unsigned prefix, max;
	int family;
	size_t alen;

	if (!why)
		why = &dummy;
	if (!text) {
		*why = "missing";
		return -EINVAL;
	}
	slash = strchr(text, '/');
	alen = slash ? (size_t)(slash - text) : strlen(text);
	if (alen == 0 || alen >= sizeof(buf)) {
		*why = "not an IPv4 or IPv6 address";
		return -EINVAL;
	}
	memcpy(buf, text, alen);
	buf[alen] = '\0';
	if (strchr(buf, ':')) {
		family = AF_INET6;
		max = 128;
		if (inet_pton(AF_INET6, buf, addr) != 1) {
			*why = "not an IPv6 address";
			return -EINVAL;
		}
	} else {
		family = AF_INET;
		max = 32;
		if (inet_pton(AF_INET, buf, a4) != 1) {
			*why = "not an IPv4 address (a.b.c.d, each 0..255)";
			return -EINVAL;
		}
		addr[10] = addr[11] = 0xff; /* ::ffff:a.b.c.d */
		memcpy(addr + 12, a4, 4);
	}
	prefix = max; /* a bare address is one host */
	if (slash && !parse_prefix(slash + 1, max, &prefix)) {
		*why = family == AF_INET
			       ? "the prefix length after / must be a whole number in 0..32"
			       : "the prefix length after / must be a whole number in 0..128";
		return -EINVAL;
	}
	if (family == AF_INET)
		prefix += 96;
	for (unsigned bit = prefix; bit < 128; bit++) {
		if (addr[bit / 8] & (0x80 >> (bit % 8))) {
			*why = "host bits are set: write the network's first address (e.g. 10.0.0.0/8, not 10.1.2.3/8)";
			return -EINVAL;
		}
	}
	out->family = family;
	memcpy(out->addr, addr, sizeof(out->addr));
	out->prefix = (uint8_t)prefix;
	return 0;
}

/* Sets family, addr and prefix; port and proto are the caller's. */
int cidr_parse(const char *text, struct sg_egress_allow *out)
{
	return cidr_parse_why(text, out, NULL);
}

static bool prefix_match(const uint8_t net[16], const uint8_t addr[16], unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(net, addr, whole))
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (net[whole] & mask) == (addr[whole] & mask);
}

int egress_match(const struct sg_policy *p, const uint8_t addr16[16], uint16_t port, uint8_t proto)
{
	if (!p || !addr16)
		return -1;
	for (int i = 0; i < p->n_egress && i < SG_POLICY_EGRESS; i++) {
		const struct sg_egress_allow *e = &p->egress[i];
		if ((e->port == 0 || e->port == port) && (e->proto == 0 || e->proto == proto) &&
		    prefix_match(e->addr, addr16, e->prefix > 128 ? 128 : e->prefix))
			return i;
	}
	return -1;
}

bool egress_allowed(const struct sg_policy *p, const uint8_t addr16[16], uint16_t port,
		    uint8_t proto)
{
	return egress_match(p, addr16, port, proto) >= 0;
}
