/* Canaries: the probe set, mixing probes into a batch, and taking them out
 * again (see src/exec/canary.h). Plain data in, plain data out: the runs
 * are src/exec/canary_run.c's. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "canary.h"
#include "lib/fs_util.h"

/* splitmix64: small, fast and well mixed; its seed is what must be secret. */
uint64_t canary_rand(struct canary_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int canary_rng_seed(struct canary_rng *r)
{
	if (getrandom(&r->s, sizeof(r->s), 0) != sizeof(r->s))
		return -errno;
	return 0;
}

/* A uniform index below n (n > 0). */
static size_t below(struct canary_rng *r, size_t n)
{
	return (size_t)(canary_rand(r) % n);
}

/* A chance of p (0..1). */
static bool chance(struct canary_rng *r, double p)
{
	return (double)(canary_rand(r) >> 11) * (1.0 / 9007199254740992.0) < p;
}

static int set_error(char *err, size_t len, const char *name, const char *fmt, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, what);
	snprintf(err, len, "%s: %s", name, msg);
	return -EINVAL;
}

static int parse_probe(json_t *p, size_t i, const char *name, struct canary_probe *out, char *err,
		       size_t err_len)
{
	json_t *item = json_object_get(p, "item"), *min = json_object_get(p, "min"),
	       *max = json_object_get(p, "max"), *pname = json_object_get(p, "name");
	char where[32];

	snprintf(where, sizeof(where), "probes[%zu]", i);
	if (!json_is_object(p))
		return set_error(err, err_len, name, "%s: expected an object", where);
	if (!json_is_object(item) || !json_is_string(json_object_get(item, "prompt")) ||
	    !json_is_string(json_object_get(item, "completion")))
		return set_error(err, err_len, name,
				 "%s.item: expected a batch item {\"prompt\": ..., \"completion\": "
				 "...}",
				 where);
	if (!json_is_number(min) || !json_is_number(max) ||
	    json_number_value(min) > json_number_value(max))
		return set_error(
			err, err_len, name,
			"%s: expected numbers \"min\" <= \"max\" (the accepted score range)",
			where);
	if (pname && (!json_is_string(pname) || json_string_length(pname) >= CANARY_NAME_MAX))
		return set_error(err, err_len, name,
				 "%s.name: expected a string of at most 63 bytes", where);
	snprintf(out->name, sizeof(out->name), "%s", pname ? json_string_value(pname) : where);
	out->item = json_incref(item);
	out->min = json_number_value(min);
	out->max = json_number_value(max);
	return 0;
}

int canary_set_parse(const char *text, size_t len, const char *name, struct canary_set *set,
		     char *err, size_t err_len)
{
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je), *probes;
	int ret = 0;

	memset(set, 0, sizeof(*set));
	if (!doc) {
		snprintf(err, err_len, "%s:%d:%d: invalid JSON: %s", name, je.line, je.column,
			 je.text);
		return -EINVAL;
	}
	probes = json_object_get(doc, "probes");
	if (!json_is_array(probes) || !json_array_size(probes) ||
	    json_array_size(probes) > CANARY_PROBES_MAX) {
		ret = set_error(err, err_len, name,
				"expected {\"probes\": [...]} with 1 to 4096 probes%s", "");
		goto out;
	}
	set->probes = calloc(json_array_size(probes), sizeof(*set->probes));
	if (!set->probes) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < json_array_size(probes) && !ret; i++) {
		ret = parse_probe(json_array_get(probes, i), i, name, &set->probes[i], err,
				  err_len);
		if (!ret)
			set->n++;
	}
out:
	json_decref(doc);
	if (ret)
		canary_set_free(set);
	return ret;
}

int canary_set_load(const char *path, struct canary_set *set, char *err, size_t err_len)
{
	char *text = NULL;
	size_t len = 0;
	int ret = fs_read_all(path, CANARY_FILE_MAX, &text, &len);

	memset(set, 0, sizeof(*set));
	if (ret) {
		snprintf(err, err_len, "%s: cannot read: %s", path, strerror(-ret));
		return ret == -ENOMEM ? ret : -EINVAL;
	}
	ret = canary_set_parse(text, len, path, set, err, err_len);
	free(text);
	return ret;
}

