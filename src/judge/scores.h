/* The schema and integrity gate on a reward program's stdout: only a JSON
 * array of exactly n finite numbers passes, with a precise reason for
 * everything else. Scores are never substituted: a batch either passes
 * whole or carries no scores at all. */
#ifndef SG_SCORES_H
#define SG_SCORES_H
#include <stdbool.h>
#include <stddef.h>

#define SCORES_DETAIL_MAX 256

/* Per-batch statistics for telemetry (the score-stream detectors). */
struct score_stats {
	size_t n;
	double mean;
	double variance; /* population variance; +inf if it overflows a double */
	bool constant;   /* n >= 2 and every score equal: a degenerate batch */
};

/* Validate `len` bytes of output against `expected` scores. The array may
 * be surrounded by JSON whitespace (space, tab, CR, LF) and nothing else.
 * Returns 0 with *scores set (malloc'd, `expected` doubles, NULL when
 * expected is 0), -EBADMSG with `detail` saying exactly what is wrong (a
 * tenant_bad_output), or -ENOMEM. */
int scores_parse(const char *buf, size_t len, size_t expected, double **scores, char *detail,
		 size_t detail_len);

void scores_stats(const double *scores, size_t n, struct score_stats *st);

#endif
