/* Python's == between two values given as JSON text, as a call-based
 * grader compares a function's return value with the expected one after
 * json.loads() of each (LiveCodeBench: `prediction == json.loads(output)`).
 *
 * What Python's == does on json.loads() results, and so what this does:
 *  - numbers compare by value across kinds: true == 1 == 1.0, false == 0,
 *    an integer and a float are equal only when the float is exactly that
 *    integer (2**53 + 1 != 9007199254740993.0, which loads as 2**53), two
 *    floats as doubles (0.1 + 0.2 != 0.3), NaN equals nothing, -0.0 == 0.
 *    Integers have any number of digits.
 *  - strings compare by their decoded characters ("\u00e9" == "é").
 *  - arrays element by element; objects by their key sets and values, the
 *    last of duplicate keys winning (as json.loads keeps it).
 *  - null equals only null; values of different kinds are not equal.
 *
 * The syntax is json.loads()'s: standard JSON plus NaN, Infinity and
 * -Infinity, whitespace around the value allowed, control characters in
 * strings refused. Nesting deeper than PY_JSON_DEPTH_MAX is refused:
 * Python 3.11's json.loads() with the default recursion limit raises
 * RecursionError at 997 levels when called at the top level, and at fewer
 * from a grader's frames, so no grader can load a deeper value; and each
 * level is a frame of the recursive parse, compare and free here, which
 * run on a serve worker's 256 KiB stack (SG_SERVE_WORKER_STACK). The bound
 * was 10,000: a call-based test whose expected output nested 5,000 deep
 * overflowed that stack and took serve down. */
#ifndef SG_PY_EQUAL_H
#define SG_PY_EQUAL_H
#include <stdbool.h>
#include <stddef.h>

#define PY_JSON_DEPTH_MAX 990

/* 0 when `text` is one JSON value json.loads() accepts, else -EINVAL
 * with `err` saying where ("at byte 7: expected a value"), or -ENOMEM. */
int py_json_check(const char *text, size_t len, char *err, size_t err_len);

/* 1 when a == b, 0 when not, -EINVAL when either is not JSON (checked
 * as above), -ENOMEM. */
int py_json_equal(const char *a, size_t a_len, const char *b, size_t b_len);

#endif
