/* SHA-256 (see src/lib/sha256.h). OpenSSL 3 marks the one-shot context
 * API deprecated in favour of EVP, whose providers would pull ~4 MB of
 * libcrypto into a binary that links it statically; the plain functions
 * pull only the digest (~30 KB). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sha256.h"

_Static_assert(sizeof(struct sha256) >= sizeof(SHA256_CTX), "struct sha256 too small");

#define READ_CHUNK (1u << 20)

void sha256_init(struct sha256 *s)
{
	SHA256_Init((SHA256_CTX *)s);
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	SHA256_Update((SHA256_CTX *)s, data, len);
}

void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN])
{
	SHA256_Final(out, (SHA256_CTX *)s);
}

void sha256_to_hex(const uint8_t digest[SHA256_LEN], char hex[SHA256_HEX])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < SHA256_LEN; i++) {
		hex[2 * i] = digits[digest[i] >> 4];
		hex[2 * i + 1] = digits[digest[i] & 15];
	}
	hex[SHA256_HEX - 1] = '\0';
}

/* Grows *buf to hold `need` bytes. */
static int reserve(char **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 64 << 10;
	char *grown;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	grown = realloc(*buf, n);
	if (!grown)
		return -ENOMEM;
	*buf = grown;
	*cap = n;
	return 0;
}

int sha256_fd(int fd, char hex[SHA256_HEX], char **copy, size_t *copy_len, size_t max_copy)
{
	size_t len = 0, cap = 0;
	char *buf = NULL, *chunk = NULL;
	uint8_t digest[SHA256_LEN];
	struct sha256 s;
	int err = 0;

	sha256_init(&s);
	if (!copy && !(chunk = malloc(READ_CHUNK)))
		return -ENOMEM;
	for (;;) {
		char *at;
		ssize_t n;

		if (copy) {
			if (len + READ_CHUNK > max_copy + 1 && len > max_copy) {
				err = -EFBIG;
				break;
			}
			if ((err = reserve(&buf, &cap, len + READ_CHUNK)))
				break;
			at = buf + len;
		} else {
			at = chunk;
		}
		n = read(fd, at, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		sha256_update(&s, at, (size_t)n);
		len += (size_t)n;
	}
	free(chunk);
	if (!err && copy && len > max_copy)
		err = -EFBIG;
	if (err) {
		free(buf);
		return err;
	}
	sha256_final(&s, digest);
	sha256_to_hex(digest, hex);
	if (copy) {
		*copy = buf ? buf : malloc(1);
		*copy_len = len;
		if (!*copy)
			return -ENOMEM;
	}
	return 0;
}

void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX])
{
	struct sha256 s;
	uint8_t d[SHA256_LEN];

	sha256_init(&s);
	sha256_update(&s, data, len);
	sha256_final(&s, d);
	sha256_to_hex(d, hex);
}

int sha256_file(const char *path, char hex[SHA256_HEX])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = sha256_fd(fd, hex, NULL, NULL, 0);
	close(fd);
	return err;
}
