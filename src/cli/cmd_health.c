/* sandguard health replay: the score-stream detectors over recorded score
 * series (src/health/health_replay.h), with the thresholds of a policy
 * file or the defaults: how often each fires on healthy batches and how
 * many batches after a break it fires. docs/oncall.md publishes the
 * --summary of the shipped series (tests/data/health/). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "lib/fs_util.h"
#include "policy/policy.h"
#include "health/health_replay.h"

#define SERIES_MAX (256u << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard health replay [--policy FILE] [--json | --summary] SERIES...\n"
		"\n"
		"Runs the score-stream detectors over each SERIES (JSON lines, one batch each:\n"
		"{\"scores\": [...]}, {\"n\", \"mean\", \"var\"} or {\"invalid\": true}; \"broken\": true\n"
		"marks the batches where the series is broken) with the health thresholds of the\n"
		"policy FILE (default: the built-in defaults). Per series and detector: firings,\n"
		"firings on healthy batches (false positives) and the lag in batches from the\n"
		"first broken batch to the first firing. --summary: one table over all series.\n");
}

static int usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "sandguard health: %s%s%s\n(see 'sandguard health --help')\n", msg,
		arg ? ": " : "", arg ? arg : "");
	return SG_EXIT_USAGE;
}

static void thresholds(const struct sg_health *h, enum health_detector d, char *buf, size_t len)
{
	switch (d) {
	case HEALTH_CONSTANT:
		snprintf(buf, len, "window %u, constant_rate %g", h->window, h->constant_rate);
		break;
	case HEALTH_INVALID:
		snprintf(buf, len, "window %u, invalid_rate %g", h->window, h->invalid_rate);
		break;
	case HEALTH_DEAD:
		snprintf(buf, len, "window %u, dead_windows %u, dead_epsilon %g", h->window,
			 h->dead_windows, h->dead_epsilon);
		break;
	case HEALTH_EXPLOSION:
	case HEALTH_COLLAPSE:
		snprintf(buf, len, "band_window %u, band_k %g, band_min_iqr %g", h->band_window,
			 h->band_k, h->band_min_iqr);
		break;
	default:
		snprintf(buf, len, "window %u, first finding", h->window);
	}
}

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static json_t *figures_json(const struct replay_result *r, enum replay_scope s)
{
	json_t *o = json_object();

	for (int d = 0; d < HEALTH__COUNT; d++) {
		const struct replay_figures *f = &r->fig[s][d];
		int64_t lag = replay_lag(r, s, d);

		json_object_set_new(
			o, health_detector_name(d),
			json_pack("{s:I, s:I, s:f, s:o}", "fired", (json_int_t)f->fired,
				  "fired_healthy", (json_int_t)f->fired_healthy, "fp_rate",
				  r->healthy ? (double)f->fired_healthy / (double)r->healthy : 0.0,
				  "lag", lag >= 0 ? json_integer(lag) : json_null()));
	}
	return o;
}

static void print_series(const char *path, const struct replay_result *r)
{
	char brk[64] = "no break";

	if (r->first_broken >= 0)
		snprintf(brk, sizeof(brk), "broken from batch %" PRId64, r->first_broken);
	printf("%s: %" PRIu64 " batches, %" PRIu64 " healthy, %s, %zu run%s\n", path, r->batches,
	       r->healthy, brk, r->runs, r->runs == 1 ? "" : "s");
	printf("  %-15s %-6s %7s %10s %8s %5s\n", "DETECTOR", "SCOPE", "FIRED", "ON HEALTHY",
	       "FP RATE", "LAG");
	for (int s = 0; s < REPLAY__SCOPES; s++)
		for (int d = 0; d < HEALTH__COUNT; d++) {
			const struct replay_figures *f = &r->fig[s][d];
			int64_t lag = replay_lag(r, s, d);
			char l[24] = "-";

			if (s == REPLAY_RUN && !r->runs)
				continue;
			if (lag >= 0)
				snprintf(l, sizeof(l), "%" PRId64, lag);
			printf("  %-15s %-6s %7" PRIu64 " %10" PRIu64 " %8.4f %5s\n",
			       health_detector_name(d), s == REPLAY_TENANT ? "tenant" : "run",
			       f->fired, f->fired_healthy,
			       r->healthy ? (double)f->fired_healthy / (double)r->healthy : 0.0, l);
		}
}

/* One line per detector over every series, tenant scope: the table
 * docs/oncall.md shows. */
