/* The shape of a JSON text before it is parsed: how deep it nests and how
 * many values it holds. jansson parses up to 2,048 levels, but its
 * encoder and its free recurse with no bound at all, and a parsed tree
 * takes up to some 200 bytes a value (an empty object): a server that
 * parses a request on a small stack (a serve worker's 256 KiB) must know
 * both before it builds the tree. */
#ifndef SG_JSON_SHAPE_H
#define SG_JSON_SHAPE_H
#include <stddef.h>

struct json_shape {
	size_t depth;  /* the deepest nesting of arrays and objects (0: a scalar) */
	size_t values; /* arrays, objects, strings (keys too), numbers, literals */
};

/* One pass over `text`, strings and their escapes skipped, no recursion.
 * It does not check the syntax (the parser does): a malformed text gets
 * a shape all the same, never a read past `len`. */
void json_shape(const char *text, size_t len, struct json_shape *out);

#endif
