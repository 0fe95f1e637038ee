/* Output comparison for verifier mode, as LiveCodeBench grades stdio
 * problems (lcb_runner/evaluation/testing_util.py, grade_stdio):
 *
 *  1. Each side is stripped of leading and trailing whitespace as a whole,
 *     split on "\n", and every line is stripped of leading and trailing
 *     whitespace. So CRLF line endings, trailing spaces and trailing blank
 *     lines never matter; blank lines in the middle do.
 *  2. The line counts must be equal.
 *  3. Two lines match if they are byte-equal, or else if both split on
 *     whitespace into the same number of tokens that all parse as decimal
 *     numbers (Python's Decimal syntax) with pairwise equal values:
 *     "1.50" matches "1.5", "1e2" matches "100", "-0" matches "0", "Inf"
 *     matches "Infinity". NaN never matches (NaN != NaN); a token that is
 *     not a number fails the line.
 *
 * Whitespace is Python's str.isspace() set: ASCII \t \n \v \f \r, 0x1c-0x1f
 * and space, plus the Unicode spaces encoded in UTF-8 (U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
 * Differences from Python's Decimal, all on inputs no judge produces:
 * digits are ASCII only (Decimal also takes other Unicode digits), and an
 * exponent of magnitude 10^18 or more is "not a number" (Decimal's limit
 * depends on the sign and on the rest of the number). Underscores are
 * ignored as Decimal ignores them ("1_000" is 1000). */
#ifndef SG_LCB_H
#define SG_LCB_H
#include <stdbool.h>
#include <stddef.h>

/* True when `got` matches `want`. Otherwise `why` (if non-NULL) says
 * where: "expected 3 lines, got 2" or "line 2 differs" (1-based, after
 * stripping). The reason never quotes either text. */
bool lcb_match(const char *got, size_t got_len, const char *want, size_t want_len, char *why,
	       size_t why_len);

/* Python's Decimal equality of two tokens, as described above. Exposed
 * for tests. Returns false when either is not a number. */
bool lcb_decimal_equal(const char *a, size_t a_len, const char *b, size_t b_len);

#endif
