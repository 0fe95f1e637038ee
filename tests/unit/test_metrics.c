/* The Prometheus encoder: exact exposition text, escaping, histograms,
 * cardinality caps, bad input, concurrent use, and promtool's verdict. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>
#include "telemetry/metrics.h"

#define L(...) ((const char *const[]){ __VA_ARGS__ })

static struct metrics_family *add(struct metrics_registry *r, enum metrics_type t,
				  const struct metrics_spec *spec)
{
	struct metrics_family *f = NULL;
	assert_int_equal(metrics_family_add(r, t, spec, &f), 0);
	assert_non_null(f);
	return f;
}

static void assert_render(struct metrics_registry *r, const char *want)
{
	size_t len = 0;
	char *got = metrics_render_string(r, &len);

	assert_non_null(got);
	assert_string_equal(got, want);
	assert_int_equal(len, strlen(want));
	free(got);
}

static void test_counter_exact(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f =
		add(r, METRICS_COUNTER,
		    &(struct metrics_spec){ .name = "sandguard_failures_total",
					    .help = "Failed attempts by cause.",
					    .labels = L("tenant", "cause", NULL) });

	assert_int_equal(metrics_counter_add(f, L("acme", "tenant_crash"), 1), 0);
	assert_int_equal(metrics_counter_add(f, L("acme", "tenant_oom"), 2), 0);
	assert_int_equal(metrics_counter_add(f, L("acme", "tenant_crash"), 1), 0);
	assert_int_equal(metrics_counter_set(f, L("beta", "platform_error"), 12345678), 0);
	assert_render(
		r, "# HELP sandguard_failures_total Failed attempts by cause.\n"
		   "# TYPE sandguard_failures_total counter\n"
		   "sandguard_failures_total{tenant=\"acme\",cause=\"tenant_crash\"} 2\n"
		   "sandguard_failures_total{tenant=\"acme\",cause=\"tenant_oom\"} 2\n"
		   "sandguard_failures_total{tenant=\"beta\",cause=\"platform_error\"} 12345678\n");
	assert_int_equal(metrics_family_series(f), 3);
	metrics_registry_free(r);
}

static void test_gauge_special_values(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *bare =
		add(r, METRICS_GAUGE,
		    &(struct metrics_spec){ .name = "sandguard_feature_mode", .help = "Mode." });
	struct metrics_family *g = add(r, METRICS_GAUGE,
				       &(struct metrics_spec){ .name = "sandguard_active_sandboxes",
							       .help = "Live sandboxes.",
							       .labels = L("tenant", NULL) });
	/* A label-less family renders 0 before any update. */
	assert_render(r, "# HELP sandguard_feature_mode Mode.\n"
			 "# TYPE sandguard_feature_mode gauge\n"
			 "sandguard_feature_mode 0\n");

	assert_int_equal(metrics_gauge_set(g, L("a"), INFINITY), 0);
	assert_int_equal(metrics_gauge_set(g, L("b"), -INFINITY), 0);
	assert_int_equal(metrics_gauge_set(g, L("c"), NAN), 0);
	assert_int_equal(metrics_gauge_set(g, L("d"), 0.1), 0);
	assert_int_equal(metrics_gauge_add(g, L("d"), -1.6), 0);
	assert_int_equal(metrics_gauge_set(bare, NULL, 1e-9), 0);
	assert_render(r, "# HELP sandguard_feature_mode Mode.\n"
			 "# TYPE sandguard_feature_mode gauge\n"
			 "sandguard_feature_mode 1e-09\n"
			 "# HELP sandguard_active_sandboxes Live sandboxes.\n"
			 "# TYPE sandguard_active_sandboxes gauge\n"
			 "sandguard_active_sandboxes{tenant=\"a\"} +Inf\n"
			 "sandguard_active_sandboxes{tenant=\"b\"} -Inf\n"
			 "sandguard_active_sandboxes{tenant=\"c\"} NaN\n"
			 "sandguard_active_sandboxes{tenant=\"d\"} -1.5\n");
	metrics_registry_free(r);
}

