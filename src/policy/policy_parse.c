/* Parsing and validating one policy document (see docs/policy.md).
 *
 * jansson parses the text; the schema's table of fields, one per key
 * (policy_schema.c), then walks the tree in document order, so the first
 * problem reported is the first one in the file. Errors are placed with
 * json_locate(): unknown and duplicate keys at the key, everything else
 * at the value. The result
 * starts from policy_defaults() and is copied out only when the whole
 * document is valid: a caller never sees half a policy. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/json_locate.h"
#include "match.h"
#include "lib/base64.h"
#include "policy.h"
#include "policy_schema.h"

#define MAX_DEPTH 8

struct ctx {
	const char *text;
	size_t len;
	struct sg_policy_error *err;
	struct json_step path[MAX_DEPTH];
	int depth;
	char stem[SG_POLICY_PATHLEN]; /* "x" of a file named x.json, else "" */
	bool tenant_seen;
};

/* Renders the current path as "egress.allow[2].cidr". */
static void path_render(const struct ctx *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < c->depth && n < len; i++) {
		if (c->path[i].key)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "." : "",
					      c->path[i].key);
		else
			n += (size_t)snprintf(buf + n, len - n, "[%zu]", c->path[i].index);
	}
	/* Keys come from the file: keep control bytes out of the message. */
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static void set_position(struct ctx *c, long off)
{
	if (off < 0)
		off = 0;
	json_line_col(c->text, c->len, (size_t)off, &c->err->line, &c->err->col);
}

/* Records "path: message" at the current path's value (or key). */
__attribute__((format(printf, 3, 4))) static int fail(struct ctx *c, bool at_key, const char *fmt,
						      ...)
{
	char where[160], what[360];
	va_list ap;

	set_position(c, json_locate(c->text, c->len, c->path, c->depth, at_key));
	path_render(c, where, sizeof(where));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(c->err->msg, sizeof(c->err->msg), "%s%s%s", where, where[0] ? ": " : "", what);
	return -EINVAL;
}

/* The shortest decimal form that reads back as the same double. */
static void format_real(double v, char *buf, size_t len)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (!strpbrk(buf, ".eEn"))
		strncat(buf, ".0", len - strlen(buf) - 1);
}

/* A string from the file, quoted for a message: at most 60 bytes, cut on a
 * UTF-8 character boundary, with control bytes shown as '?'. */
static const char *quote(const char *str, char *buf, size_t len)
{
	size_t n = strlen(str), keep = n > 60 ? 60 : n;

	while (keep < n && keep > 0 && ((unsigned char)str[keep] & 0xc0) == 0x80)
		keep--;
	snprintf(buf, len, "\"%.*s%s\"", (int)keep, str, keep < n ? "..." : "");
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return buf;
}

/* What a value is, for "got ...". */
static const char *describe(const json_t *v, char *buf, size_t len)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		return "null";
	case JSON_INTEGER:
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
		return buf;
	case JSON_REAL:
		format_real(json_real_value(v), buf, len);
		return buf;
	case JSON_STRING:
		return quote(json_string_value(v), buf, len);
	}
	return "an unknown value";
}

static void put_uint(void *dst, size_t size, unsigned long long v)
{
	switch (size) {
	case 1:
		*(uint8_t *)dst = (uint8_t)v;
		break;
	case 2:
		*(uint16_t *)dst = (uint16_t)v;
		break;
	case 4:
		*(uint32_t *)dst = (uint32_t)v;
		break;
	case 8:
		*(uint64_t *)dst = (uint64_t)v;
		break;
	}
}

static int walk_object(struct ctx *c, const json_t *obj, const struct field *fields, void *base);

static int want_string(struct ctx *c, const json_t *v, const char *what)
{
	char got[96];

	if (json_is_string(v))
		return 0;
	return fail(c, false, "expected %s, got %s", what, describe(v, got, sizeof(got)));
}

