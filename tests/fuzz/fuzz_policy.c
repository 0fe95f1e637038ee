/* libFuzzer target for the policy parser (src/policy/policy_parse.c and
 * its tables in src/policy/policy_schema.c, with src/policy/policy.c,
 * src/lib/json_locate.c and src/policy/match.c). Policies are written
 * by people and read by the agent on every node, so every byte string must
 * either become a policy that keeps every promise in docs/policy.md or be
 * refused with a clean, one-line, positioned error.
 *
 * The input is the policy text, not NUL-terminated (ASan sees any read past
 * it). It is parsed under three names. Properties:
 *  - "fuzz" (no tenant from the file name):
 *    - refused: -EINVAL, the output all zero (no policy: it is parsed in
 *      place) or, refused before the text was looked at, untouched; a
 *      non-empty message without control bytes (it is printed as one line
 *      to a terminal), a line and column inside the text;
 *    - accepted: every field in its documented range, every path
 *      normalized, every glob valid, every action allowed for its rule; the
 *      policy written back out as JSON parses to the same policy; each
 *      egress rule allows its own network and egress_allowed() agrees with
 *      a bit-by-bit reference; glob_match() agrees with glibc's
 *      fnmatch(FNM_PATHNAME) on ASCII, and a match never changes the
 *      number of path components.
 *  - "acme.json": accepted exactly when "fuzz" was and the tenant key is
 *    absent or "acme"; then the same policy with tenant "acme".
 *  - "Not A Tenant.json": never accepted (the name is no tenant's).
 *  - A NUL byte anywhere: refused (jansson skips some NUL bytes, so the
 *    parser refuses them before jansson sees the text).
 *  - Whenever jansson reads text without a NUL byte (all json_locate() is
 *    ever given), json_locate() finds every value (and every key) of the
 *    tree at a byte that starts a value of that type.
 *
 * Build and run (scripts/fuzz.sh does the same, bounded):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE \
 *     -Iinclude -Isrc tests/fuzz/fuzz_policy.c src/policy/policy.c src/policy/policy_parse.c \
 *     src/policy/policy_schema.c \
 *     src/lib/json_locate.c src/policy/match.c src/policy/default_policy.S -ljansson -lm \
 *     -o build-fuzz/fuzz_policy
 *   build-fuzz/fuzz_policy -max_total_time=60 tests/fuzz/corpus/policy
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "lib/json_locate.h"
#include "policy/match.h"
#include "policy/policy.h"

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz_policy: check failed: %s (line %d)\n", #cond, \
				__LINE__);                                                  \
			abort();                                                            \
		}                                                                           \
	} while (0)

/* Bounds on the extra work per input, so that the fuzzer keeps its speed:
 * json_locate() is linear in the text, glob_match() in pattern * path. */
#define LOCATE_MAX_NODES 128
#define LOCATE_MAX_DEPTH 16
#define GLOBS_CHECKED    8
#define SUBJECTS_CHECKED 24

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

static void check_refusal(const struct sg_policy_error *e, const char *name, const char *text,
			  size_t len)
{
	int lines = 1;
	char line[2048];

	CHECK(terminated(e->file, sizeof(e->file)) && !strcmp(e->file, name));
	CHECK(terminated(e->msg, sizeof(e->msg)) && e->msg[0] != '\0');
	for (const char *p = e->msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			fprintf(stderr, "fuzz_policy: control byte 0x%02x in message: %s\n",
				(unsigned char)*p, e->msg);
			CHECK(!"a control byte in the error message");
		}
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	CHECK(e->line >= 1 && e->line <= lines && e->col >= 1);
	policy_error_format(e, line, sizeof(line));
	CHECK(!strchr(line, '\n'));
}

static bool plain_path(const char *path)
{
	const char *why;

	return terminated(path, SG_POLICY_PATHLEN) && path_normalized(path, &why) &&
	       strcmp(path, "/") && !strpbrk(path, "*?[");
}

