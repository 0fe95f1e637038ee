/* libFuzzer target for the schema gate (src/exec/scores.c).
 *
 * The first input byte picks the expected count (0..7); the rest is the
 * reward program's stdout. Properties, checked against jansson as an
 * independent reader:
 *  - accepted: exactly n finite scores, an empty detail, and jansson reads
 *    the same text as an array of the same n values (when jansson can read
 *    it at all: it refuses integers past 64 bits, which the gate accepts,
 *    and it is not asked about text with NUL bytes, which it misreads);
 *  - jansson reads an array of exactly n finite numbers: the gate accepts;
 *  - refused: -EBADMSG, no scores, and a detail that is non-empty, bounded
 *    and printable ASCII (it may quote tenant bytes, never raw ones).
 *
 * Build and run (scripts/fuzz.sh does the same, bounded):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Iinclude -Isrc \
 *     tests/fuzz/fuzz_scores.c src/exec/scores.c -ljansson -lm -o build-fuzz/fuzz_scores
 *   build-fuzz/fuzz_scores -max_total_time=60 tests/fuzz/corpus/scores
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "judge/scores.h"

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz_scores: check failed: %s (line %d)\n", #cond, \
				__LINE__);                                                  \
			abort();                                                            \
		}                                                                           \
	} while (0)

/* jansson's reading: 1 when it is an array of exactly n finite numbers
 * (values in v), 0 when it is something else, -1 when jansson refused it. */
static int jansson_scores(const char *text, size_t len, size_t n, double *v)
{
	json_error_t e;
	json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, &e), *x;
	size_t i;
	int ret = 1;

	if (!doc)
		return -1;
	if (!json_is_array(doc) || json_array_size(doc) != n)
		ret = 0;
	json_array_foreach(doc, i, x)
	{
		if (ret != 1)
			break;
		if (!json_is_number(x) || !isfinite(json_number_value(x)))
			ret = 0;
		else if (i < n)
			v[i] = json_number_value(x);
	}
	json_decref(doc);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char detail[SCORES_DETAIL_MAX];
	double *scores = NULL, ref[8];
	const char *text = (const char *)data + 1;
	size_t n, len;
	int ret, theirs;

	if (size < 1)
		return 0;
	n = data[0] % 8;
	len = size - 1;
	ret = scores_parse(text, len, n, &scores, detail, sizeof(detail));
	/* jansson reads a NUL byte as the end of a value; the gate refuses it. */
	theirs = memchr(text, '\0', len) ? -1 : jansson_scores(text, len, n, ref);
	if (ret == 0) {
		CHECK(detail[0] == '\0');
		CHECK(n == 0 || scores != NULL);
		for (size_t i = 0; i < n; i++)
			CHECK(isfinite(scores[i]));
		CHECK(theirs != 0);
		if (theirs == 1)
			for (size_t i = 0; i < n; i++)
				CHECK(scores[i] == ref[i]);
		free(scores);
		return 0;
	}
	CHECK(ret == -EBADMSG);
	CHECK(scores == NULL);
	CHECK(theirs != 1);
	size_t dl = strnlen(detail, sizeof(detail));
	CHECK(dl > 0 && dl < sizeof(detail));
	for (size_t i = 0; i < dl; i++)
		CHECK(detail[i] >= 0x20 && detail[i] < 0x7f);
	return 0;
}
