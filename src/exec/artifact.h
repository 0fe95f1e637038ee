/* Pinned reward artifacts (docs/policy.md "artifacts"): before a batch's
 * first attempt, every pin of the tenant's policy is checked, and a pinned
 * file the command names is handed to the sandbox as the bytes that were
 * checked, never read again by path.
 *
 *  - A file is opened once; its bytes are read from that descriptor,
 *    hashed as they are read, and kept. The sandbox gets them as a file in
 *    its scratch (struct sandbox_file), and the command names that copy:
 *    a swap of the path after the open changes nothing that runs.
 *  - A verified file is also kept in the store, <state>/artifacts/sha256/
 *    <digest> (root's, 0700), and its (device, inode, size, mtime, ctime)
 *    are noted in <state>/artifacts/index/: a later run whose open file
 *    has the same five reads the store's copy instead of hashing. Any
 *    write to the file changes its mtime and ctime, and ctime cannot be
 *    set from user space, so a changed file misses the cache. A file whose
 *    ctime is within ARTIFACT_RACY_S of the check is not noted (a write in
 *    the same clock tick would keep the five): it is hashed again.
 *  - A verified signature's verdict is kept (artifact_store.h), keyed by
 *    the digest, the signature's text and the policy's keys; the store
 *    is bounded (src/artifact/artifact_bound.h).
 *  - A directory is pinned by its manifest: one "<sha256>  <relative
 *    path>\n" line per regular file, in byte order of the paths (what
 *    `sha256sum` prints), hashed. Its files are checked in place, each
 *    cached as above; the sandbox reads them through the policy's
 *    read_only paths, by path.
 *  - A pinned .py file the command does not name is a module: kept
 *    likewise and handed over under its own name, next to the pinned
 *    script's copy, where the script's import finds it.
 *  - A tenant that pins runs cold: a warm parent would import its
 *    preloads and read its script by path, after the check.
 *  - Every verified digest is looked up in the revocation list
 *    (artifact_revoked.h), before the first attempt and again before
 *    each retry. */
#ifndef SG_ARTIFACT_H
#define SG_ARTIFACT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "exec.h"
#include "lib/sha256.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "node/tenant_state.h"

#define ARTIFACT_RACY_S   2           /* seconds */
#define ARTIFACT_FILE_MAX (64u << 20) /* a pinned file handed to the sandbox */
#define ARTIFACT_ARGS     (SG_POLICY_REWARD_ARGS + 64)

/* What a batch runs once its pins are checked. */
struct artifact_run {
	/* The command to run: the caller's with each pinned file replaced
	 * by its copy in the scratch; NULL when nothing was replaced. */
	char **argv;
	struct sandbox_file files[SG_ARTIFACT_PINS];
	size_t n_files;
	char *names[SG_ARTIFACT_PINS]; /* owned: files[i].path */
	char *data[SG_ARTIFACT_PINS];  /* owned: files[i].data */
	size_t lens[SG_ARTIFACT_PINS]; /* data[i]'s */
	size_t shift;                  /* words a #! line put before the command's own */
	char *shebang;                 /* owned: a #! line's words, when argv[0] was pinned */
	/* The digests checked, for the revocation check before a retry. */
	char digests[SG_ARTIFACT_PINS][SHA256_HEX];
	char paths[SG_ARTIFACT_PINS][SG_POLICY_PATHLEN];
	size_t n_digests;
};

/* Checks p's pins against the command argv (NULL-terminated). 0 when the
 * batch may run (*a set; a policy without pins leaves it empty at no
 * cost); -EPERM when the tenant's artifact is refused (a digest mismatch,
 * a revoked digest, an unpinned file where pins are required): `detail`
 * says which, with the expected and found digests; another -errno is a
 * platform error (the store or the revocation list cannot be used), with
 * `detail`. */
int artifact_prepare(const struct sg_policy *p, char *const *argv, struct artifact_run *a,
		     char *detail, size_t len);

/* Before a retry: whether any digest a checked is revoked now. 0, -EPERM
 * (revoked: detail names the revocation and its reason), or -errno. */
int artifact_recheck(const struct sg_policy *p, const struct artifact_run *a, char *detail,
		     size_t len);

void artifact_run_free(struct artifact_run *a);

/* The digest of a file, or of a directory's manifest, through the cache
 * when use_cache. 0, or -errno with `detail`. */
int artifact_digest_path(const char *path, bool use_cache, char hex[SHA256_HEX], char *detail,
			 size_t len);

/* A directory's manifest text (what its digest and its signature are
 * over), malloc'd. 0, or -errno with `detail`. */
int artifact_manifest(const char *path, char **text, size_t *n, char *detail, size_t len);

/* Batch mode's use of the above (exec_batch.c). Before the first
 * attempt: true when the batch's artifacts are refused; the refusal is
 * then booked (attempt 0, cause tenant_policy_violation, or
 * platform_error when the check itself failed), *slot released and *res
 * filled in, and nothing runs. false: *a holds the checked artifacts. */
bool exec_artifacts_refused(const struct exec_ctx *ctx, const char *batch_id,
			    struct artifact_run *a, struct tenant_slot *slot, uint64_t start_ms,
			    struct exec_result *res);
/* The spec runs the checked bytes: a's command and files, cold when the
 * policy pins anything. */
void exec_artifacts_apply(const struct artifact_run *a, struct sandbox_spec *spec);
/* Before a retry: 0 when it may run; -EPERM when a digest was revoked
 * since the check, another -errno when the list is unreadable: either
 * way it must not run, and the reason is appended to `detail`. */
int exec_artifacts_revoked(const struct exec_ctx *ctx, const struct artifact_run *a, char *detail,
			   size_t len);

#endif