/* IPv4 rules are stored as ::ffff:a.b.c.d/(96 + n). */
static bool v4_mapped(const uint8_t a[16])
{
	static const uint8_t head[12] = { [10] = 0xff, [11] = 0xff };
	return !memcmp(a, head, sizeof(head));
}

static bool bit_set(const uint8_t a[16], unsigned bit)
{
	return a[bit / 8] & (0x80 >> (bit % 8));
}

static void check_egress_rule(const struct sg_egress_allow *e)
{
	CHECK(e->family == AF_INET || e->family == AF_INET6);
	CHECK(e->prefix <= 128);
	if (e->family == AF_INET)
		CHECK(v4_mapped(e->addr) && e->prefix >= 96);
	for (unsigned bit = e->prefix; bit < 128; bit++)
		CHECK(!bit_set(e->addr, bit));
	CHECK(e->proto == 0 || e->proto == IPPROTO_TCP || e->proto == IPPROTO_UDP);
}

/* Every field as docs/policy.md says it can be. */
static void check_policy(const struct sg_policy *p, const char *name)
{
	const struct sg_limits *l = &p->limits;
	const struct sg_health *h = &p->health;
	const char *why;

	CHECK(terminated(p->tenant, sizeof(p->tenant)) && tenant_name_valid(p->tenant));
	CHECK(terminated(p->source, sizeof(p->source)) && !strcmp(p->source, name));
	CHECK(l->timeout_ms >= 1 && l->timeout_ms <= 3600000);
	CHECK(l->memory_mb >= 16 && l->memory_mb <= 1048576);
	CHECK(l->max_tasks >= 1 && l->max_tasks <= 65536);
	CHECK(l->max_forks >= 1 && l->max_forks <= 10000000);
	CHECK(l->cpu >= 0.01 && l->cpu <= 1024);
	CHECK(l->concurrency >= 1 && l->concurrency <= 4096);
	CHECK(l->on_excess == SG_EXCESS_WAIT || l->on_excess == SG_EXCESS_REFUSE);
	CHECK(l->queue_timeout_ms <= 3600000);
	CHECK(l->output_bytes >= 1 && l->output_bytes <= 1073741824);
	CHECK(l->open_files >= 16 && l->open_files <= 1048576);
	CHECK(l->file_size_mb >= 1 && l->file_size_mb <= 1048576);
	CHECK(l->io_read_mbps <= 1048576 && l->io_write_mbps <= 1048576);
	CHECK(l->io_read_iops <= 10000000 && l->io_write_iops <= 10000000);
	CHECK(p->max_connections >= 1 && p->max_connections <= 4096);
	CHECK(p->scratch_mb >= 1 && p->scratch_mb <= 1048576);
	CHECK(p->scratch_inodes >= 64 && p->scratch_inodes <= 16777216);
	CHECK(p->n_egress >= 0 && p->n_egress <= SG_POLICY_EGRESS);
	for (int i = 0; i < p->n_egress; i++)
		check_egress_rule(&p->egress[i]);
	CHECK(terminated(p->scratch_root, SG_POLICY_PATHLEN) &&
	      path_normalized(p->scratch_root, &why) && strcmp(p->scratch_root, "/"));
	CHECK(p->n_read_only >= 0 && p->n_read_only <= SG_POLICY_PATHS);
	for (int i = 0; i < p->n_read_only; i++)
		CHECK(plain_path(p->read_only[i]));
	CHECK(p->n_exec_allow >= 0 && p->n_exec_allow <= SG_POLICY_GLOBS);
	for (int i = 0; i < p->n_exec_allow; i++)
		CHECK(terminated(p->exec_allow[i], SG_POLICY_PATHLEN) &&
		      glob_valid(p->exec_allow[i], &why));
	for (int r = 0; r < SG_RULE__COUNT; r++)
		CHECK(p->action[r] >= SG_POLICY_DENY && p->action[r] <= SG_POLICY_LOG);
	CHECK(p->action[SG_RULE_FORK] != SG_POLICY_DENY);
	CHECK(p->action[SG_RULE_MEMORY] == SG_POLICY_KILL);
	CHECK(p->failure >= SG_FAILURE_RETRY && p->failure <= SG_FAILURE_PAUSE);
	CHECK(p->max_retries <= 100);
	CHECK(h->window >= 1 && h->window <= 100000);
	CHECK(h->constant_rate >= 0 && h->constant_rate <= 1);
	CHECK(h->invalid_rate >= 0 && h->invalid_rate <= 1);
	CHECK(h->dead_windows >= 1 && h->dead_windows <= 10000);
	CHECK(h->dead_epsilon >= 0 && h->dead_epsilon <= 1);
	CHECK(h->band_window <= 10000 && h->band_k >= 0 && h->band_k <= 1000);
	CHECK(h->band_min_iqr >= 0 && h->band_min_iqr <= 1e12);
	CHECK(p->canary.rate >= 0 && p->canary.rate <= 1);
	CHECK(p->canary.per_batch >= 1 && p->canary.per_batch <= 64);
	CHECK(p->canary.determinism_rate >= 0 && p->canary.determinism_rate <= 1);
	CHECK(terminated(p->canary.probes, SG_POLICY_PATHLEN) &&
	      (!p->canary.probes[0] || plain_path(p->canary.probes)));
}

