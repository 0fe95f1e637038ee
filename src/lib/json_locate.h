/* Where a value sits in a JSON text. jansson reports positions only for
 * syntax errors, so policy validation, which works on the parsed tree,
 * uses this to point its errors at file:line:col. */
#ifndef SG_JSON_LOCATE_H
#define SG_JSON_LOCATE_H
#include <stdbool.h>
#include <stddef.h>

/* One step of a path into a document: an object member by key, or, when
 * key is NULL, an array element by index. */
struct json_step {
	const char *key;
	size_t index;
};

/* The byte offset in `text` of the value reached by `path` (`depth` steps;
 * depth 0 is the root value). With `at_key`, the offset of the opening
 * quote of the last step's key instead. -1 when the path is not in the
 * text or the text is not well-formed JSON. */
long json_locate(const char *text, size_t len, const struct json_step *path, int depth,
		 bool at_key);

/* The 1-based line and column of byte `offset`. Columns count characters
 * (UTF-8 sequences), not bytes, as jansson's syntax errors do. */
void json_line_col(const char *text, size_t len, size_t offset, int *line, int *col);

/* The offset of the opening quote of the JSON string whose closing quote
 * is at `end - 1`, or -1. Used to point at the start of a duplicate key,
 * which jansson reports by the position just after it. */
long json_string_start(const char *text, size_t len, size_t end);

#endif
