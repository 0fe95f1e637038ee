/* The scanning hook (docs/policy.md "artifacts"): where the policy names
 * artifacts.scanner, each new digest is scanned once, before its first
 * use, by that command in a sandbox of the tenant (its limits, paths and
 * exec rules), as `scanner... ARTIFACT`: a file's checked bytes are a
 * scratch file, a directory is its path. Exit 0 admits the digest, another
 * exit refuses it; the verdict is kept by digest in the store
 * (<store>/scanned/<digest>), so no digest is scanned twice. A scanner
 * that does not finish (timeout, OOM, a kill) leaves no verdict: the batch
 * is refused as a platform error and the next one scans again. */
#ifndef SG_ARTIFACT_SCAN_H
#define SG_ARTIFACT_SCAN_H
#include <stdbool.h>
#include <stddef.h>
#include "lib/sha256.h"
#include "policy/policy.h"

/* 0 admitted; -EPERM refused (detail: the scanner's verdict); another
 * -errno: no verdict (detail). data/len: a file's bytes (NULL for a
 * directory, scanned at `path`). */
int artifact_scan(const struct sg_policy *p, const char *path, const char hex[SHA256_HEX],
		  const char *data, size_t len, char *detail, size_t dlen);

#endif
