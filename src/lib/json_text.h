/* JSON strings from bytes we do not control (tenant stdout/stderr, error
 * text): jansson refuses invalid UTF-8, so it is repaired first. */
#ifndef SG_JSON_TEXT_H
#define SG_JSON_TEXT_H
#include <jansson.h>
#include <stddef.h>

/* A JSON string of `n` bytes with every invalid UTF-8 sequence (including
 * NUL and a character cut at the end) replaced by U+FFFD. NULL on ENOMEM. */
json_t *json_string_lossy(const char *s, size_t n);

/* Like json_string_lossy, but at most `cap` bytes of input: when longer,
 * the first and last cap/2 bytes joined by "\n...[N bytes omitted]...\n". */
json_t *json_excerpt(const char *s, size_t n, size_t cap);

/* A JSON real, or null when x is not finite (jansson refuses those). */
json_t *json_real_or_null(double x);

#endif