void canary_set_free(struct canary_set *set)
{
	for (size_t i = 0; set->probes && i < set->n; i++)
		json_decref(set->probes[i].item);
	free(set->probes);
	memset(set, 0, sizeof(*set));
}

/* A random character of c's class (digit, hex digit in a hex id, lower or
 * upper case letter); anything else stays. */
static char same_class(char c, bool hex, struct canary_rng *r)
{
	if (c >= '0' && c <= '9')
		return (char)('0' + below(r, 10));
	if (hex && c >= 'a' && c <= 'f')
		return "abcdef"[below(r, 6)];
	if (c >= 'a' && c <= 'z')
		return (char)('a' + below(r, 26));
	if (c >= 'A' && c <= 'Z')
		return (char)('A' + below(r, 26));
	return c;
}

/* The ids in use: the batch's items' and the probes' made so far. */
struct ids_taken {
	const json_t *items;
	json_t *const *probes;
	size_t n_probes;
};

static bool id_taken(const struct ids_taken *t, const json_t *id)
{
	for (size_t i = 0; i < json_array_size(t->items); i++)
		if (json_equal(json_object_get(json_array_get(t->items, i), "id"), (json_t *)id))
			return true;
	for (size_t i = 0; i < t->n_probes; i++)
		if (json_equal(json_object_get(t->probes[i], "id"), (json_t *)id))
			return true;
	return false;
}

/* Whether the batch's ids of length n differ from l at position k. */
static bool position_varies(const char *l, size_t n, size_t k, const json_t *items)
{
	for (size_t i = 0; i < json_array_size(items); i++) {
		const json_t *id = json_object_get(json_array_get(items, i), "id");

		if (json_is_string(id) && json_string_length(id) == n &&
		    json_string_value(id)[k] != l[k])
			return true;
	}
	return false;
}

/* s (n + 1 bytes) := l with characters drawn anew by class: at level 0
 * those that vary among the batch's ids (a shared prefix stays), at 1 every
 * digit too (a lone id, or every id of the form taken), at 2 all. */
static void vary_string(const char *l, size_t n, const json_t *items, int level,
			struct canary_rng *r, char *s)
{
	bool hex = strspn(l, "0123456789abcdef-") == n;

	for (size_t k = 0; k <= n; k++) {
		bool varies = k < n && (level >= 2 || (level >= 1 && l[k] >= '0' && l[k] <= '9') ||
					position_varies(l, n, k, items));

		s[k] = varies ? same_class(l[k], hex, r) : l[k];
	}
}

/* An id in the form of `like`, a random sibling's, and none of the batch's:
 * a string of its length whose characters vary, by class, only where the
 * batch's ids of that length differ from each other (a shared prefix such
 * as "q-" stays), or an integer within the batch's range. NULL for any
 * other kind of id, or when no unused one is found. */
static json_t *id_like(const json_t *like, const struct ids_taken *taken, struct canary_rng *r)
{
	const json_t *items = taken->items;
	size_t n = json_is_string(like) ? json_string_length(like) : 0;
	const char *l = json_string_value(like);
	json_int_t lo = 0, hi = 0;
	char *s = NULL;
	json_t *out = NULL;

	if (json_is_string(like) && !(s = malloc(n + 1)))
		return NULL;
	for (size_t i = 0; i < json_array_size(items); i++) {
		const json_t *id = json_object_get(json_array_get(items, i), "id");
		json_int_t x = json_is_integer(id) ? json_integer_value(id) : 0;

		lo = i == 0 || x < lo ? x : lo;
		hi = i == 0 || x > hi ? x : hi;
	}
	for (int tries = 0; tries < 24 && (json_is_integer(like) || s); tries++) {
		json_decref(out);
		if (json_is_integer(like)) {
			out = json_integer(lo + (json_int_t)below(r, (size_t)(hi - lo) + 1));
		} else {
			vary_string(l, n, items, tries / 8, r, s);
			out = json_stringn(s, n);
		}
		if (!out || !id_taken(taken, out))
			break;
	}
	free(s);
	if (out && id_taken(taken, out)) {
		json_decref(out);
		out = NULL;
	}
	return out;
}

/* The probe in the items' shape: their keys, in their order, "id" made up.
 * NULL when its keys differ from the items'. */
