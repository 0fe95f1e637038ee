/* Prometheus registry and text exposition encoder. See src/telemetry/metrics.h. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/log.h"
#include "metrics.h"
#include "lib/utf8.h"

struct metrics_series {
	char **values; /* n_labels copies */
	uint64_t hash;
	double value;      /* counter, gauge */
	uint64_t *buckets; /* histogram: n_bounds + 1 per-bucket counts */
	double sum;
	uint64_t count;
};

struct metrics_family {
	struct metrics_registry *reg;
	enum metrics_type type;
	char *name;
	char *help;
	char *labels[METRICS_MAX_LABELS];
	size_t n_labels;
	double bounds[METRICS_MAX_BUCKETS];
	size_t n_bounds;
	struct metrics_series *series;
	size_t n_series, cap, max_series;
	uint64_t refused;
};

struct metrics_registry {
	pthread_mutex_t lock;
	struct metrics_family **families;
	size_t n_families, cap;
	metrics_collect_fn collect;
	void *collect_ctx;
};

/* ---- validation ---- */

static bool name_valid(const char *s, bool colon_ok)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++) {
		char c = *s;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || (colon_ok && c == ':')))
			return false;
	}
	return true;
}

/* Prometheus reads label values and HELP as UTF-8 and rejects anything
 * else: lib/utf8.h's utf8_valid() checks exactly that. */

static int spec_check(enum metrics_type type, const struct metrics_spec *s, size_t *n_labels)
{
	const char *name = s->name ? s->name : "(null)";
	size_t n = 0, len;

	if (type != METRICS_COUNTER && type != METRICS_GAUGE && type != METRICS_HISTOGRAM) {
		sg_error("metrics: %s: unknown metric type %d", name, (int)type);
		return -EINVAL;
	}
	if (!name_valid(s->name, true)) {
		sg_error("metrics: '%s' is not a valid metric name", name);
		return -EINVAL;
	}
	len = strlen(s->name);
	if (type == METRICS_COUNTER && (len < 6 || strcmp(s->name + len - 6, "_total"))) {
		sg_error("metrics: counter '%s' must end in _total", name);
		return -EINVAL;
	}
	if (!s->help || !utf8_valid((const unsigned char *)s->help, strlen(s->help))) {
		sg_error("metrics: %s: help text missing or not UTF-8", name);
		return -EINVAL;
	}
	for (; s->labels && s->labels[n]; n++) {
		const char *l = s->labels[n];
		if (n == METRICS_MAX_LABELS || !name_valid(l, false) || !strncmp(l, "__", 2) ||
		    (type == METRICS_HISTOGRAM && !strcmp(l, "le"))) {
			sg_error("metrics: %s: label '%s' is invalid or one too many", name, l);
			return -EINVAL;
		}
		for (size_t k = 0; k < n; k++)
			if (!strcmp(s->labels[k], l)) {
				sg_error("metrics: %s: label '%s' given twice", name, l);
				return -EINVAL;
			}
	}
	if (type == METRICS_HISTOGRAM) {
		if (!s->bounds || s->n_bounds == 0 || s->n_bounds > METRICS_MAX_BUCKETS) {
			sg_error("metrics: histogram %s needs 1..%d bucket bounds", name,
				 METRICS_MAX_BUCKETS);
			return -EINVAL;
		}
		for (size_t i = 0; i < s->n_bounds; i++)
			if (!isfinite(s->bounds[i]) || (i && s->bounds[i] <= s->bounds[i - 1])) {
				sg_error(
					"metrics: histogram %s: bounds must be finite and strictly increasing",
					name);
				return -EINVAL;
			}
	}
	*n_labels = n;
	return 0;
}

/* ---- registry ---- */

struct metrics_registry *metrics_registry_new(void)
{
	struct metrics_registry *r = calloc(1, sizeof(*r));

	if (r)
		pthread_mutex_init(&r->lock, NULL);
	return r;
}

static void series_free(struct metrics_family *f, struct metrics_series *s)
{
	for (size_t i = 0; i < f->n_labels; i++)
		free(s->values[i]);
	free(s->values);
	free(s->buckets);
}

