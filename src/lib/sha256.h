/* SHA-256 (FIPS 180-4), for digests that must not collide by accident or
 * by design: the keys and contents of the /run_code build cache. The
 * binary links libc alone, hence our own. */
#ifndef SG_SHA256_H
#define SG_SHA256_H
#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32
#define SHA256_HEX   (2 * SHA256_BYTES + 1)

struct sha256 {
	uint32_t h[8];
	uint64_t bytes; /* hashed so far */
	uint8_t block[64];
	size_t used; /* bytes of block filled */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_BYTES]);
/* The digest of one buffer, as 64 lowercase hex digits. */
void sha256_hex(const void *data, size_t len, char out[SHA256_HEX]);
void sha256_to_hex(const uint8_t d[SHA256_BYTES], char out[SHA256_HEX]);
/* The digest of a file's contents (hex). 0, or -errno. */
int sha256_file(const char *path, char out[SHA256_HEX]);

#endif
