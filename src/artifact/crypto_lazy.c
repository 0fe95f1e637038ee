/* libcrypto's Ed25519 and BLAKE2b-512, loaded on first use (see
 * src/artifact/crypto_lazy.h). */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "crypto_lazy.h"
#include "lib/array_len.h"
#include "lib/dl_lazy.h"

/* The functions used, with OpenSSL's own prototypes. */
static struct {
	int (*init_crypto)(uint64_t, const OPENSSL_INIT_SETTINGS *);
	EVP_PKEY *(*new_raw_public_key)(int, ENGINE *, const unsigned char *, size_t);
	void (*pkey_free)(EVP_PKEY *);
	EVP_MD_CTX *(*md_ctx_new)(void);
	void (*md_ctx_free)(EVP_MD_CTX *);
	int (*digest_verify_init)(EVP_MD_CTX *, EVP_PKEY_CTX **, const EVP_MD *, ENGINE *,
				  EVP_PKEY *);
	int (*digest_verify)(EVP_MD_CTX *, const unsigned char *, size_t, const unsigned char *,
			     size_t);
	int (*digest)(const void *, size_t, unsigned char *, unsigned int *, const EVP_MD *,
		      ENGINE *);
	const EVP_MD *(*blake2b512)(void);
} c;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_err;
static char load_detail[256];

static void load(void)
{
	const struct dl_lazy_sym syms[] = {
		{ "OPENSSL_init_crypto", &c.init_crypto },
		{ "EVP_PKEY_new_raw_public_key", &c.new_raw_public_key },
		{ "EVP_PKEY_free", &c.pkey_free },
		{ "EVP_MD_CTX_new", &c.md_ctx_new },
		{ "EVP_MD_CTX_free", &c.md_ctx_free },
		{ "EVP_DigestVerifyInit", &c.digest_verify_init },
		{ "EVP_DigestVerify", &c.digest_verify },
		{ "EVP_Digest", &c.digest },
		{ "EVP_blake2b512", &c.blake2b512 },
	};
	int err = dl_lazy_open(CRYPTO_LAZY_SONAME, syms, ARRAY_LEN(syms), load_detail,
			       sizeof(load_detail));

	/* Before anything else of it runs: the node's openssl.cnf could load
	 * engines or providers into the executor; only the built-in ones
	 * verify. */
	if (!err && c.init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) != 1) {
		snprintf(load_detail, sizeof(load_detail), "%s did not initialise",
			 CRYPTO_LAZY_SONAME);
		err = -ELIBBAD;
	}
	load_err = err;
}

int crypto_lazy_load(char *detail, size_t len)
{
	pthread_once(&once, load);
	if (load_err && detail)
		snprintf(detail, len, "%s", load_detail);
	return load_err;
}

int crypto_ed25519_verify(const unsigned char *key, const unsigned char *sig, const void *msg,
			  size_t n)
{
	EVP_PKEY *pk;
	EVP_MD_CTX *md;
	int ok = -ENOMEM;

	if (crypto_lazy_load(NULL, 0))
		return load_err;
	pk = c.new_raw_public_key(EVP_PKEY_ED25519, NULL, key, CRYPTO_ED25519_KEY_LEN);
	md = c.md_ctx_new();
	if (pk && md)
		ok = c.digest_verify_init(md, NULL, NULL, NULL, pk) == 1 &&
		     c.digest_verify(md, sig, CRYPTO_ED25519_SIG_LEN, msg, n) == 1;
	c.md_ctx_free(md);
	c.pkey_free(pk);
	return ok;
}

int crypto_blake2b512(const void *data, size_t n, unsigned char *out)
{
	unsigned int len = 0;

	if (crypto_lazy_load(NULL, 0))
		return load_err;
	return c.digest(data, n, out, &len, c.blake2b512(), NULL) == 1 &&
			       len == CRYPTO_BLAKE2B512_LEN
		       ? 0
		       : -ENOMEM;
}