static void family_free(struct metrics_family *f)
{
	for (size_t i = 0; i < f->n_series; i++)
		series_free(f, &f->series[i]);
	free(f->series);
	for (size_t i = 0; i < f->n_labels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
	free(f);
}

void metrics_registry_free(struct metrics_registry *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_families; i++)
		family_free(r->families[i]);
	free(r->families);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void metrics_registry_on_collect(struct metrics_registry *r, metrics_collect_fn fn, void *ctx)
{
	pthread_mutex_lock(&r->lock);
	r->collect = fn;
	r->collect_ctx = ctx;
	pthread_mutex_unlock(&r->lock);
}

static struct metrics_series *series_get(struct metrics_family *f, const char *const *values,
					 int *err);

int metrics_family_add(struct metrics_registry *r, enum metrics_type type,
		       const struct metrics_spec *spec, struct metrics_family **out)
{
	struct metrics_family *f;
	size_t n_labels;
	int err = spec_check(type, spec, &n_labels);

	if (err)
		return err;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->reg = r;
	f->type = type;
	f->n_labels = n_labels;
	f->max_series = spec->max_series ? spec->max_series : METRICS_DEFAULT_MAX_SERIES;
	f->name = strdup(spec->name);
	f->help = strdup(spec->help);
	bool oom = !f->name || !f->help;
	for (size_t i = 0; i < n_labels; i++)
		oom |= !(f->labels[i] = strdup(spec->labels[i]));
	if (type == METRICS_HISTOGRAM) {
		f->n_bounds = spec->n_bounds;
		memcpy(f->bounds, spec->bounds, spec->n_bounds * sizeof(double));
	}
	if (oom) {
		family_free(f);
		return -ENOMEM;
	}

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n_families; i++)
		if (!strcmp(r->families[i]->name, f->name)) {
			pthread_mutex_unlock(&r->lock);
			sg_error("metrics: '%s' is registered twice", f->name);
			family_free(f);
			return -EINVAL;
		}
	if (r->n_families == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		struct metrics_family **fs = realloc(r->families, cap * sizeof(*fs));
		if (!fs) {
			pthread_mutex_unlock(&r->lock);
			family_free(f);
			return -ENOMEM;
		}
		r->families = fs;
		r->cap = cap;
	}
	/* A family without labels has exactly one series: make it now. */
	if (n_labels == 0 && !series_get(f, NULL, &err)) {
		pthread_mutex_unlock(&r->lock);
		family_free(f);
		return err;
	}
	r->families[r->n_families++] = f;
	pthread_mutex_unlock(&r->lock);
	*out = f;
	return 0;
}

/* ---- series lookup (registry lock held) ---- */

static uint64_t values_hash(const struct metrics_family *f, const char *const *values)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, 0xff between values */

	for (size_t i = 0; i < f->n_labels; i++) {
		for (const unsigned char *p = (const unsigned char *)values[i]; *p; p++)
			h = (h ^ *p) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	return h;
}

static int values_check(const struct metrics_family *f, const char *const *values)
{
	if (f->n_labels && !values)
		return -EINVAL;
	for (size_t i = 0; i < f->n_labels; i++) {
		size_t len;
		if (!values[i])
			return -EINVAL;
		len = strnlen(values[i], METRICS_LABEL_VALUE_MAX + 1);
		if (len > METRICS_LABEL_VALUE_MAX ||
		    !utf8_valid((const unsigned char *)values[i], len))
			return -EINVAL;
	}
	return 0;
}

static struct metrics_series *series_find(struct metrics_family *f, const char *const *values,
					  uint64_t h)
{
	for (size_t i = 0; i < f->n_series; i++) {
		struct metrics_series *s = &f->series[i];
		size_t k = 0;
		if (s->hash != h)
			continue;
		while (k < f->n_labels && !strcmp(s->values[k], values[k]))
			k++;
		if (k == f->n_labels)
			return s;
	}
	return NULL;
}

