/* SHA-256, over a buffer, a file or an open fd: the digests that must not
 * collide by accident or by design (the /run_code build cache's keys and
 * contents, pinned artifacts). The compression function is OpenSSL's
 * (linked statically from libcrypto.a: the binary still needs libc
 * alone), which uses the CPU's SHA extensions where it has them: a pinned
 * model directory of a few GiB is hashed at the disk's speed rather than
 * at ~0.4 GB/s. */
#ifndef SG_SHA256_H
#define SG_SHA256_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHA256_LEN   32
#define SHA256_BYTES SHA256_LEN
#define SHA256_HEX   65 /* 64 lowercase hex digits and the NUL */

struct sha256 {
	uint64_t state[14]; /* OpenSSL's SHA256_CTX, kept opaque here (112 bytes) */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);

/* A digest as 64 lowercase hex digits. */
void sha256_to_hex(const uint8_t digest[SHA256_LEN], char hex[SHA256_HEX]);
/* The digest of one buffer, as hex. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX]);
/* The digest of a file's contents (hex). 0, or -errno. */
int sha256_file(const char *path, char hex[SHA256_HEX]);

/* The digest of everything read from fd from its current offset to EOF,
 * in 1 MiB reads. When `copy` is set, the bytes read are also returned in
 * *copy (malloc'd, *copy_len bytes), but only up to max_copy bytes: a
 * longer file is -EFBIG. 0, or -errno. */
int sha256_fd(int fd, char hex[SHA256_HEX], char **copy, size_t *copy_len, size_t max_copy);

#endif
