/* The one UTF-8 validator (RFC 3629: no overlong forms, no surrogates,
 * nothing past U+10FFFF), for everything that must hand valid text to
 * jansson, Prometheus or a terminal. */
#ifndef SG_LIB_UTF8_H
#define SG_LIB_UTF8_H
#include <stdbool.h>
#include <stddef.h>

/* Length of the valid sequence at s (n > 0 bytes left), or 0 when s[0]
 * does not start one. NUL is a valid one-byte sequence: callers that pass
 * C strings on must refuse it themselves. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* Whether all n bytes are valid UTF-8. */
bool utf8_valid(const unsigned char *s, size_t n);

#endif