static struct metrics_series *series_get(struct metrics_family *f, const char *const *values,
					 int *err)
{
	struct metrics_series *s, fresh = { 0 };
	uint64_t h;

	*err = values_check(f, values);
	if (*err)
		return NULL;
	h = values_hash(f, values);
	s = series_find(f, values, h);
	if (s)
		return s;
	if (f->n_series >= f->max_series) {
		f->refused++;
		*err = -ENOSPC;
		return NULL;
	}
	if (f->n_series == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		if (cap > f->max_series)
			cap = f->max_series;
		s = realloc(f->series, cap * sizeof(*s));
		if (!s)
			goto oom;
		f->series = s;
		f->cap = cap;
	}
	fresh.hash = h;
	fresh.values = calloc(f->n_labels ? f->n_labels : 1, sizeof(char *));
	if (!fresh.values)
		goto oom;
	for (size_t i = 0; i < f->n_labels; i++)
		if (!(fresh.values[i] = strdup(values[i]))) {
			series_free(f, &fresh);
			goto oom;
		}
	if (f->type == METRICS_HISTOGRAM &&
	    !(fresh.buckets = calloc(f->n_bounds + 1, sizeof(uint64_t)))) {
		series_free(f, &fresh);
		goto oom;
	}
	f->series[f->n_series] = fresh;
	return &f->series[f->n_series++];
oom:
	*err = -ENOMEM;
	return NULL;
}

/* ---- updates ---- */

enum op { OP_ADD, OP_SET };

static int scalar_update(struct metrics_family *f, enum metrics_type want,
			 const char *const *values, double v, enum op op)
{
	struct metrics_series *s;
	int err;

	if (f->type != want)
		return -EINVAL;
	if (want == METRICS_COUNTER && !(isfinite(v) && v >= 0))
		return -EINVAL;
	pthread_mutex_lock(&f->reg->lock);
	s = series_get(f, values, &err);
	if (s)
		s->value = op == OP_ADD ? s->value + v : v;
	pthread_mutex_unlock(&f->reg->lock);
	return err;
}

int metrics_counter_add(struct metrics_family *f, const char *const *values, double delta)
{
	return scalar_update(f, METRICS_COUNTER, values, delta, OP_ADD);
}

int metrics_counter_set(struct metrics_family *f, const char *const *values, double total)
{
	return scalar_update(f, METRICS_COUNTER, values, total, OP_SET);
}

int metrics_gauge_set(struct metrics_family *f, const char *const *values, double v)
{
	return scalar_update(f, METRICS_GAUGE, values, v, OP_SET);
}

int metrics_gauge_add(struct metrics_family *f, const char *const *values, double delta)
{
	return scalar_update(f, METRICS_GAUGE, values, delta, OP_ADD);
}

int metrics_histogram_observe(struct metrics_family *f, const char *const *values, double v)
{
	struct metrics_series *s;
	size_t b = 0;
	int err;

	if (f->type != METRICS_HISTOGRAM || isnan(v))
		return -EINVAL;
	while (b < f->n_bounds && v > f->bounds[b])
		b++;
	pthread_mutex_lock(&f->reg->lock);
	s = series_get(f, values, &err);
	if (s) {
		s->buckets[b]++;
		s->sum += v;
		s->count++;
	}
	pthread_mutex_unlock(&f->reg->lock);
	return err;
}

int metrics_histogram_set(struct metrics_family *f, const char *const *values,
			  const uint64_t *counts, size_t n_counts, double sum)
{
	struct metrics_series *s;
	uint64_t total = 0;
	int err;

	if (f->type != METRICS_HISTOGRAM || n_counts != f->n_bounds + 1 || isnan(sum))
		return -EINVAL;
	for (size_t i = 0; i < n_counts; i++)
		total += counts[i];
	pthread_mutex_lock(&f->reg->lock);
	s = series_get(f, values, &err);
	if (s) {
		memcpy(s->buckets, counts, n_counts * sizeof(uint64_t));
		s->sum = sum;
		s->count = total;
	}
	pthread_mutex_unlock(&f->reg->lock);
	return err;
}

int metrics_series_remove(struct metrics_family *f, const char *const *values)
{
	struct metrics_series *s;
	int err;

	pthread_mutex_lock(&f->reg->lock);
	err = values_check(f, values);
	s = err ? NULL : series_find(f, values, values_hash(f, values));
	if (s) {
		size_t i = s - f->series;
		series_free(f, s);
		memmove(s, s + 1, (f->n_series - i - 1) * sizeof(*s));
		f->n_series--;
	} else if (!err) {
		err = -ENOENT;
	}
	pthread_mutex_unlock(&f->reg->lock);
	return err;
}

