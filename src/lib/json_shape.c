/* The nesting and the number of values of a JSON text (json_shape.h). */
#include <stdbool.h>
#include "json_shape.h"

/* Where a number or a literal (true, false, null, and json.loads()'s NaN
 * and Infinity) can start. */
static bool starts_scalar(char c)
{
	return c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n' || c == 'N' ||
	       c == 'I';
}

/* Where a number or a literal ends. */
static bool ends_scalar(char c)
{
	return c == ',' || c == ':' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\n' ||
	       c == '\r' || c == '"' || c == '[' || c == '{';
}

void json_shape(const char *text, size_t len, struct json_shape *out)
{
	size_t depth = 0, i = 0;

	out->depth = out->values = 0;
	while (i < len) {
		char c = text[i];

		if (c == '"') {
			out->values++;
			for (i++; i < len && text[i] != '"'; i++)
				if (text[i] == '\\')
					i++; /* the escaped character (a \uXXXX's digits are plain) */
			i++;
		} else if (c == '[' || c == '{') {
			out->values++;
			if (++depth > out->depth)
				out->depth = depth;
			i++;
		} else if (c == ']' || c == '}') {
			if (depth)
				depth--;
			i++;
		} else if (starts_scalar(c)) {
			out->values++;
			while (i < len && !ends_scalar(text[i]))
				i++;
		} else {
			i++;
		}
	}
}