static void test_histogram_exact(void **state)
{
	static const double bounds[] = { 0.005, 0.5, 1, 60 };
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *h =
		add(r, METRICS_HISTOGRAM,
		    &(struct metrics_spec){ .name = "sandguard_batch_duration_seconds",
					    .help = "Batch wall time.",
					    .labels = L("tenant", NULL),
					    .bounds = bounds,
					    .n_bounds = 4 });

	/* A value equal to a bound falls in that bound's bucket (le = <=). */
	assert_int_equal(metrics_histogram_observe(h, L("acme"), 0.005), 0);
	assert_int_equal(metrics_histogram_observe(h, L("acme"), 0.25), 0);
	assert_int_equal(metrics_histogram_observe(h, L("acme"), 0.75), 0);
	assert_int_equal(metrics_histogram_observe(h, L("acme"), 120), 0);
	assert_render(r, "# HELP sandguard_batch_duration_seconds Batch wall time.\n"
			 "# TYPE sandguard_batch_duration_seconds histogram\n"
			 "sandguard_batch_duration_seconds_bucket{tenant=\"acme\",le=\"0.005\"} 1\n"
			 "sandguard_batch_duration_seconds_bucket{tenant=\"acme\",le=\"0.5\"} 2\n"
			 "sandguard_batch_duration_seconds_bucket{tenant=\"acme\",le=\"1\"} 3\n"
			 "sandguard_batch_duration_seconds_bucket{tenant=\"acme\",le=\"60\"} 3\n"
			 "sandguard_batch_duration_seconds_bucket{tenant=\"acme\",le=\"+Inf\"} 4\n"
			 "sandguard_batch_duration_seconds_sum{tenant=\"acme\"} 121.005\n"
			 "sandguard_batch_duration_seconds_count{tenant=\"acme\"} 4\n");

	/* Set from counts kept elsewhere: per-bucket in, cumulative out. */
	assert_int_equal(metrics_histogram_set(h, L("acme"), (const uint64_t[]){ 0, 2, 0, 1, 3 }, 5,
					       9.5),
			 0);
	assert_int_equal(metrics_histogram_set(h, L("acme"), (const uint64_t[]){ 0, 2, 0, 1 }, 4,
					       9.5),
			 -EINVAL);
	char *out = metrics_render_string(r, NULL);
	assert_non_null(strstr(out, "{tenant=\"acme\",le=\"0.5\"} 2\n"));
	assert_non_null(strstr(out, "{tenant=\"acme\",le=\"60\"} 3\n"));
	assert_non_null(strstr(out, "{tenant=\"acme\",le=\"+Inf\"} 6\n"));
	assert_non_null(strstr(out, "_sum{tenant=\"acme\"} 9.5\n"));
	assert_non_null(strstr(out, "_count{tenant=\"acme\"} 6\n"));
	free(out);

	/* A label-less histogram: le is the only label. */
	struct metrics_family *bare = add(r, METRICS_HISTOGRAM,
					  &(struct metrics_spec){ .name = "sandguard_kill_seconds",
								  .help = "h",
								  .bounds = bounds,
								  .n_bounds = 1 });
	assert_int_equal(metrics_histogram_observe(bare, NULL, 0.001), 0);
	out = metrics_render_string(r, NULL);
	assert_non_null(strstr(out, "\nsandguard_kill_seconds_bucket{le=\"0.005\"} 1\n"
				    "sandguard_kill_seconds_bucket{le=\"+Inf\"} 1\n"
				    "sandguard_kill_seconds_sum 0.001\n"
				    "sandguard_kill_seconds_count 1\n"));
	free(out);
	metrics_registry_free(r);
}

