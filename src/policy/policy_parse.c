/* Parsing and validating one policy document (see docs/policy.md).
 *
 * jansson parses the text; a table of fields, one per schema key, then
 * walks the tree in document order, so the first problem reported is the
 * first one in the file. Errors are placed with json_locate(): unknown
 * and duplicate keys at the key, everything else at the value. The result
 * starts from policy_defaults() and is copied out only when the whole
 * document is valid: a caller never sees half a policy. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/json_locate.h"
#include "match.h"
#include "policy.h"

enum kind {
	K_OBJECT, /* nested fields, same base */
	K_BOOL,
	K_INT,    /* unsigned integer of `size` bytes in min..max */
	K_REAL,   /* double in dmin..dmax; integers are accepted too */
	K_CHOICE, /* string from `choices`, stored as an integer of `size` bytes */
	K_TENANT,
	K_DIR,         /* an absolute normalized path, not "/" */
	K_DIR_LIST,    /* array of K_DIR (read_only) */
	K_GLOB_LIST,   /* array of exec globs */
	K_EGRESS_LIST, /* array of {cidr, port, proto} */
	K_CIDR,
	K_MODULE_LIST, /* array of dotted Python module names (warm.preload) */
};

struct choice {
	const char *name;
	int value;
};

struct field {
	const char *key;
	enum kind kind;
	size_t off, size; /* the member in the struct being filled */
	size_t count_off; /* lists: the int holding the count */
	long long min, max;
	double dmin, dmax;
	const struct choice *choices; /* NULL-name terminated */
	const struct field *fields;   /* K_OBJECT: NULL-key terminated */
	bool required;
};

#define MEMBER(type, m) .off = offsetof(type, m), .size = sizeof(((type *)0)->m)
#define P(m)            MEMBER(struct sg_policy, m)
#define INT(k, m, lo, hi)                                           \
	{                                                           \
		.key = k, .kind = K_INT, P(m), .min = lo, .max = hi \
	}
#define REAL(k, m, lo, hi)                                             \
	{                                                              \
		.key = k, .kind = K_REAL, P(m), .dmin = lo, .dmax = hi \
	}
#define CHOICE(k, m, list)                                        \
	{                                                         \
		.key = k, .kind = K_CHOICE, P(m), .choices = list \
	}
#define OBJECT(k, list)                                    \
	{                                                  \
		.key = k, .kind = K_OBJECT, .fields = list \
	}
#define BOOL(k, m)                             \
	{                                      \
		.key = k, .kind = K_BOOL, P(m) \
	}

static const struct choice excess_modes[] = { { "wait", SG_EXCESS_WAIT },
					      { "refuse", SG_EXCESS_REFUSE },
					      { NULL, 0 } };
static const struct choice failure_modes[] = { { "retry", SG_FAILURE_RETRY },
					       { "skip", SG_FAILURE_SKIP },
					       { "pause", SG_FAILURE_PAUSE },
					       { NULL, 0 } };