static bool same_policy(const struct sg_policy *a, const struct sg_policy *b, bool same_tenant)
{
	const struct sg_limits *x = &a->limits, *y = &b->limits;
	bool same = (!same_tenant || !strcmp(a->tenant, b->tenant)) && a->enabled == b->enabled &&
		    a->require_agent == b->require_agent && x->timeout_ms == y->timeout_ms &&
		    x->memory_mb == y->memory_mb && x->max_tasks == y->max_tasks &&
		    x->max_forks == y->max_forks && x->cpu == y->cpu &&
		    x->concurrency == y->concurrency && x->on_excess == y->on_excess &&
		    x->queue_timeout_ms == y->queue_timeout_ms &&
		    x->output_bytes == y->output_bytes && x->open_files == y->open_files &&
		    x->file_size_mb == y->file_size_mb && x->io_read_mbps == y->io_read_mbps &&
		    x->io_write_mbps == y->io_write_mbps && x->io_read_iops == y->io_read_iops &&
		    x->io_write_iops == y->io_write_iops && a->n_egress == b->n_egress &&
		    a->allow_unix == b->allow_unix && a->allow_listen == b->allow_listen &&
		    a->max_connections == b->max_connections && a->scratch_mb == b->scratch_mb &&
		    a->scratch_inodes == b->scratch_inodes &&
		    !strcmp(a->scratch_root, b->scratch_root) && a->n_read_only == b->n_read_only &&
		    a->n_exec_allow == b->n_exec_allow &&
		    !memcmp(a->action, b->action, sizeof(a->action)) && a->failure == b->failure &&
		    a->max_retries == b->max_retries && a->health.window == b->health.window &&
		    a->health.constant_rate == b->health.constant_rate &&
		    a->health.invalid_rate == b->health.invalid_rate &&
		    a->health.dead_windows == b->health.dead_windows &&
		    a->health.dead_epsilon == b->health.dead_epsilon;

	for (int i = 0; same && i < a->n_egress; i++) {
		const struct sg_egress_allow *e = &a->egress[i], *f = &b->egress[i];
		same = e->family == f->family && !memcmp(e->addr, f->addr, 16) &&
		       e->prefix == f->prefix && e->proto == f->proto && e->port == f->port;
	}
	for (int i = 0; same && i < a->n_read_only; i++)
		same = !strcmp(a->read_only[i], b->read_only[i]);
	for (int i = 0; same && i < a->n_exec_allow; i++)
		same = !strcmp(a->exec_allow[i], b->exec_allow[i]);
	return same;
}

