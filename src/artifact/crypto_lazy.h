/* Ed25519 and BLAKE2b-512, the two primitives of minisign signatures
 * (src/artifact/artifact_sign.c), from libcrypto loaded on first use.
 *
 * Linked in statically, OpenSSL's EVP layer brought its object, provider
 * and decoder tables into every sandguard process: 4.3 MB of the binary
 * and 16,600 of its 18,350 relocations, 0.3 ms of CPU and ~95 page faults
 * at each start (a warm `sandguard exec` client's included: it only hands
 * its run to the executor), for a check that only an executor with signed
 * artifacts makes (`perf stat ./build/sandguard version`, 2026-11-30:
 * 172 faults and 0.89 ms of CPU linked in, 74 and 0.63 loaded lazily). SHA-256 stays linked in
 * (src/lib/sha256.c): its part of libcrypto.a has no such tables.
 *
 * Loaded once per process, with the node's openssl.cnf ignored
 * (OPENSSL_INIT_NO_LOAD_CONFIG): a configured engine or provider must not
 * verify signatures in the executor. Without the library every check
 * fails with the reason, and the artifact is not run. */
#ifndef SG_CRYPTO_LAZY_H
#define SG_CRYPTO_LAZY_H
#include <stddef.h>

/* libcrypto's soname: the ABI <openssl/evp.h> describes (OpenSSL 3). */
#define CRYPTO_LAZY_SONAME "libcrypto.so.3"

#define CRYPTO_ED25519_KEY_LEN 32
#define CRYPTO_ED25519_SIG_LEN 64
#define CRYPTO_BLAKE2B512_LEN  64

/* Load it now (once per process). 0, or -errno with `detail`. */
int crypto_lazy_load(char *detail, size_t len);

/* Whether sig is key's Ed25519 signature of msg[0..n): 1 valid, 0 not,
 * -ENOMEM, or crypto_lazy_load()'s error. */
int crypto_ed25519_verify(const unsigned char *key, const unsigned char *sig, const void *msg,
			  size_t n);

/* BLAKE2b-512 of data[0..n) into out. 0, -ENOMEM, or crypto_lazy_load()'s
 * error. */
int crypto_blake2b512(const void *data, size_t n, unsigned char *out);

#endif