uint64_t metrics_family_refused(struct metrics_family *f)
{
	uint64_t n;

	pthread_mutex_lock(&f->reg->lock);
	n = f->refused;
	pthread_mutex_unlock(&f->reg->lock);
	return n;
}

size_t metrics_family_series(struct metrics_family *f)
{
	size_t n;

	pthread_mutex_lock(&f->reg->lock);
	n = f->n_series;
	pthread_mutex_unlock(&f->reg->lock);
	return n;
}

/* ---- rendering ---- */

char *metrics_format_double(double v, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "NaN");
	else if (isinf(v))
		snprintf(buf, len, "%s", v > 0 ? "+Inf" : "-Inf");
	else {
		/* Shortest of the two precisions that reads back exactly. */
		snprintf(buf, len, "%.15g", v);
		if (strtod(buf, NULL) != v)
			snprintf(buf, len, "%.17g", v);
	}
	return buf;
}

/* HELP escapes backslash and newline; label values also the double quote. */
static void put_escaped(FILE *out, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (quote && *s == '"')
			fputs("\\\"", out);
		else
			fputc(*s, out);
	}
}

/* name{l1="v1",...,le="x"} with the optional extra `le` label. */
static void put_sample_name(FILE *out, const struct metrics_family *f,
			    const struct metrics_series *s, const char *suffix, const char *le)
{
	fputs(f->name, out);
	fputs(suffix, out);
	if (f->n_labels == 0 && !le)
		return;
	fputc('{', out);
	for (size_t i = 0; i < f->n_labels; i++) {
		fprintf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
		put_escaped(out, s->values[i], true);
		fputc('"', out);
	}
	if (le)
		fprintf(out, "%sle=\"%s\"", f->n_labels ? "," : "", le);
	fputc('}', out);
}

static void render_family(FILE *out, const struct metrics_family *f)
{
	static const char *const type_names[] = {
		[METRICS_COUNTER] = "counter",
		[METRICS_GAUGE] = "gauge",
		[METRICS_HISTOGRAM] = "histogram",
	};
	char num[32];

	if (f->n_series == 0)
		return; /* no HELP without samples */
	fprintf(out, "# HELP %s ", f->name);
	put_escaped(out, f->help, false);
	fprintf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
	for (size_t i = 0; i < f->n_series; i++) {
		const struct metrics_series *s = &f->series[i];
		uint64_t cum = 0;

		if (f->type != METRICS_HISTOGRAM) {
			put_sample_name(out, f, s, "", NULL);
			fprintf(out, " %s\n", metrics_format_double(s->value, num, sizeof(num)));
			continue;
		}
		for (size_t b = 0; b <= f->n_bounds; b++) {
			cum += s->buckets[b];
			if (b < f->n_bounds)
				metrics_format_double(f->bounds[b], num, sizeof(num));
			else
				strcpy(num, "+Inf");
			put_sample_name(out, f, s, "_bucket", num);
			fprintf(out, " %llu\n", (unsigned long long)cum);
		}
		put_sample_name(out, f, s, "_sum", NULL);
		fprintf(out, " %s\n", metrics_format_double(s->sum, num, sizeof(num)));
		put_sample_name(out, f, s, "_count", NULL);
		fprintf(out, " %llu\n", (unsigned long long)s->count);
	}
}

int metrics_render(struct metrics_registry *r, FILE *out)
{
	metrics_collect_fn collect;
	void *ctx;

	pthread_mutex_lock(&r->lock);
	collect = r->collect;
	ctx = r->collect_ctx;
	pthread_mutex_unlock(&r->lock);
	if (collect)
		collect(r, ctx);

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n_families; i++)
		render_family(out, r->families[i]);
	pthread_mutex_unlock(&r->lock);
	return fflush(out) || ferror(out) ? -EIO : 0;
}

char *metrics_render_string(struct metrics_registry *r, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	int err;

	if (!f)
		return NULL;
	err = metrics_render(r, f);
	if (fclose(f) || err) {
		free(buf);
		errno = EIO;
		return NULL;
	}
	if (len)
		*len = size;
	return buf;
}