static json_t *egress_rule_json(const struct sg_egress_allow *e)
{
	static const char *const protos[] = {
		[0] = "any", [IPPROTO_TCP] = "tcp", [IPPROTO_UDP] = "udp"
	};
	char addr[INET6_ADDRSTRLEN], cidr[INET6_ADDRSTRLEN + 8];
	bool v4 = e->family == AF_INET;

	CHECK(inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? e->addr + 12 : e->addr, addr, sizeof(addr)));
	snprintf(cidr, sizeof(cidr), "%s/%d", addr, v4 ? e->prefix - 96 : e->prefix);
	return json_pack("{s:s, s:i, s:s}", "cidr", cidr, "port", e->port, "proto",
			 protos[e->proto]);
}

static json_t *strings_json(const char (*list)[SG_POLICY_PATHLEN], int n)
{
	json_t *a = json_array();

	for (int i = 0; a && i < n; i++)
		CHECK(json_array_append_new(a, json_string(list[i])) == 0);
	return a;
}

/* The policy written out with every field, as someone would write it. */
static json_t *policy_json(const struct sg_policy *p)
{
	const struct sg_limits *l = &p->limits;
	const struct sg_health *h = &p->health;
	json_t *egress = json_array();

	for (int i = 0; egress && i < p->n_egress; i++)
		CHECK(json_array_append_new(egress, egress_rule_json(&p->egress[i])) == 0);
	return json_pack("{s:s, s:b, s:b,"
			 " s:{s:I, s:I, s:I, s:I, s:f, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
			 " s:I},"
			 " s:{s:o, s:b, s:b, s:I}, s:{s:s, s:I, s:I, s:o}, s:{s:o},"
			 " s:{s:s, s:s, s:s, s:s, s:s}, s:{s:s, s:I},"
			 " s:{s:I, s:f, s:f, s:I, s:f}}",
			 "tenant", p->tenant, "enabled", p->enabled, "require_agent",
			 p->require_agent, "limits", "timeout_ms", (json_int_t)l->timeout_ms,
			 "memory_mb", (json_int_t)l->memory_mb, "max_tasks",
			 (json_int_t)l->max_tasks, "max_forks", (json_int_t)l->max_forks, "cpu",
			 l->cpu, "concurrency", (json_int_t)l->concurrency, "on_excess",
			 l->on_excess == SG_EXCESS_WAIT ? "wait" : "refuse", "queue_timeout_ms",
			 (json_int_t)l->queue_timeout_ms, "output_bytes",
			 (json_int_t)l->output_bytes, "open_files", (json_int_t)l->open_files,
			 "file_size_mb", (json_int_t)l->file_size_mb, "io_read_mbps",
			 (json_int_t)l->io_read_mbps, "io_write_mbps", (json_int_t)l->io_write_mbps,
			 "io_read_iops", (json_int_t)l->io_read_iops, "io_write_iops",
			 (json_int_t)l->io_write_iops, "egress", "allow", egress, "allow_unix",
			 p->allow_unix, "allow_listen", p->allow_listen, "max_connections",
			 (json_int_t)p->max_connections, "files", "scratch_root", p->scratch_root,
			 "scratch_mb", (json_int_t)p->scratch_mb, "scratch_inodes",
			 (json_int_t)p->scratch_inodes, "read_only",
			 strings_json(p->read_only, p->n_read_only), "exec", "allow",
			 strings_json(p->exec_allow, p->n_exec_allow), "actions", "egress",
			 policy_action_name(p->action[SG_RULE_EGRESS]), "file",
			 policy_action_name(p->action[SG_RULE_FILE]), "fork",
			 policy_action_name(p->action[SG_RULE_FORK]), "exec",
			 policy_action_name(p->action[SG_RULE_EXEC]), "memory",
			 policy_action_name(p->action[SG_RULE_MEMORY]), "failure", "mode",
			 failure_mode_name(p->failure), "max_retries", (json_int_t)p->max_retries,
			 "health", "window", (json_int_t)h->window, "constant_rate",
			 h->constant_rate, "invalid_rate", h->invalid_rate, "dead_windows",
			 (json_int_t)h->dead_windows, "dead_epsilon", h->dead_epsilon);
}