static void print_summary(const struct sg_health *h, char **paths, const struct replay_result *res,
			  int n)
{
	printf("%-15s %-46s %-28s %s\n", "DETECTOR", "THRESHOLDS", "FALSE POSITIVES (HEALTHY)",
	       "LAG IN BATCHES (SERIES MEANT TO TRIP IT)");
	for (int d = 0; d < HEALTH__COUNT; d++) {
		uint64_t healthy = 0, fp = 0;
		char th[128], fps[64], lags[512] = "";
		size_t used = 0;

		for (int i = 0; i < n; i++) {
			int64_t lag = replay_lag(&res[i], REPLAY_TENANT, d);

			healthy += res[i].healthy;
			fp += res[i].fig[REPLAY_TENANT][d].fired_healthy;
			if (!(res[i].expect & HEALTH_BIT(d)) || used >= sizeof(lags))
				continue;
			if (lag >= 0)
				used += (size_t)snprintf(lags + used, sizeof(lags) - used,
							 "%s%s %" PRId64, used ? ", " : "",
							 base(paths[i]), lag);
			else
				used += (size_t)snprintf(lags + used, sizeof(lags) - used,
							 "%s%s missed", used ? ", " : "",
							 base(paths[i]));
		}
		thresholds(h, d, th, sizeof(th));
		snprintf(fps, sizeof(fps), "%" PRIu64 " of %" PRIu64 " (%.4f)", fp, healthy,
			 healthy ? (double)fp / (double)healthy : 0.0);
		printf("%-15s %-46s %-28s %s\n", health_detector_name(d), th, fps,
		       used ? lags : "-");
	}
}

static int replay(int argc, char **argv)
{
	struct sg_policy *pol = calloc(1, sizeof(*pol));
	struct replay_result *res = NULL;
	bool as_json = false, summary = false;
	int i = 1, n = 0, ret = SG_EXIT_OK;
	json_t *all = NULL;

	if (!pol)
		return SG_EXIT_PLATFORM;
	policy_defaults(pol);
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		struct sg_policy_error pe;
		char msg[1024];

		if (!strcmp(argv[i], "--json")) {
			as_json = true;
		} else if (!strcmp(argv[i], "--summary")) {
			summary = true;
		} else if (!strcmp(argv[i], "--policy") && i + 1 < argc) {
			if (policy_load_file(argv[++i], pol, &pe)) {
				policy_error_format(&pe, msg, sizeof(msg));
				fprintf(stderr, "sandguard health: %s\n", msg);
				free(pol);
				return SG_EXIT_USAGE;
			}
		} else {
			free(pol);
			return usage_error("unknown option", argv[i]);
		}
	}
	if (i == argc || (as_json && summary)) {
		free(pol);
		return usage_error(i == argc ? "replay needs at least one series file"
					     : "--json and --summary exclude each other",
				   NULL);
	}
	res = calloc(argc > i ? (size_t)(argc - i) : 1, sizeof(*res));
	all = json_array();
	for (int k = i; k < argc && res && all && ret == SG_EXIT_OK; k++, n++) {
		char *text = NULL, err[512];
		size_t len = 0;
		int e = fs_read_all(argv[k], SERIES_MAX, &text, &len);

		if (e) {
			fprintf(stderr, "sandguard health: %s: cannot read: %s\n", argv[k],
				strerror(-e));
			ret = SG_EXIT_USAGE;
		} else if ((e = health_replay(text, len, argv[k], &pol->health, &res[n], err,
					      sizeof(err)))) {
			fprintf(stderr, "sandguard health: %s\n",
				e == -ENOMEM ? "out of memory" : err);
			ret = e == -ENOMEM ? SG_EXIT_PLATFORM : SG_EXIT_USAGE;
		} else if (as_json) {
			json_array_append_new(all,
					      json_pack("{s:s, s:I, s:I, s:o, s:I, s:o, s:o}",
							"series", argv[k], "batches",
							(json_int_t)res[n].batches, "healthy",
							(json_int_t)res[n].healthy, "first_broken",
							res[n].first_broken >= 0
								? json_integer(res[n].first_broken)
								: json_null(),
							"runs", (json_int_t)res[n].runs, "tenant",
							figures_json(&res[n], REPLAY_TENANT), "run",
							figures_json(&res[n], REPLAY_RUN)));
		} else if (!summary) {
			print_series(argv[k], &res[n]);
		}
		free(text);
	}
	if (!res || !all)
		ret = SG_EXIT_PLATFORM;
	else if (ret == SG_EXIT_OK && as_json)
		json_dumpf(all, stdout, JSON_INDENT(2)), putchar('\n');
	else if (ret == SG_EXIT_OK && summary)
		print_summary(&pol->health, argv + i, res, n);
	json_decref(all);
	free(res);
	free(pol);
	return ret;
}

int cmd_health(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return SG_EXIT_OK;
	}
	if (argc < 2 || strcmp(argv[1], "replay"))
		return usage_error("expected 'replay'", argc > 1 ? argv[1] : NULL);
	if (argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
		usage(stdout);
		return SG_EXIT_OK;
	}
	return replay(argc - 1, argv + 1);
}