static json_t *shaped(const json_t *probe, const struct ids_taken *taken, struct canary_rng *r)
{
	const json_t *items = taken->items;
	const json_t *first = json_array_get(items, 0), *v;
	json_t *out = json_object();
	const char *key;
	size_t extra = json_object_get(probe, "id") ? 1 : 0;

	if (!out || json_object_size(probe) - extra !=
			    json_object_size(first) - (json_object_get(first, "id") ? 1 : 0))
		goto fail;
	json_object_foreach((json_t *)first, key, v)
	{
		const json_t *sibling = json_array_get(items, below(r, json_array_size(items)));
		json_t *mine = !strcmp(key, "id")
				       ? id_like(json_object_get(sibling, "id"), taken, r)
				       : json_incref(json_object_get(probe, key));

		if (!mine || json_object_set_new(out, key, mine))
			goto fail;
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

/* Fisher-Yates over the first n entries of `a`. */
static void shuffle(long *a, size_t n, struct canary_rng *r)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = below(r, i);
		long t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* Which probes go in: per_batch of them, distinct while the set lasts.
 * Drawn from a shuffled deck of the set's indices (dealt again only when
 * a batch wants more probes than the set has), not by redrawing on a
 * repeat: a bounded redraw gives up now and then, and a batch that leaves
 * out the one probe a hack would fail lets that hack through. */
static void choose_probes(const struct canary_set *set, const struct sg_canary *cfg,
			  const json_t *items, struct canary_rng *r, struct canary_mix *m,
			  json_t **shaped_items)
{
	size_t want = cfg->per_batch < 64 ? cfg->per_batch : 64;
	size_t *deck = calloc(set->n, sizeof(*deck));
	size_t dealt = set->n;

	if (!deck) {
		snprintf(m->note, sizeof(m->note), "out of memory: batch sent without probes");
		return;
	}
	for (size_t k = 0; k < want; k++) {
		if (dealt == set->n) {
			for (size_t i = 0; i < set->n; i++)
				deck[i] = i;
			dealt = 0;
		}
		/* one Fisher-Yates step: a uniform pick among the undealt */
		size_t j = dealt + below(r, set->n - dealt), t = deck[j];

		deck[j] = deck[dealt];
		deck[dealt] = t;
		const struct canary_probe *p = &set->probes[deck[dealt++]];
		struct ids_taken taken = { items, shaped_items, m->n_probes };

		shaped_items[m->n_probes] = shaped(p->item, &taken, r);
		if (!shaped_items[m->n_probes]) {
			snprintf(m->note, sizeof(m->note),
				 "probe %s is not shaped as this batch's items: batch sent without "
				 "probes",
				 p->name);
			for (size_t i = 0; i < m->n_probes; i++) {
				json_decref(shaped_items[i]);
				shaped_items[i] = NULL;
			}
			m->n_probes = 0;
			break;
		}
		m->probes[m->n_probes] = *p;
		m->probes[m->n_probes++].item = NULL; /* the set's, freed before the run */
	}
	free(deck);
}

static int serialise(json_t *doc, struct canary_mix *m)
{
	m->json = json_dumps(doc, JSON_COMPACT);
	if (!m->json)
		return -ENOMEM;
	m->json_len = strlen(m->json);
	return 0;
}

int canary_mix_build(const char *text, size_t len, const struct canary_set *set,
		     const struct sg_canary *cfg, struct canary_rng *rng, struct canary_mix *m)
{
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL), *items, *mixed = NULL;
	json_t *shaped_items[64] = { 0 };
	int ret = -ENOMEM;

	memset(m, 0, sizeof(*m));
	items = json_object_get(doc, "items");
	if (!json_is_array(items) || !json_array_size(items)) {
		json_decref(doc);
		return -EINVAL;
	}
	m->n_trainer = json_array_size(items);
	if (set && set->n && chance(rng, cfg->rate))
		choose_probes(set, cfg, items, rng, m, shaped_items);
	m->n_total = m->n_trainer + m->n_probes;
	m->origin = calloc(m->n_total, sizeof(*m->origin));
	mixed = json_array();
	if (!m->origin || !mixed)
		goto out;
	for (size_t i = 0; i < m->n_total; i++)
		m->origin[i] = i < m->n_trainer ? (long)i : -1 - (long)(i - m->n_trainer);
	/* Probes at uniformly random positions; the trainer's items keep
	 * their relative order (the shuffle places the probes, then the
	 * trainer's indices are laid back in ascending order). */
	shuffle(m->origin, m->n_total, rng);
	for (size_t i = 0, t = 0; i < m->n_total; i++) {
		if (m->origin[i] >= 0)
			m->origin[i] = (long)t++;
		json_t *it = m->origin[i] >= 0 ? json_incref(json_array_get(items, m->origin[i]))
					       : json_incref(shaped_items[-1 - m->origin[i]]);
		if (json_array_append_new(mixed, it))
			goto out;
	}
	if (json_object_set(doc, "items", mixed) || (ret = serialise(doc, m)))
		goto out;
	m->items = json_incref(mixed);
	ret = 0;
out:
	for (size_t j = 0; j < 64; j++)
		json_decref(shaped_items[j]);
	json_decref(mixed);
	json_decref(doc);
	if (ret)
		canary_mix_free(m);
	return ret;
}