static void check_round_trip(const struct sg_policy *p)
{
	static struct sg_policy back;
	struct sg_policy_error e;
	json_t *doc = policy_json(p);
	char *text;
	int r;

	CHECK(doc);
	text = json_dumps(doc, JSON_INDENT(2));
	CHECK(text);
	r = policy_parse(text, strlen(text), "fuzz", &back, &e);
	if (r)
		fprintf(stderr, "fuzz_policy: written back, refused: %s:%d:%d: %s\n%s\n", e.file,
			e.line, e.col, e.msg, text);
	CHECK(r == 0);
	CHECK(same_policy(p, &back, true));
	free(text);
	json_decref(doc);
}

/* egress_allowed(), the slow way: one bit at a time. */
static bool reference_allowed(const struct sg_policy *p, const uint8_t a[16], uint16_t port,
			      uint8_t proto)
{
	for (int i = 0; i < p->n_egress; i++) {
		const struct sg_egress_allow *e = &p->egress[i];
		bool in = true;
		for (unsigned bit = 0; in && bit < e->prefix; bit++)
			in = bit_set(e->addr, bit) == bit_set(a, bit);
		if (in && (!e->port || e->port == port) && (!e->proto || e->proto == proto))
			return true;
	}
	return false;
}

static void check_egress(const struct sg_policy *p)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP };

	for (int i = 0; i < p->n_egress; i++) {
		const struct sg_egress_allow *e = &p->egress[i];
		uint16_t port = e->port ? e->port : 443;
		uint8_t a[16];

		CHECK(egress_allowed(p, e->addr, port, e->proto ? e->proto : IPPROTO_TCP));
		/* Probes on either side of the prefix boundary and the last bit. */
		unsigned flips[] = { e->prefix ? e->prefix - 1u : 0,
				     e->prefix < 128 ? e->prefix : 127, 127 };
		for (size_t f = 0; f < sizeof(flips) / sizeof(flips[0]); f++)
			for (size_t t = 0; t < 2; t++)
				for (int dp = 0; dp < 2; dp++) {
					memcpy(a, e->addr, 16);
					a[flips[f] / 8] ^= (uint8_t)(0x80 >> (flips[f] % 8));
					CHECK(egress_allowed(p, a, (uint16_t)(port + dp),
							     protos[t]) ==
					      reference_allowed(p, a, (uint16_t)(port + dp),
								protos[t]));
				}
	}
}

static bool ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return false;
	return true;
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

/* A glob's matches have as many '/' as the glob: nothing but a '/' matches
 * one, and a '/' can be neither escaped nor put in a [...] set. */
static void check_glob(const char *glob, const char *path)
{
	bool ours = glob_match(glob, path);

	if (ours)
		CHECK(count_char(glob, '/') == count_char(path, '/'));
	/* glibc's fnmatch backtracks on each '*'; keep its running time sane. */
	if (ascii(glob) && ascii(path) && count_char(glob, '*') <= 3) {
		bool theirs = fnmatch(glob, path, FNM_PATHNAME) == 0;
		if (ours != theirs)
			fprintf(stderr, "fuzz_policy: glob \"%s\" on \"%s\": ours %d, fnmatch %d\n",
				glob, path, ours, theirs);
		CHECK(ours == theirs);
	}
}