static int check_tenant(struct ctx *c, const json_t *v, char *dst)
{
	const char *name = json_string_value(v);
	char got[96];

	if (want_string(c, v, "a tenant name ([a-z0-9][a-z0-9_-]{0,62})"))
		return -EINVAL;
	if (!tenant_name_valid(name))
		return fail(c, false, "expected a tenant name ([a-z0-9][a-z0-9_-]{0,62}), got %s",
			    describe(v, got, sizeof(got)));
	if (c->stem[0] && !tenant_name_valid(c->stem))
		return fail(c, false,
			    "the file name \"%.100s.json\" is not <tenant>.json "
			    "with tenant [a-z0-9][a-z0-9_-]{0,62}",
			    c->stem);
	if (c->stem[0] && strcmp(name, c->stem))
		return fail(c, false, "expected \"%s\" (the file is %s.json), got %s", c->stem,
			    c->stem, describe(v, got, sizeof(got)));
	snprintf(dst, SG_TENANT_MAX, "%s", name);
	c->tenant_seen = true;
	return 0;
}

static int check_dir(struct ctx *c, const json_t *v, char *dst, bool plain)
{
	const char *path = json_string_value(v), *why;
	char got[96];

	if (want_string(c, v, "an absolute path"))
		return -EINVAL;
	if (!path_normalized(path, &why))
		return fail(c, false, "expected an absolute normalized path, got %s: %s",
			    quote(path, got, sizeof(got)), why);
	if (!strcmp(path, "/"))
		return fail(c, false, "\"/\" would allow every file; name the directories instead");
	if (plain && strpbrk(path, "*?["))
		return fail(c, false,
			    "expected a plain path, got %s: read_only entries are not globs",
			    quote(path, got, sizeof(got)));
	snprintf(dst, SG_POLICY_PATHLEN, "%s", path);
	return 0;
}

static int check_glob(struct ctx *c, const json_t *v, char *dst)
{
	const char *glob = json_string_value(v), *why;
	char got[96];

	if (want_string(c, v, "an absolute path glob"))
		return -EINVAL;
	if (!glob_valid(glob, &why))
		return fail(c, false, "expected an absolute path glob, got %s: %s",
			    quote(glob, got, sizeof(got)), why);
	snprintf(dst, SG_POLICY_PATHLEN, "%s", glob);
	return 0;
}

/* A module name as `import` takes it: identifiers joined by dots. */
static bool module_name_valid(const char *name)
{
	bool start = true; /* at the first byte of an identifier */

	for (const char *p = name; *p; p++) {
		bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
		bool digit = *p >= '0' && *p <= '9';

		if (*p == '.' && !start) {
			start = true;
			continue;
		}
		if (!alpha && (!digit || start))
			return false;
		start = false;
	}
	return !start;
}

static int check_module(struct ctx *c, const json_t *v, char *dst)
{
	const char *name = json_string_value(v);
	char got[96];

	if (want_string(c, v, "a Python module name"))
		return -EINVAL;
	if (!module_name_valid(name) || strlen(name) >= SG_WARM_MODULELEN)
		return fail(c, false,
			    "expected a Python module name such as \"reward\" or \"pkg.mod\" "
			    "(at most %d bytes), got %s",
			    SG_WARM_MODULELEN - 1, describe(v, got, sizeof(got)));
	snprintf(dst, SG_WARM_MODULELEN, "%s", name);
	return 0;
}

static int check_sha256(struct ctx *c, const json_t *v, char *dst)
{
	const char *hex = json_string_value(v);
	char got[96];

	if (want_string(c, v, "a SHA-256 digest (64 lowercase hex digits)"))
		return -EINVAL;
	if (strlen(hex) != SG_SHA256_HEX - 1 || strspn(hex, "0123456789abcdef") != strlen(hex))
		return fail(c, false, "expected a SHA-256 digest (64 lowercase hex digits), got %s",
			    describe(v, got, sizeof(got)));
	snprintf(dst, SG_SHA256_HEX, "%s", hex);
	return 0;
}

/* A minisign public key: the base64 line of its .pub file, 42 bytes
 * ("Ed", an 8-byte key id, the 32-byte Ed25519 key). */