void canary_mix_free(struct canary_mix *m)
{
	free(m->json);
	free(m->origin);
	json_decref(m->items);
	memset(m, 0, sizeof(*m));
}

static void note(struct canary_report *rep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct canary_report *rep, const char *fmt, ...)
{
	size_t used = strlen(rep->detail);
	va_list ap;

	if (used + 3 >= sizeof(rep->detail))
		return;
	if (used)
		used += (size_t)snprintf(rep->detail + used, sizeof(rep->detail) - used, "; ");
	va_start(ap, fmt);
	vsnprintf(rep->detail + used, sizeof(rep->detail) - used, fmt, ap);
	va_end(ap);
}

int canary_strip(const struct canary_mix *m, const double *scores, double **trainer,
		 struct canary_report *rep)
{
	double *out = malloc((m->n_trainer ? m->n_trainer : 1) * sizeof(*out));

	if (!out)
		return -ENOMEM;
	rep->probes = (uint32_t)m->n_probes;
	for (size_t i = 0; i < m->n_total; i++) {
		const struct canary_probe *p;

		if (m->origin[i] >= 0) {
			out[m->origin[i]] = scores[i];
			continue;
		}
		p = &m->probes[-1 - m->origin[i]];
		if (scores[i] >= p->min && scores[i] <= p->max)
			continue;
		if (!rep->failed++)
			note(rep, "probe %s scored %.6g, outside its accepted range %g..%g",
			     p->name, scores[i], p->min, p->max);
	}
	if (rep->failed > 1)
		note(rep, "%u of %u probes out of range", rep->failed, rep->probes);
	if (m->note[0])
		note(rep, "%s", m->note);
	*trainer = out;
	return 0;
}

int canary_rescore_doc(const struct canary_mix *m, struct canary_rng *rng, size_t item, char **json,
		       size_t *json_len, size_t *pos)
{
	long *order = malloc(m->n_total * sizeof(*order));
	json_t *doc = json_loadb(m->json, m->json_len, 0, NULL), *items = json_array();
	int ret = -ENOMEM;

	if (!order || !doc || !items)
		goto out;
	for (size_t i = 0; i < m->n_total; i++)
		order[i] = (long)i;
	shuffle(order, m->n_total, rng);
	for (size_t i = 0; i < m->n_total; i++) {
		if (m->origin[order[i]] == (long)item)
			*pos = i;
		if (json_array_append(items, json_array_get(m->items, (size_t)order[i])))
			goto out;
	}
	if (json_object_set(doc, "items", items) || !(*json = json_dumps(doc, JSON_COMPACT)))
		goto out;
	*json_len = strlen(*json);
	ret = 0;
out:
	free(order);
	json_decref(items);
	json_decref(doc);
	return ret;
}

void canary_rescore_judge(double first, double second, size_t item, double tolerance,
			  const char *sandbox, struct canary_report *rep)
{
	double d = first > second ? first - second : second - first;

	if (d > tolerance || d != d) {
		rep->nondeterministic = true;
		note(rep,
		     "non-determinism: item %zu scored %.6g, and %.6g when re-scored in sandbox %s "
		     "(tolerance %g)",
		     item, first, second, sandbox, tolerance);
	}
}
