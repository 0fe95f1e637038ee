/* Sandbox scratch directories: <scratch_root>/<tenant>/<id>.
 * The tenant directory is root-owned 0711, so a sandbox can reach its own
 * scratch but cannot list its neighbours'; the scratch itself is 0700 and
 * owned by the sandbox's slot uid. Everything that touches a scratch after
 * tenant code ran in it goes through directory fds with O_NOFOLLOW, so a
 * symlink planted by the tenant never leads root out of the scratch. */
#ifndef SG_SANDBOX_SCRATCH_H
#define SG_SANDBOX_SCRATCH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "sandbox.h"

/* The sandbox's /tmp, /dev/shm and /mnt: directories of the scratch
 * tmpfs, so that everything a sandbox may write is on one superblock.
 * /mnt: SandboxFusion's programs write there (its root is an overlay
 * they may write anywhere in), and its clients fetch from there. */
#define SB_SCRATCH_TMP ".tmp"
#define SB_SCRATCH_SHM ".shm"
#define SB_SCRATCH_MNT ".mnt"

struct sb_scratch_spec {
	const char *root, *tenant, *id;
	uid_t uid;
	gid_t gid;
	uint64_t size_mb, inodes; /* the tmpfs's size= and nr_inodes= */
	bool exec;                /* no noexec (compiled languages) */
};

/* Create the scratch: a tmpfs of its own mounted on <root>/<tenant>/<id>
 * (the root and tenant directories are made if missing), owned by the
 * slot uid, with the .tmp and .shm directories in it. Puts its canonical
 * path in `path`. Returns 0, -EEXIST when the id is taken (pick another),
 * or -errno with `detail` filled in. */
int sb_scratch_create(const struct sb_scratch_spec *sp, char *path, size_t plen, char *detail,
		      size_t dlen);

/* What the sandbox's root build made inside a scratch (mount points below
 * its /tmp or /dev/shm), by path relative to the scratch and identity. */
#define SB_SCRATCH_KEEP 32

struct sb_scratch_kept {
	char rel[PATH_MAX];
	ino_t ino;
};

/* What a scratch is made of, to put it back between runs: the
 * identities of its root and of its .tmp, .shm and .mnt (the sandbox's
 * /tmp, /dev/shm and /mnt are binds of those very directories), and what
 * the root build made in them. */
struct sb_scratch_marks {
	dev_t dev;
	ino_t root, tmp, shm, mnt;
	uid_t uid;
	gid_t gid;
	struct timespec times[2]; /* the root's atime and mtime when made */
	struct sb_scratch_kept kept[SB_SCRATCH_KEEP];
	size_t n_kept;
};

/* Note a fresh scratch's marks. 0 or -errno. */
int sb_scratch_mark(const char *path, uid_t uid, gid_t gid, struct sb_scratch_marks *m);

/* Note what the root build made in it (once it is built): rel[] as from
 * sb_root_in_scratch(). 0, -E2BIG for more than SB_SCRATCH_KEEP, -errno. */
int sb_scratch_mark_kept(const char *path, char (*rel)[PATH_MAX], size_t n,
			 struct sb_scratch_marks *m);

/* Put a scratch back to what sb_scratch_create() made, for the sandbox's
 * next run (its processes are gone): everything the run left removed but
 * what the root build made (m->kept), its root, .tmp and .shm owned by the
 * slot, 0700, without extended attributes. Walks with directory fds, never
 * following a symlink. -EBUSY (with `detail`) when the scratch is not as
 * it was made (.tmp, .shm or a kept entry replaced or gone) or its tree is
 * deeper than SB_SCRATCH_RESET_DEPTH: then it is not reused (a fresh one
 * is made); other -errno likewise. */
#define SB_SCRATCH_RESET_DEPTH 64
int sb_scratch_reset(const char *path, const struct sb_scratch_marks *m, char *detail, size_t dlen);

/* Write spec files into a fresh scratch, owned by uid/gid. -ENOSPC when the
 * disk is full, -EINVAL for a bad relative path. */
int sb_scratch_write_files(const char *scratch, const struct sandbox_file *files, size_t n,
			   uid_t uid, gid_t gid, char *detail, size_t dlen);

/* Read back <rel> under the scratch's root directory, open as scratch_fd:
 * only a regular file owned by `owner`, reached without symlinks, at most
 * `cap` bytes. A missing or refused file (the tenant's doing) leaves
 * out->data NULL and returns 0. The executor's own failures are errors,
 * never a missing file that would score as the tenant's: -EBADF with no
 * scratch_fd, -ENOMEM, and -errno where the open or the read ran out of
 * fds or memory or met an I/O error. */
int sb_scratch_fetch(int scratch_fd, const char *rel, uid_t owner, size_t cap,
		     struct sandbox_fetched *out);

/* Unmount the scratch tmpfs on <root>/<tenant>/<id> (everything in it goes
 * with it) and remove the mount point. 0 when it is gone. */
int sb_scratch_remove(const char *root, const char *tenant, const char *id);

/* A relative path that stays inside the scratch: no leading '/', no "..",
 * no empty component, no component longer than NAME_MAX. */
bool sb_scratch_path_valid(const char *rel);

/* Whether two valid scratch paths cannot both be files: the same path, or
 * one a directory prefix of the other ("x" and "x/y"). */
bool sb_scratch_paths_conflict(const char *a, const char *b);

#endif