static int check_pubkey(struct ctx *c, const json_t *v, char *dst)
{
	const char *text = json_string_value(v);
	unsigned char *raw = NULL;
	size_t n = 0;
	char got[96], why[96];
	bool ok;

	if (want_string(c, v, "a minisign public key (the base64 line of its .pub file)"))
		return -EINVAL;
	ok = strlen(text) < SG_PUBKEY_LEN &&
	     !base64_decode(text, strlen(text), &raw, &n, why, sizeof(why)) && n == 42 &&
	     raw[0] == 'E' && raw[1] == 'd';
	free(raw);
	if (!ok)
		return fail(c, false,
			    "expected a minisign Ed25519 public key (the base64 line of its .pub "
			    "file, starting \"RW\"), got %s",
			    describe(v, got, sizeof(got)));
	snprintf(dst, SG_PUBKEY_LEN, "%s", text);
	return 0;
}

/* Arrays: each list replaces the default list, it does not extend it. */
static int walk_list(struct ctx *c, const struct field *f, const json_t *arr, char *base)
{
	size_t n = json_array_size(arr), stride;
	char got[96];
	int r = 0;

	if (!json_is_array(arr))
		return fail(c, false, "expected an array, got %s", describe(arr, got, sizeof(got)));
	stride = f->kind == K_EGRESS_LIST   ? sizeof(struct sg_egress_allow)
		 : f->kind == K_PIN_LIST    ? sizeof(struct sg_artifact_pin)
		 : f->kind == K_PUBKEY_LIST ? SG_PUBKEY_LEN
		 : f->kind == K_MODULE_LIST ? SG_WARM_MODULELEN
					    : SG_POLICY_PATHLEN;
	if (n > (size_t)f->max) {
		c->path[c->depth++] = (struct json_step){ .index = (size_t)f->max };
		return fail(c, false, "too many entries: at most %lld, got %zu", f->max, n);
	}
	memset(base + f->off, 0, f->size);
	for (size_t i = 0; i < n && !r; i++) {
		const json_t *v = json_array_get(arr, i);
		char *slot = base + f->off + i * stride;
		c->path[c->depth++] = (struct json_step){ .index = i };
		if (f->kind == K_DIR_LIST)
			r = check_dir(c, v, slot, true);
		else if (f->kind == K_GLOB_LIST)
			r = check_glob(c, v, slot);
		else if (f->kind == K_MODULE_LIST)
			r = check_module(c, v, slot);
		else if (f->kind == K_PIN_LIST)
			r = walk_object(c, v, policy_pin_entry_fields, slot);
		else if (f->kind == K_PUBKEY_LIST)
			r = check_pubkey(c, v, slot);
		else
			r = walk_object(c, v, policy_egress_entry_fields, slot);
		if (!r)
			c->depth--;
	}
	if (!r)
		*(int *)(base + f->count_off) = (int)n;
	return r;
}

static int walk_field(struct ctx *c, const struct field *f, const json_t *v, char *base)
{
	char got[96], list[96];
	const char *why;
	size_t n = 0;

	switch (f->kind) {
	case K_OBJECT:
		return walk_object(c, v, f->fields, base);
	case K_BOOL:
		if (!json_is_boolean(v))
			return fail(c, false, "expected true or false, got %s",
				    describe(v, got, sizeof(got)));
		*(bool *)(base + f->off) = json_is_true(v);
		return 0;
	case K_INT:
		if (!json_is_integer(v) || json_integer_value(v) < f->min ||
		    json_integer_value(v) > f->max)
			return fail(c, false, "expected an integer in %lld..%lld, got %s", f->min,
				    f->max, describe(v, got, sizeof(got)));
		put_uint(base + f->off, f->size, (unsigned long long)json_integer_value(v));
		return 0;
	case K_REAL:
		if (!json_is_number(v) ||
		    !(json_number_value(v) >= f->dmin && json_number_value(v) <= f->dmax))
			return fail(c, false, "expected a number in %.15g..%.15g, got %s", f->dmin,
				    f->dmax, describe(v, got, sizeof(got)));
		*(double *)(base + f->off) = json_number_value(v);
		return 0;
	case K_CHOICE:
		for (const struct choice *ch = f->choices; ch->name; ch++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s\"%s\"", n ? ", " : "",
					      ch->name);
		if (json_is_string(v))
			for (const struct choice *ch = f->choices; ch->name; ch++)
				if (!strcmp(json_string_value(v), ch->name)) {
					put_uint(base + f->off, f->size,
						 (unsigned long long)ch->value);
					return 0;
				}
		return fail(c, false, "expected %s%s, got %s", f->choices[1].name ? "one of " : "",
			    list, describe(v, got, sizeof(got)));
	case K_TENANT:
		return check_tenant(c, v, base + f->off);
	case K_DIR:
		return check_dir(c, v, base + f->off, false);
	case K_DIR_LIST:
	case K_GLOB_LIST:
	case K_EGRESS_LIST:
	case K_MODULE_LIST:
	case K_PIN_LIST:
	case K_PUBKEY_LIST:
		return walk_list(c, f, v, base);
	case K_SHA256:
		return check_sha256(c, v, base + f->off);
	case K_CIDR:
		if (want_string(c, v, "a CIDR such as \"10.0.0.0/8\" or \"fd00::/8\""))
			return -EINVAL;
		if (cidr_parse_why(json_string_value(v), (struct sg_egress_allow *)base, &why))
			return fail(
				c, false,
				"expected a CIDR such as \"10.0.0.0/8\" or \"fd00::/8\", got %s: %s",
				describe(v, got, sizeof(got)), why);
		return 0;
	}
	return fail(c, false, "internal error: unknown field kind");
}

