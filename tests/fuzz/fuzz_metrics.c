/* libFuzzer target for the exposition encoder (src/telemetry/metrics.c).
 *
 * The input is split at NUL bytes into: HELP text, two label values, and an
 * optional 8-byte double. The registry gets a counter with that HELP, a
 * gauge and a histogram labelled with those values, and the rendered page
 * is parsed back by an independent reader: HELP text and label values must
 * unescape to exactly what went in, every sample value must read back as the
 * same double, and nothing else may appear on the page. Inputs the encoder
 * refuses (HELP or a value that is not UTF-8, a value past
 * METRICS_LABEL_VALUE_MAX) must be refused with -EINVAL and leave no trace.
 *
 * Build and run (scripts/fuzz.sh does the same, bounded):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_metrics.c src/telemetry/metrics.c src/lib/log.c -lpthread -lm \
 *     -o build-fuzz/fuzz_metrics
 *   build-fuzz/fuzz_metrics -max_total_time=60 tests/fuzz/corpus/metrics
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/log.h"
#include "telemetry/metrics.h"

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "fuzz_metrics: check failed: %s (line %d)\n", #cond, \
				__LINE__);                                                   \
			abort();                                                             \
		}                                                                            \
	} while (0)

/* Undo the text format's escaping up to the closing quote (quoted) or the
 * end of the line. Returns the position after it; aborts on a bad escape. */
static const char *unescape(const char *p, bool quoted, char *out, size_t cap)
{
	size_t n = 0;

	for (;;) {
		char c = *p++;
		CHECK(c != '\0');            /* every line ends in a newline */
		CHECK(!quoted || c != '\n'); /* never a raw newline in a value */
		if ((!quoted && c == '\n') || (quoted && c == '"'))
			break;
		if (c == '\\') {
			char e = *p++;
			CHECK(e == '\\' || e == 'n' || (quoted && e == '"'));
			c = e == 'n' ? '\n' : e;
		}
		CHECK(n + 1 < cap);
		out[n++] = c;
	}
	out[n] = '\0';
	return p;
}

/* name{l="v",...} value\n: check the labels against `want` (NULL-ended
 * name/value pairs) and return the value text. */
static const char *sample(const char *line, const char *name, const char *const *want, char *value,
			  size_t cap)
{
	char got[2 * METRICS_LABEL_VALUE_MAX + 2];
	const char *p = line + strlen(name);
	size_t n;

	CHECK(!strncmp(line, name, strlen(name)));
	if (want && want[0]) {
		CHECK(*p++ == '{');
		for (int i = 0; want[i]; i += 2) {
			size_t ln = strlen(want[i]);
			CHECK(!strncmp(p, want[i], ln) && p[ln] == '=' && p[ln + 1] == '"');
			p = unescape(p + ln + 2, true, got, sizeof(got));
			CHECK(!strcmp(got, want[i + 1]));
			CHECK(*p == (want[i + 2] ? ',' : '}'));
			p++;
		}
	}
	CHECK(*p++ == ' ');
	n = strcspn(p, "\n");
	CHECK(p[n] == '\n' && n < cap);
	memcpy(value, p, n);
	value[n] = '\0';
	return p + n + 1;
}

static void same_double(const char *text, double want)
{
	char *end;
	double got;

	if (isnan(want)) {
		CHECK(!strcmp(text, "NaN"));
		return;
	}
	if (isinf(want)) {
		CHECK(!strcmp(text, want > 0 ? "+Inf" : "-Inf"));
		return;
	}
	got = strtod(text, &end);
	CHECK(*end == '\0' && memcmp(&got, &want, sizeof(got)) == 0);
}