static void check_globs(const struct sg_policy *p)
{
	const char *subjects[SUBJECTS_CHECKED];
	size_t n = 0;

	subjects[n++] = "/usr/bin/python3";
	subjects[n++] = "/usr/bin/python3.11";
	subjects[n++] = p->scratch_root;
	for (int i = 0; i < p->n_exec_allow && n < SUBJECTS_CHECKED; i++)
		subjects[n++] = p->exec_allow[i]; /* a glob read as a path */
	for (int i = 0; i < p->n_read_only && n < SUBJECTS_CHECKED; i++)
		subjects[n++] = p->read_only[i];
	for (int g = 0; g < p->n_exec_allow && g < GLOBS_CHECKED; g++) {
		const char *glob = p->exec_allow[g];
		if (!strpbrk(glob, "*?[\\"))
			CHECK(glob_match(glob, glob));
		for (size_t s = 0; s < n; s++)
			check_glob(glob, subjects[s]);
	}
}

struct walk {
	const char *text;
	size_t len;
	struct json_step path[LOCATE_MAX_DEPTH];
	int nodes;
};

static bool starts_value(const json_t *v, char c)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return c == '{';
	case JSON_ARRAY:
		return c == '[';
	case JSON_STRING:
		return c == '"';
	case JSON_TRUE:
		return c == 't';
	case JSON_FALSE:
		return c == 'f';
	case JSON_NULL:
		return c == 'n';
	case JSON_INTEGER:
	case JSON_REAL:
		return c == '-' || (c >= '0' && c <= '9');
	}
	return false;
}

static void locate_tree(struct walk *w, const json_t *v, int depth)
{
	long at;

	if (++w->nodes > LOCATE_MAX_NODES)
		return;
	at = json_locate(w->text, w->len, w->path, depth, false);
	CHECK(at >= 0 && (size_t)at < w->len && starts_value(v, w->text[at]));
	if (depth > 0 && w->path[depth - 1].key) {
		long key = json_locate(w->text, w->len, w->path, depth, true);
		CHECK(key >= 0 && key < at && w->text[key] == '"');
	}
	if (depth == LOCATE_MAX_DEPTH)
		return;
	if (json_is_object(v)) {
		const char *k;
		json_t *m;
		json_object_foreach((json_t *)v, k, m)
		{
			w->path[depth] = (struct json_step){ .key = k };
			locate_tree(w, m, depth + 1);
		}
	} else if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v); i++) {
			w->path[depth] = (struct json_step){ .index = i };
			locate_tree(w, json_array_get(v, i), depth + 1);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sg_policy got, named, untouched, zero;
	const char *text = (const char *)data;
	struct sg_policy_error e;
	json_error_t je;
	json_t *root;
	int r, r_named;

	memset(&got, 0xa5, sizeof(got));
	memset(&untouched, 0xa5, sizeof(untouched));
	r = policy_parse(text, size, "fuzz", &got, &e);
	CHECK(r == 0 || r == -EINVAL);
	if (r) {
		check_refusal(&e, "fuzz", text, size);
		CHECK(!memcmp(&got, &zero, sizeof(got)) || !memcmp(&got, &untouched, sizeof(got)));
	} else {
		check_policy(&got, "fuzz");
		check_round_trip(&got);
		check_egress(&got);
		check_globs(&got);
	}

	root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &je);
	r_named = policy_parse(text, size, "policies/acme.json", &named, &e);
	if (r_named)
		check_refusal(&e, "policies/acme.json", text, size);
	if (r) {
		CHECK(r_named == -EINVAL);
	} else {
		const char *tenant = json_string_value(json_object_get(root, "tenant"));
		CHECK((r_named == 0) == (!tenant || !strcmp(tenant, "acme")));
		if (r_named == 0)
			CHECK(!strcmp(named.tenant, "acme") && same_policy(&got, &named, false));
	}
	r_named = policy_parse(text, size, "Not A Tenant.json", &named, &e);
	CHECK(r_named == -EINVAL);
	check_refusal(&e, "Not A Tenant.json", text, size);

	if (memchr(text, '\0', size))
		CHECK(r == -EINVAL);
	else if (root) {
		struct walk w = { .text = text, .len = size };
		locate_tree(&w, root, 0);
	}
	json_decref(root);
	return 0;
}