static int walk_object(struct ctx *c, const json_t *obj, const struct field *fields, void *base)
{
	char got[96], keys[320];
	const char *key;
	json_t *v;
	size_t n = 0;

	if (!json_is_object(obj))
		return fail(c, false, "expected an object, got %s",
			    describe(obj, got, sizeof(got)));
	if (c->depth >= MAX_DEPTH - 1)
		return fail(c, false, "nested too deeply");
	json_object_foreach((json_t *)obj, key, v)
	{
		const struct field *f = fields;
		while (f->key && strcmp(f->key, key))
			f++;
		c->path[c->depth++] = (struct json_step){ .key = key };
		if (!f->key) {
			for (f = fields; f->key; f++)
				n += (size_t)snprintf(keys + n, sizeof(keys) - n, "%s%s",
						      n ? ", " : "", f->key);
			return fail(c, true, "unknown key (expected one of: %s)", keys);
		}
		int r = walk_field(c, f, v, base);
		if (r)
			return r;
		c->depth--;
	}
	for (const struct field *f = fields; f->key; f++)
		if (f->required && !json_object_get(obj, f->key))
			return fail(c, false, "missing key \"%s\"", f->key);
	return 0;
}

/* The sandbox's own /dev entries (src/sandbox/sandbox_root.c): not a
 * device of a pool. */
static bool dev_private(const char *d, size_t top)
{
	static const char *const own[] = { "/dev/null",    "/dev/zero",   "/dev/random",
					   "/dev/urandom", "/dev/shm",    "/dev/fd",
					   "/dev/stdin",   "/dev/stdout", "/dev/stderr" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == top && !strncmp(d, own[i], top))
			return true;
	return false;
}

/* inference_devices: only the reward-model tier names devices (a
 * trainer's must never be named: docs/policy.md, "Devices"), each a node
 * under /dev at most one directory deep (the sandbox's /dev is made for
 * them). Checked after the walk: "tier" may come after the list. */
static int check_devices(struct ctx *c, const struct sg_policy *p)
{
	if (!p->n_inference_devices)
		return 0;
	c->path[0] = (struct json_step){ .key = "inference_devices" };
	c->depth = 1;
	if (p->tier != SG_TIER_REWARD_MODEL)
		return fail(c, true,
			    "only a policy with \"tier\": \"reward-model\" may name an inference "
			    "pool's devices (tenant code on a trainer's GPU could read or corrupt "
			    "the training job)");
	for (int i = 0; i < p->n_inference_devices; i++) {
		const char *d = p->inference_devices[i];
		const char *slash = strncmp(d, "/dev/", 5) ? NULL : strchr(d + 5, '/');
		size_t top = slash ? (size_t)(slash - d) : strlen(d);

		c->path[1] = (struct json_step){ .index = (size_t)i };
		c->depth = 2;
		if (strncmp(d, "/dev/", 5) || (slash && strchr(slash + 1, '/')) ||
		    dev_private(d, top))
			return fail(c, false,
				    "expected a device node under /dev, at most one directory "
				    "deep and not the sandbox's own (null, zero, random, urandom, "
				    "shm, fd, stdin, stdout, stderr), such as \"/dev/nvidia3\" or "
				    "\"/dev/dri/renderD129\", got \"%s\"",
				    d);
	}
	c->depth = 0;
	return 0;
}

