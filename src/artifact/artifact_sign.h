/* Signed artifacts (docs/policy.md "artifacts"): where the policy names
 * public keys (artifacts.public_keys), every pinned file must come with a
 * minisign signature, <path>.minisig, by one of them, over the very bytes
 * that were checked and run. A pinned directory's signature,
 * <dir>.minisig, is over its manifest text (`sandguard artifact manifest
 * DIR`). Both minisign forms verify: the legacy one over the bytes, and
 * the default, prehashed one over their BLAKE2b-512; so does the global
 * signature over the trusted comment. */
#ifndef SG_ARTIFACT_SIGN_H
#define SG_ARTIFACT_SIGN_H
#include <stddef.h>
#include "policy/policy.h"

/* 0 when `sig_path` holds a valid signature of data[0..len) by one of p's
 * keys; -EPERM with `detail` (no signature, an unknown key, a bad
 * signature: the tenant's to fix); another -errno with `detail` (a
 * platform error). `what` names the artifact in the detail. */
int artifact_signature_check(const struct sg_policy *p, const char *what, const char *sig_path,
			     const void *data, size_t len, char *detail, size_t dlen);

/* The same in two steps, for a caller that keys a cache on the
 * signature's text (src/exec/artifact_store.h): its file read whole
 * (NUL-terminated, malloc'd; -EPERM with `detail` when there is none),
 * then that text verified. */
int artifact_signature_read(const char *what, const char *sig_path, char **text, size_t *n,
			    char *detail, size_t dlen);
int artifact_signature_verify(const struct sg_policy *p, const char *what, const char *sig_text,
			      const void *data, size_t len, char *detail, size_t dlen);

#endif
