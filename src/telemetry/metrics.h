/* A small Prometheus metrics registry and its text exposition encoder
 * (format 0.0.4, what `promtool check metrics` and a Prometheus server read).
 *
 * A registry holds families (counter, gauge, histogram). A family has a fixed
 * list of label names; its series are created on first use from label
 * values. Output order is registration order for families and creation order
 * for series, so rendering is deterministic.
 *
 * Naming is enforced where the format or Prometheus practice makes it a rule:
 * metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*
 * without the reserved "__" prefix, counters end in "_total", histograms may
 * not use the label "le". The project's own conventions (prefix "sandguard_",
 * base units such as "_seconds") are the caller's to follow.
 *
 * Cardinality is bounded: label values come from outside (a tenant name), so
 * each family has a cap on its series. An update that would create a series
 * beyond the cap is refused with -ENOSPC and counted (metrics_family_refused),
 * so the caller can export the refusals as a metric of their own.
 *
 * Thread safety: every call takes the registry's one mutex, so the agent loop
 * may update while the HTTP thread renders. Family handles stay valid until
 * metrics_registry_free().
 *
 * Errors: calls return 0 or a negative errno: -EINVAL for a bad argument
 * (wrong label count, a label value that is not UTF-8 or is longer than
 * METRICS_LABEL_VALUE_MAX, a negative counter increment, a NaN observation,
 * an update of the wrong kind for the family), -ENOSPC over the cap, -ENOMEM.
 * metrics_family_add() also logs what was wrong with the spec.
 */
#ifndef SG_METRICS_H
#define SG_METRICS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define METRICS_DEFAULT_MAX_SERIES 4096
#define METRICS_LABEL_VALUE_MAX    256 /* bytes, per label value */
#define METRICS_MAX_LABELS         8
#define METRICS_MAX_BUCKETS        64 /* finite bounds; +Inf is implicit */

enum metrics_type {
	METRICS_COUNTER = 1,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

struct metrics_registry;
struct metrics_family;

/* What a family is. `labels` is a NULL-terminated list of label names (NULL
 * or an empty list for a family with a single series, which is created at
 * once so it renders as 0 from the start). `bounds` are a histogram's finite
 * upper bounds, strictly increasing; the +Inf bucket is added. */
struct metrics_spec {
	const char *name;
	const char *help; /* any UTF-8; escaped on output */
	const char *const *labels;
	size_t max_series;    /* 0: METRICS_DEFAULT_MAX_SERIES */
	const double *bounds; /* histograms only */
	size_t n_bounds;
};

struct metrics_registry *metrics_registry_new(void);
void metrics_registry_free(struct metrics_registry *r);

/* Register a family; *out is its handle. -EINVAL (logged) for a bad spec or
 * a name already registered. */
int metrics_family_add(struct metrics_registry *r, enum metrics_type type,
		       const struct metrics_spec *spec, struct metrics_family **out);

/* Called at the start of every render, without the registry lock held, so it
 * may set series from state kept elsewhere (the ledger's persisted totals).
 * It runs on the rendering thread: it must do its own locking. */
typedef void (*metrics_collect_fn)(struct metrics_registry *r, void *ctx);
void metrics_registry_on_collect(struct metrics_registry *r, metrics_collect_fn fn, void *ctx);

/* Updates. `values` holds one label value per label name, in order (NULL
 * for a family without labels). */
int metrics_counter_add(struct metrics_family *f, const char *const *values,
			double delta); /* delta >= 0 */
/* Set a counter to a total kept elsewhere (finite, >= 0). */
int metrics_counter_set(struct metrics_family *f, const char *const *values, double total);
int metrics_gauge_set(struct metrics_family *f, const char *const *values,
		      double v); /* any value, NaN and Inf too */
int metrics_gauge_add(struct metrics_family *f, const char *const *values, double delta);
int metrics_histogram_observe(struct metrics_family *f, const char *const *values, double v);
/* Set a histogram from counts kept elsewhere: `counts` has n_bounds + 1
 * per-bucket (not cumulative) counts, the last for values above every bound;
 * `sum` is the sum of all observations. */
int metrics_histogram_set(struct metrics_family *f, const char *const *values,
			  const uint64_t *counts, size_t n_counts, double sum);
/* Drop a series (a tenant that went away). -ENOENT if there is none. */
int metrics_series_remove(struct metrics_family *f, const char *const *values);

/* Updates refused because the family was at its series cap. */
uint64_t metrics_family_refused(struct metrics_family *f);
size_t metrics_family_series(struct metrics_family *f);

/* Render every family in the text format. 0, or -EIO if writing failed. */
int metrics_render(struct metrics_registry *r, FILE *out);
/* The same into a malloc'd NUL-terminated buffer (caller frees); NULL and
 * errno set on failure. */
char *metrics_render_string(struct metrics_registry *r, size_t *len);

/* A sample value as Prometheus spells it: "+Inf", "-Inf", "NaN", else the
 * shortest decimal that reads back as the same double ("0.005", "1e+06").
 * Returns buf. len >= 32 is always enough. */
char *metrics_format_double(double v, char *buf, size_t len);

#endif