/* "x" when name is a file named x.json (any directory), else "". */
static void file_stem(const char *name, char *stem, size_t len)
{
	const char *base = strrchr(name, '/');
	size_t n;

	base = base ? base + 1 : name;
	n = strlen(base);
	stem[0] = '\0';
	if (n > 5 && !strcmp(base + n - 5, ".json"))
		snprintf(stem, len, "%.*s", (int)(n - 5), base);
}

/* Both messages below quote bytes of the file (the duplicate key as
 * written; jansson's "near '...'"): keep control bytes out of them, as
 * path_render() and quote() do, so an error stays one harmless line. */
static void strip_controls(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static int syntax_error(struct ctx *c, const json_error_t *je)
{
	static const char dup[] = "duplicate object key";
	long key;

	/* jansson places a duplicate key just past it: point at its start. */
	if (!strncmp(je->text, dup, sizeof(dup) - 1) && je->position > 0 &&
	    (key = json_string_start(c->text, c->len, (size_t)je->position)) >= 0) {
		set_position(c, key);
		snprintf(c->err->msg, sizeof(c->err->msg),
			 "duplicate key %.*s: each key may appear once per object",
			 (int)((size_t)je->position - (size_t)key > 80
				       ? 80
				       : (size_t)je->position - (size_t)key),
			 c->text + key);
		strip_controls(c->err->msg);
		return -EINVAL;
	}
	c->err->line = je->line > 0 ? je->line : 1;
	c->err->col = je->column > 0 ? je->column : 1;
	snprintf(c->err->msg, sizeof(c->err->msg), "invalid JSON: %s", je->text);
	strip_controls(c->err->msg);
	return -EINVAL;
}

/* A policy that failed to parse: all zero, which enables nothing (enabled
 * false, no paths, no egress, no limits a sandbox could be made with), so
 * that a caller that ignored the error could not use half of one. */
static int refuse(struct sg_policy *out, int err)
{
	memset(out, 0, sizeof(*out));
	return err;
}

int policy_parse(const char *text, size_t len, const char *name, struct sg_policy *out,
		 struct sg_policy_error *err)
{
	struct sg_policy_error scratch_err;
	struct ctx c = { .text = text, .len = len };
	json_error_t je;
	json_t *root;
	int r;

	if (!err)
		err = &scratch_err;
	if (!name)
		name = "<policy>";
	memset(err, 0, sizeof(*err));
	snprintf(err->file, sizeof(err->file), "%s", name);
	c.err = err;
	if (!text || !out) {
		snprintf(err->msg, sizeof(err->msg), "no policy text");
		return -EINVAL;
	}
	file_stem(name, c.stem, sizeof(c.stem));

	/* jansson skips a NUL byte after some tokens and reports it as the end
	 * of the file after others: a policy is text, so refuse one outright. */
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		set_position(&c, nul - text);
		snprintf(err->msg, sizeof(err->msg),
			 "invalid JSON: a NUL byte (a policy is UTF-8 text)");
		return refuse(out, -EINVAL);
	}

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return refuse(out, syntax_error(&c, &je));
	/* Straight into the caller's struct: a policy is 35 KiB, 9 pages, and
	 * each copy through a struct of our own faulted them in twice more
	 * (tens of microseconds a fault on a cold `sandguard exec`). A
	 * failure clears it again (refuse()): never half a policy. */
	policy_defaults(out);
	snprintf(out->source, sizeof(out->source), "%s", name);
	r = walk_object(&c, root, policy_top_fields, out);
	r = r ?: check_devices(&c, out);
	json_decref(root);
	if (r)
		return refuse(out, r);

	/* A file named x.json without a tenant key is tenant x's policy. */
	if (c.stem[0] && !c.tenant_seen) {
		if (!tenant_name_valid(c.stem))
			return refuse(out,
				      fail(&c, false,
					   "no \"tenant\" key, and the file name \"%.100s.json\" "
					   "is not <tenant>.json with tenant "
					   "[a-z0-9][a-z0-9_-]{0,62}",
					   c.stem));
		snprintf(out->tenant, sizeof(out->tenant), "%s", c.stem);
	}
	return 0;
}