static void test_escaping(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f =
		add(r, METRICS_COUNTER,
		    &(struct metrics_spec){ .name = "sandguard_x_total",
					    .help = "Back\\slash, \"quotes\" stay,\nnewline.",
					    .labels = L("v", NULL) });

	assert_int_equal(metrics_counter_add(f, L("a\\b\"c\nd"), 1), 0);
	assert_int_equal(metrics_counter_add(f, L("caf\xc3\xa9 {x=1}, #"), 1), 0);
	assert_render(r, "# HELP sandguard_x_total Back\\\\slash, \"quotes\" stay,\\nnewline.\n"
			 "# TYPE sandguard_x_total counter\n"
			 "sandguard_x_total{v=\"a\\\\b\\\"c\\nd\"} 1\n"
			 "sandguard_x_total{v=\"caf\xc3\xa9 {x=1}, #\"} 1\n");
	metrics_registry_free(r);
}

static void test_bad_specs(void **state)
{
	static const double up[] = { 1, 2 }, flat[] = { 1, 1 };
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f = NULL;
	const struct {
		enum metrics_type t;
		struct metrics_spec s;
	} bad[] = {
		{ METRICS_COUNTER, { .name = "sandguard_failures", .help = "no _total" } },
		{ METRICS_GAUGE, { .name = "1abc", .help = "h" } },
		{ METRICS_GAUGE, { .name = "a-b", .help = "h" } },
		{ METRICS_GAUGE, { .name = "ok", .help = NULL } },
		{ METRICS_GAUGE, { .name = "ok", .help = "\xff" } },
		{ METRICS_GAUGE, { .name = "ok", .help = "h", .labels = L("__x", NULL) } },
		{ METRICS_GAUGE, { .name = "ok", .help = "h", .labels = L("a", "a", NULL) } },
		{ METRICS_GAUGE, { .name = "ok", .help = "h", .labels = L("a.b", NULL) } },
		{ METRICS_HISTOGRAM,
		  { .name = "h",
		    .help = "h",
		    .labels = L("le", NULL),
		    .bounds = up,
		    .n_bounds = 2 } },
		{ METRICS_HISTOGRAM, { .name = "h", .help = "h", .bounds = flat, .n_bounds = 2 } },
		{ METRICS_HISTOGRAM, { .name = "h", .help = "h" } },
		{ 42, { .name = "ok", .help = "h" } },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(metrics_family_add(r, bad[i].t, &bad[i].s, &f), -EINVAL);
	assert_null(f);

	assert_int_equal(metrics_family_add(r, METRICS_GAUGE,
					    &(struct metrics_spec){ .name = "dup", .help = "h" },
					    &f),
			 0);
	assert_int_equal(
		metrics_family_add(r, METRICS_GAUGE,
				   &(struct metrics_spec){ .name = "dup", .help = "other" }, &f),
		-EINVAL);
	metrics_registry_free(r);
}

static void test_bad_updates(void **state)
{
	static const double b[] = { 1 };
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *c = add(r, METRICS_COUNTER,
				       &(struct metrics_spec){ .name = "c_total",
							       .help = "h",
							       .labels = L("tenant", NULL) });
	struct metrics_family *h = add(r, METRICS_HISTOGRAM,
				       &(struct metrics_spec){ .name = "h_seconds",
							       .help = "h",
							       .labels = L("tenant", NULL),
							       .bounds = b,
							       .n_bounds = 1 });
	char longv[METRICS_LABEL_VALUE_MAX + 2];

	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	assert_int_equal(metrics_counter_add(c, NULL, 1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L(NULL), 1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L("a"), -1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L("a"), NAN), -EINVAL);
	assert_int_equal(metrics_counter_set(c, L("a"), INFINITY), -EINVAL);
	assert_int_equal(metrics_gauge_set(c, L("a"), 1), -EINVAL); /* wrong kind */
	assert_int_equal(metrics_histogram_observe(c, L("a"), 1), -EINVAL);
	assert_int_equal(metrics_histogram_observe(h, L("a"), NAN), -EINVAL);
	/* Not UTF-8: a stray continuation byte, an overlong '/', a surrogate,
	 * a truncated sequence. */
	assert_int_equal(metrics_counter_add(c, L("\x80"), 1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L("\xc0\xaf"), 1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L("\xed\xa0\x80"), 1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L("ab\xe2\x82"), 1), -EINVAL);
	assert_int_equal(metrics_counter_add(c, L(longv), 1), -EINVAL);
	longv[METRICS_LABEL_VALUE_MAX] = '\0';
	assert_int_equal(metrics_counter_add(c, L(longv), 1), 0);
	assert_int_equal(metrics_counter_add(c, L("\xf0\x9f\x98\x80"), 1), 0);
	assert_int_equal(metrics_family_series(c), 2);
	assert_int_equal(metrics_family_series(h), 0);
	metrics_registry_free(r);
}

static void test_cardinality_cap(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f = add(r, METRICS_COUNTER,
				       &(struct metrics_spec){ .name = "c_total",
							       .help = "h",
							       .labels = L("tenant", NULL),
							       .max_series = 2 });

	assert_int_equal(metrics_counter_add(f, L("a"), 1), 0);
	assert_int_equal(metrics_counter_add(f, L("b"), 1), 0);
	assert_int_equal(metrics_counter_add(f, L("c"), 1), -ENOSPC);
	assert_int_equal(metrics_counter_add(f, L("d"), 1), -ENOSPC);
	assert_int_equal(metrics_family_refused(f), 2);
	assert_int_equal(metrics_counter_add(f, L("a"), 1), 0); /* existing still counts */
	assert_int_equal(metrics_family_series(f), 2);

	assert_int_equal(metrics_series_remove(f, L("c")), -ENOENT);
	assert_int_equal(metrics_series_remove(f, L("a")), 0);
	assert_int_equal(metrics_counter_add(f, L("c"), 5), 0);
	assert_render(r, "# HELP c_total h\n# TYPE c_total counter\n"
			 "c_total{tenant=\"b\"} 1\n"
			 "c_total{tenant=\"c\"} 5\n");
	metrics_registry_free(r);
}

static void test_format_double(void **state)
{
	char b[32];

	assert_string_equal(metrics_format_double(0, b, sizeof(b)), "0");
	assert_string_equal(metrics_format_double(0.1, b, sizeof(b)), "0.1");
	assert_string_equal(metrics_format_double(2.5, b, sizeof(b)), "2.5");
	assert_string_equal(metrics_format_double(1e6, b, sizeof(b)), "1000000");
	assert_string_equal(metrics_format_double(1e20, b, sizeof(b)), "1e+20");
	assert_string_equal(metrics_format_double(9007199254740993.0, b, sizeof(b)),
			    "9007199254740992");
	assert_string_equal(metrics_format_double(0.1 + 0.2, b, sizeof(b)), "0.30000000000000004");
	assert_string_equal(metrics_format_double(INFINITY, b, sizeof(b)), "+Inf");
	assert_string_equal(metrics_format_double(-INFINITY, b, sizeof(b)), "-Inf");
	assert_string_equal(metrics_format_double(NAN, b, sizeof(b)), "NaN");
}

static int collected;
static void collect(struct metrics_registry *r, void *ctx)
{
	collected++;
	assert_int_equal(metrics_counter_set(ctx, NULL, 40 + collected), 0);
}

static void test_collect_hook(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f =
		add(r, METRICS_COUNTER,
		    &(struct metrics_spec){ .name = "sandguard_ringbuf_drops_total",
					    .help = "Drops." });

	metrics_registry_on_collect(r, collect, f);
	assert_render(r, "# HELP sandguard_ringbuf_drops_total Drops.\n"
			 "# TYPE sandguard_ringbuf_drops_total counter\n"
			 "sandguard_ringbuf_drops_total 41\n");
	assert_int_equal(collected, 1);
	metrics_registry_free(r);
}

/* Two writers and a renderer at once: no update is lost. */
static void *writer(void *arg)
{
	for (int i = 0; i < 20000; i++)
		if (metrics_counter_add(arg, L(i % 2 ? "a" : "b"), 1))
			return (void *)1;
	return NULL;
}

static void test_concurrent(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *f = add(
		r, METRICS_COUNTER,
		&(struct metrics_spec){ .name = "c_total", .help = "h", .labels = L("t", NULL) });
	pthread_t t1, t2;
	void *rc1, *rc2;

	assert_int_equal(pthread_create(&t1, NULL, writer, f), 0);
	assert_int_equal(pthread_create(&t2, NULL, writer, f), 0);
	for (int i = 0; i < 200; i++)
		free(metrics_render_string(r, NULL));
	pthread_join(t1, &rc1);
	pthread_join(t2, &rc2);
	assert_null(rc1);
	assert_null(rc2);
	assert_render(r, "# HELP c_total h\n# TYPE c_total counter\n"
			 "c_total{t=\"b\"} 20000\n"
			 "c_total{t=\"a\"} 20000\n");
	metrics_registry_free(r);
}

/* The real linter over a sample with every kind and the nasty cases. */
static void test_promtool(void **state)
{
	static const double bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
					 1,     2.5,  5,     10,   30,  60 };
	const char *promtool = "/usr/bin/promtool";
	char path[] = "/tmp/sg-metrics-XXXXXX", cmd[256], out[4096];
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *c, *g, *h;
	FILE *fp;
	size_t n;
	int fd, rc;

	if (access(promtool, X_OK) != 0) {
		printf("SKIP: promtool check: %s not installed (apt-get install prometheus)\n",
		       promtool);
		metrics_registry_free(r);
		skip();
	}
	c = add(r, METRICS_COUNTER,
		&(struct metrics_spec){ .name = "sandguard_failures_total",
					.help = "Failed attempts, by \\cause\\ and\nclass.",
					.labels = L("tenant", "cause", "class", NULL) });
	g = add(r, METRICS_GAUGE,
		&(struct metrics_spec){ .name = "sandguard_active_sandboxes",
					.help = "Live sandboxes.",
					.labels = L("tenant", NULL) });
	h = add(r, METRICS_HISTOGRAM,
		&(struct metrics_spec){ .name = "sandguard_batch_duration_seconds",
					.help = "Batch wall time.",
					.labels = L("tenant", NULL),
					.bounds = bounds,
					.n_bounds = 13 });
	add(r, METRICS_COUNTER,
	    &(struct metrics_spec){ .name = "sandguard_ringbuf_drops_total",
				    .help = "Ring-buffer drops." });
	assert_int_equal(metrics_counter_add(c, L("acme", "tenant_crash", "tenant_code"), 3), 0);
	assert_int_equal(
		metrics_counter_add(c, L("we\"ird\\\nname", "platform_error", "platform"), 1), 0);
	assert_int_equal(metrics_gauge_set(g, L("acme"), NAN), 0);
	assert_int_equal(metrics_gauge_set(g, L("beta"), -INFINITY), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(metrics_histogram_observe(h, L(i % 3 ? "acme" : "beta"), i * 0.37),
				 0);

	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_int_equal(metrics_render(r, fp), 0);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "%s check metrics < %s 2>&1", promtool, path);
	fp = popen(cmd, "r");
	assert_non_null(fp);
	n = fread(out, 1, sizeof(out) - 1, fp);
	out[n] = '\0';
	rc = pclose(fp);
	if (rc != 0 || n != 0)
		printf("promtool (exit %d) said:\n%s\n", WEXITSTATUS(rc), out);
	unlink(path);
	assert_int_equal(rc, 0);
	assert_int_equal(n, 0);
	metrics_registry_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counter_exact),   cmocka_unit_test(test_gauge_special_values),
		cmocka_unit_test(test_histogram_exact), cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_bad_specs),       cmocka_unit_test(test_bad_updates),
		cmocka_unit_test(test_cardinality_cap), cmocka_unit_test(test_format_double),
		cmocka_unit_test(test_collect_hook),    cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_promtool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
