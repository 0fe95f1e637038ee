/* The verified-digest cache and the store of verified files behind
 * src/exec/artifact.h (whose header comment gives the design). Private to
 * src/exec. */
#ifndef SG_ARTIFACT_STORE_H
#define SG_ARTIFACT_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include "lib/sha256.h"
#include "policy/policy.h"

/* $SANDGUARD_ARTIFACT_DIR, else <state>/artifacts. */
int artifact_store_dir(char *buf, size_t len);

/* <store>/<sub>/<name> into buf, <store>/<sub> made when missing. 0, or
 * -errno. */
int artifact_store_path(const char *sub, const char *name, char *buf, size_t len);

/* Opens `path` once: its digest, and (data set) the bytes that digest is
 * of, malloc'd: the store's copy on a cache hit, else what was read from
 * that one descriptor. use_cache false: hashed, neither read from nor
 * written to the cache (the benchmark's uncached figure). 0, or -errno
 * with `detail`. */
int artifact_file(const char *path, bool use_cache, char hex[SHA256_HEX], char **data, size_t *len,
		  char *detail, size_t dlen);

/* A directory's manifest digest (artifact.h), each file through the cache
 * when use_cache; the manifest's text too when `text` is set (malloc'd,
 * *text_len bytes). 0, or -errno with `detail` (a symlink, device or FIFO
 * inside it is -EINVAL: what it would show is not pinned). */
int artifact_dir(const char *path, bool use_cache, char hex[SHA256_HEX], char **text,
		 size_t *text_len, char *detail, size_t dlen);

/* Signature verdicts: a verified signature is noted in <store>/signed/
 * under a key that is the SHA-256 of everything the verdict depends on:
 * the digest of the bytes signed, the signature file's text, and the
 * policy's public keys (artifact_verdict_key()). A change to any of them
 * is another key, a miss, and a verification; only a valid signature is
 * noted. */
void artifact_verdict_key(const char digest[SHA256_HEX], const char *sig, size_t sig_len,
			  const char (*keys)[SG_PUBKEY_LEN], int n_keys, char key[SHA256_HEX]);
bool artifact_verdict_known(const char key[SHA256_HEX]);
void artifact_verdict_note(const char key[SHA256_HEX]);

#endif