static const struct choice protos[] = {
	{ "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "any", 0 }, { NULL, 0 }
};
/* Which actions make sense per rule: a fork past the limit cannot be
 * refused without killing, and memory is enforced by the OOM killer. */
static const struct choice deny_kill_log[] = { { "deny", SG_POLICY_DENY },
					       { "kill", SG_POLICY_KILL },
					       { "log", SG_POLICY_LOG },
					       { NULL, 0 } };
static const struct choice kill_log[] = { { "kill", SG_POLICY_KILL },
					  { "log", SG_POLICY_LOG },
					  { NULL, 0 } };
static const struct choice kill_only[] = { { "kill", SG_POLICY_KILL }, { NULL, 0 } };

static const struct field limits_fields[] = {
	INT("timeout_ms", limits.timeout_ms, 1, 3600000),
	INT("memory_mb", limits.memory_mb, 16, 1048576),
	INT("max_tasks", limits.max_tasks, 1, 65536),
	INT("max_forks", limits.max_forks, 1, 10000000),
	REAL("cpu", limits.cpu, 0.01, 1024),
	INT("concurrency", limits.concurrency, 1, 4096),
	CHOICE("on_excess", limits.on_excess, excess_modes),
	INT("queue_timeout_ms", limits.queue_timeout_ms, 0, 3600000),
	INT("output_bytes", limits.output_bytes, 1, 1073741824),
	INT("open_files", limits.open_files, 16, 1048576),
	INT("file_size_mb", limits.file_size_mb, 1, 1048576),
	INT("io_read_mbps", limits.io_read_mbps, 0, 1048576),
	INT("io_write_mbps", limits.io_write_mbps, 0, 1048576),
	INT("io_read_iops", limits.io_read_iops, 0, 10000000),
	INT("io_write_iops", limits.io_write_iops, 0, 10000000),
	{ .key = NULL },
};

static const struct field egress_entry_fields[] = {
	{ .key = "cidr", .kind = K_CIDR, .required = true },
	{ .key = "port",
	  .kind = K_INT,
	  MEMBER(struct sg_egress_allow, port),
	  .min = 0,
	  .max = 65535 },
	{ .key = "proto",
	  .kind = K_CHOICE,
	  MEMBER(struct sg_egress_allow, proto),
	  .choices = protos },
	{ .key = NULL },
};

static const struct field egress_fields[] = {
	{ .key = "allow",
	  .kind = K_EGRESS_LIST,
	  P(egress),
	  .count_off = offsetof(struct sg_policy, n_egress),
	  .max = SG_POLICY_EGRESS },
	BOOL("allow_unix", allow_unix),
	BOOL("allow_listen", allow_listen),
	INT("max_connections", max_connections, 1, 4096),
	{ .key = NULL },
};

static const struct field files_fields[] = {
	{ .key = "scratch_root", .kind = K_DIR, P(scratch_root) },
	INT("scratch_mb", scratch_mb, 1, 1048576),
	INT("scratch_inodes", scratch_inodes, 64, 16777216),
	{ .key = "read_only",
	  .kind = K_DIR_LIST,
	  P(read_only),
	  .count_off = offsetof(struct sg_policy, n_read_only),
	  .max = SG_POLICY_PATHS },
	{ .key = NULL },
};

static const struct field exec_fields[] = {
	{ .key = "allow",
	  .kind = K_GLOB_LIST,
	  P(exec_allow),
	  .count_off = offsetof(struct sg_policy, n_exec_allow),
	  .max = SG_POLICY_GLOBS },
	{ .key = NULL },
};

static const struct field actions_fields[] = {
	CHOICE("egress", action[SG_RULE_EGRESS], deny_kill_log),
	CHOICE("file", action[SG_RULE_FILE], deny_kill_log),
	CHOICE("fork", action[SG_RULE_FORK], kill_log),
	CHOICE("exec", action[SG_RULE_EXEC], deny_kill_log),
	CHOICE("memory", action[SG_RULE_MEMORY], kill_only),
	{ .key = NULL },
};

static const struct field failure_fields[] = {
	CHOICE("mode", failure, failure_modes),
	INT("max_retries", max_retries, 0, 100),
	{ .key = NULL },
};

static const struct field health_fields[] = {
	INT("window", health.window, 1, 100000),
	REAL("constant_rate", health.constant_rate, 0, 1),
	REAL("invalid_rate", health.invalid_rate, 0, 1),
	INT("dead_windows", health.dead_windows, 1, 10000),
	REAL("dead_epsilon", health.dead_epsilon, 0, 1),
	{ .key = NULL },
};

static const struct choice warm_interpreters[] = { { "none", SG_WARM_OFF },
						   { "python3", SG_WARM_PYTHON3 },
						   { NULL, 0 } };

static const struct field warm_fields[] = {
	CHOICE("interpreter", warm.interpreter, warm_interpreters),
	{ .key = "preload",
	  .kind = K_MODULE_LIST,
	  P(warm.preload),
	  .count_off = offsetof(struct sg_policy, warm.n_preload),
	  .max = SG_WARM_PRELOADS },
	INT("max_calls", warm.max_calls, 1, 1000000),
	INT("max_age_s", warm.max_age_s, 1, 86400),
	INT("max_growth_mb", warm.max_growth_mb, 1, 65536),
	BOOL("verify", warm.verify),
	{ .key = NULL },
};

static const struct field top_fields[] = {
	{ .key = "tenant", .kind = K_TENANT, P(tenant) },
	BOOL("enabled", enabled),
	BOOL("require_agent", require_agent),
	OBJECT("limits", limits_fields),
	OBJECT("egress", egress_fields),
	OBJECT("files", files_fields),
	OBJECT("exec", exec_fields),
	OBJECT("actions", actions_fields),
	OBJECT("failure", failure_fields),
	OBJECT("health", health_fields),
	OBJECT("warm", warm_fields),
	{ .key = NULL },
};

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

/* Arrays: each list replaces the default list, it does not extend it. */
static int walk_list(struct ctx *c, const struct field *f, const json_t *arr, char *base)
{
	size_t n = json_array_size(arr), stride;
	char got[96];
	int r = 0;

	if (!json_is_array(arr))
		return fail(c, false, "expected an array, got %s", describe(arr, got, sizeof(got)));
	stride = f->kind == K_EGRESS_LIST   ? sizeof(struct sg_egress_allow)
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
		else
			r = walk_object(c, v, egress_entry_fields, slot);
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
		return walk_list(c, f, v, base);
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
	r = walk_object(&c, root, top_fields, out);
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
