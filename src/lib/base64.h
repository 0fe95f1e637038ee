/* Base64 for the HTTP API's file contents (SandboxFusion's "files"):
 * RFC 4648 section 4, the standard alphabet with '=' padding.
 *
 * The decoder is strict, because a file that decodes "mostly" would be
 * written into the scratch silently wrong: the length must be a multiple
 * of 4, only alphabet characters, '=' only as the last one or two
 * characters, and the bits that padding leaves over must be zero (one text
 * per byte string). No whitespace, no line breaks, no URL-safe alphabet. */
#ifndef SG_BASE64_H
#define SG_BASE64_H
#include <stddef.h>

/* Characters base64_encode() writes for n bytes (without the NUL). */
size_t base64_encoded_len(size_t n);

/* A malloc'd, NUL-terminated encoding of data[0..n); *out_len (may be
 * NULL) gets its length. NULL when out of memory. */
char *base64_encode(const void *data, size_t n, size_t *out_len);

/* Decode text[0..len) into a malloc'd buffer (NUL-terminated for the
 * caller's convenience, not counted in *out_len). Returns 0, -ENOMEM, or
 * -EINVAL with a one-line reason in `why` ("invalid character '*' at
 * offset 5", "length 7 is not a multiple of 4", ...). */
int base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len, char *why,
		  size_t why_len);

#endif