static const char *next_line(const char *p)
{
	const char *nl = strchr(p, '\n');
	CHECK(nl);
	return nl + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const double bounds[] = { 0.5, 1 };
	const char *piece[3] = { "", "", "" };
	char *copy = malloc(size + 1), *help = malloc(size + 1), *page, value[64];
	size_t at = 0;
	double v = 1.5;
	struct metrics_registry *r;
	struct metrics_family *c = NULL, *g = NULL, *h = NULL;
	int err_c, err_g, err_h;

	static bool quiet;
	if (!quiet) {
		sg_log_set_level(SG_LOG_ERROR + 1); /* refusals are expected here */
		quiet = true;
	}
	CHECK(copy && help);
	memcpy(copy, data, size);
	copy[size] = '\0';
	for (int i = 0; i < 3 && at <= size; i++) {
		piece[i] = copy + at;
		at += strlen(copy + at) + 1;
	}
	if (at + sizeof(double) <= size)
		memcpy(&v, data + at, sizeof(double));

	r = metrics_registry_new();
	CHECK(r);
	err_c = metrics_family_add(r, METRICS_COUNTER,
				   &(struct metrics_spec){ .name = "fz_total", .help = piece[0] },
				   &c);
	CHECK(err_c == 0 || err_c == -EINVAL);
	CHECK(metrics_family_add(r, METRICS_GAUGE,
				 &(struct metrics_spec){ .name = "fz_gauge",
							 .help = "g",
							 .labels =
								 (const char *[]){ "a", "b", NULL },
							 .max_series = 1 },
				 &g) == 0);
	CHECK(metrics_family_add(r, METRICS_HISTOGRAM,
				 &(struct metrics_spec){ .name = "fz_seconds",
							 .help = "h",
							 .labels = (const char *[]){ "a", NULL },
							 .bounds = bounds,
							 .n_bounds = 2 },
				 &h) == 0);

	const char *vals[2] = { piece[1], piece[2] };
	err_g = metrics_gauge_set(g, vals, v);
	CHECK(err_g == 0 || err_g == -EINVAL);
	/* At the cap, a second distinct series is refused and counted. */
	if (err_g == 0 && strcmp(piece[1], "other")) {
		CHECK(metrics_gauge_set(g, (const char *[]){ "other", "x" }, 1) == -ENOSPC);
		CHECK(metrics_family_refused(g) == 1);
	}
	err_h = metrics_histogram_observe(h, vals, v);
	CHECK(err_h == 0 || err_h == -EINVAL);
	if (err_g == 0) /* its label value was fine: only a NaN is refused */
		CHECK((err_h == 0) == !isnan(v));

	page = metrics_render_string(r, NULL);
	CHECK(page);
	const char *p = page;
	if (err_c == 0) {
		CHECK(!strncmp(p, "# HELP fz_total ", 16));
		p = unescape(p + 16, false, help, size + 1);
		CHECK(!strcmp(help, piece[0]));
		CHECK(!strncmp(p, "# TYPE fz_total counter\n", 24));
		p = sample(p + 24, "fz_total", NULL, value, sizeof(value));
		CHECK(!strcmp(value, "0"));
	}
	if (err_g == 0) {
		CHECK(!strncmp(p, "# HELP fz_gauge g\n# TYPE fz_gauge gauge\n", 40));
		p = sample(p + 40, "fz_gauge",
			   (const char *[]){ "a", piece[1], "b", piece[2], NULL }, value,
			   sizeof(value));
		same_double(value, v);
	}
	if (err_h == 0) {
		const char *le[] = { "0.5", "1", "+Inf" };
		CHECK(!strncmp(p, "# HELP fz_seconds h\n", 20));
		p = next_line(next_line(p));
		for (int b = 0; b < 3; b++) {
			p = sample(p, "fz_seconds_bucket",
				   (const char *[]){ "a", piece[1], "le", le[b], NULL }, value,
				   sizeof(value));
			CHECK(!strcmp(value, (v <= bounds[b < 2 ? b : 1] || b == 2) ? "1" : "0"));
		}
		p = sample(p, "fz_seconds_sum", (const char *[]){ "a", piece[1], NULL }, value,
			   sizeof(value));
		same_double(value, 0.0 + v); /* the sum starts at +0: -0 becomes +0 */
		p = sample(p, "fz_seconds_count", (const char *[]){ "a", piece[1], NULL }, value,
			   sizeof(value));
		CHECK(!strcmp(value, "1"));
	}
	CHECK(*p == '\0'); /* nothing else on the page */

	free(page);
	metrics_registry_free(r);
	free(help);
	free(copy);
	return 0;
}
