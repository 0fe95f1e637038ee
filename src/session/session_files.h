/* A session's files on the host side: put into its scratch, and the
 * scratch copied into a fork's (src/session/session_files.c). */
#ifndef SG_SESSION_FILES_H
#define SG_SESSION_FILES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write rel (scratch-relative, sb_scratch_path_valid()) under the scratch
 * directory `root` (an fd), owned by uid, replacing what is there; its
 * directories are made 0700. 0, or -errno (-EINVAL: a bad path, -ENOTDIR:
 * a component is not a directory, -ENOSPC: the scratch is full). */
int session_file_put(int root, const char *rel, const void *data, size_t len, unsigned mode,
		     uid_t uid);

/* Whether session_file_put()'s error is the request's or the tree's the
 * tenant made (a full scratch, a path through a file or a link, a bad
 * path), not the node's. */
bool session_file_err_tenants(int err);

struct session_copy_stats {
	uint64_t files, bytes, skipped;
};

/* Copy the tree under `from` into `to` (both scratch roots), every entry
 * owned by uid: regular files, directories and symlinks (as links, never
 * followed); FIFOs and sockets are skipped, hard links become copies, and
 * set-id bits are dropped. 0 or -errno. */
int session_copy_tree(const char *from, const char *to, uid_t uid, struct session_copy_stats *cs);

#endif
