/* Revoked artifacts: the file <policy dir>/revoked-artifacts, one line
 * per revocation ("<sha256> <tenant> <unix time> <reason>"). It lives in
 * the policy directory so that it travels as the policies do (the
 * ConfigMap): every executor that reads that directory refuses the
 * digest, whatever node or state directory it has. The executor reads it
 * before each attempt of a pinned program (src/exec/artifact.c). */
#ifndef SG_ARTIFACT_REVOKED_H
#define SG_ARTIFACT_REVOKED_H
#include <stddef.h>
#include "lib/sha256.h"
#include "policy/policy.h"

#define ARTIFACT_REVOKED_FILE "revoked-artifacts"
#define ARTIFACT_REASON_MAX   256

struct artifact_revocation {
	char sha256[SHA256_HEX];
	char tenant[SG_TENANT_MAX];
	long long at; /* unix seconds */
	char reason[ARTIFACT_REASON_MAX];
};

/* The policy directory p came from: its source file's directory, or the
 * default one (policy_dir_default()) for the embedded default. */
void artifact_policy_dir(const struct sg_policy *p, char *buf, size_t len);

/* 1 when `tenant`'s `sha256` is revoked (*r filled in when r is set), 0
 * when not, -errno when the list cannot be read or is malformed (a
 * platform error: never read as "nothing is revoked"). */
int artifact_revoked_find(const char *policy_dir, const char *tenant, const char *sha256,
			  struct artifact_revocation *r);

/* Add (-EEXIST: revoked already, the first reason kept) or remove
 * (-ENOENT: not revoked) one revocation, under an flock of the policy
 * directory, by writing a new file and renaming it over the old one.
 * 0, or -errno with `detail` set. */
int artifact_revoke(const char *policy_dir, const struct artifact_revocation *r, char *detail,
		    size_t len);
int artifact_unrevoke(const char *policy_dir, const char *tenant, const char *sha256, char *detail,
		      size_t len);

/* Calls fn for each revocation, in file order; stops at fn's first
 * non-zero return and returns it. 0, or -errno. */
int artifact_revoked_each(const char *policy_dir,
			  int (*fn)(const struct artifact_revocation *r, void *arg), void *arg);

#endif
