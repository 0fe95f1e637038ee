/* Writing JSON text straight into a caller's buffer, with no object tree
 * and no allocation: for lines whose shape is fixed (the agent's event
 * lines), where building a jansson tree per line cost most of the agent's
 * CPU. The output is byte for byte what jansson's compact dump writes for
 * the same values: strings escaped the same way ("\\" "\"" \b \f \n \r \t,
 * other control characters as \u00XX with capital hex, '/' and non-ASCII
 * kept), integers in decimal, reals as "%.<precision>g" with ".0" added
 * when that looks like an integer.
 *
 * Every call appends; once something does not fit, the writer remembers
 * it and json_out_finish() says -ENOSPC, so a caller writes a whole line
 * and checks once. */
#ifndef SG_LIB_JSON_OUT_H
#define SG_LIB_JSON_OUT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_out {
	char *buf;
	size_t cap; /* bytes of buf, the terminating NUL included */
	size_t len;
	bool full; /* something did not fit */
};

void json_out_init(struct json_out *o, char *buf, size_t cap);

/* Text that is already JSON (keys with their quotes, punctuation). */
void json_out_raw(struct json_out *o, const char *text, size_t n);
#define json_out_lit(o, literal) json_out_raw((o), literal, sizeof(literal) - 1)

/* A JSON string of n untrusted bytes: valid UTF-8 is kept, every other
 * byte becomes the four characters \xNN (lower-case hex; written \\xNN
 * once escaped), so the byte values stay visible and the text is valid. */
void json_out_bytes(struct json_out *o, const char *s, size_t n);

/* A NUL-terminated string, or null for NULL. */
void json_out_str_or_null(struct json_out *o, const char *s);

void json_out_uint(struct json_out *o, uint64_t v);
void json_out_int(struct json_out *o, int64_t v);
void json_out_bool(struct json_out *o, bool v);
void json_out_null(struct json_out *o);

/* A finite real as jansson writes it with JSON_REAL_PRECISION(precision). */
void json_out_real(struct json_out *o, double v, int precision);

/* NUL-terminates. Returns the length (without the NUL), or -ENOSPC when
 * something did not fit (the buffer then holds a truncated text). */
int json_out_finish(struct json_out *o);

#endif
