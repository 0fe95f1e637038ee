/* Sandbox scratch directories (see src/sandbox/sandbox_scratch.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_scratch.h"

bool sb_scratch_path_valid(const char *rel)
{
	const char *p = rel;

	if (!rel || !*rel || *rel == '/')
		return false;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2)) ||
		    n > NAME_MAX)
			return false;
		if (!slash)
			break;
		p = slash + 1;
		if (!*p)
			return false; /* trailing '/' */
	}
	return strlen(rel) < PATH_MAX;
}

bool sb_scratch_paths_conflict(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	const char *longer = la > lb ? a : b;
	size_t shorter = la > lb ? lb : la;

	if (la == lb)
		return !strcmp(a, b);
	return !strncmp(a, b, shorter) && longer[shorter] == '/';
}

/* The tenant directory must be root's and closed to listing, or sandboxes
 * could find (and race for) each other's scratch names. */
static int open_tenant_dir(const char *root, const char *tenant, bool create, char *detail,
			   size_t dlen)
{
	int rootfd, fd;
	struct stat st;

	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		snprintf(detail, dlen, "cannot open scratch root %s: %s", root, strerror(errno));
		return -errno;
	}
	if (create && mkdirat(rootfd, tenant, 0711) && errno != EEXIST) {
		int err = -errno;
		snprintf(detail, dlen, "cannot create %s/%s: %s", root, tenant, strerror(errno));
		close(rootfd);
		return err;
	}
	fd = openat(rootfd, tenant, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(rootfd);
	if (fd < 0) {
		snprintf(detail, dlen, "cannot open %s/%s: %s", root, tenant, strerror(errno));
		return -errno;
	}
	if (create) {
		if (fstat(fd, &st) || st.st_uid != 0) {
			snprintf(detail, dlen, "%s/%s is not owned by root; refusing to use it",
				 root, tenant);
			close(fd);
			return -EPERM;
		}
		if ((st.st_mode & 07777) != 0711 && fchmod(fd, 0711)) {
			int err = -errno;
			snprintf(detail, dlen, "chmod %s/%s: %s", root, tenant, strerror(errno));
			close(fd);
			return err;
		}
	}
	return fd;
}

/* The tmpfs's options: bounded, owned by the slot, closed to others. */
static int tmpfs_options(const struct sb_scratch_spec *sp, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "size=%llum,nr_inodes=%llu,mode=0700,uid=%u,gid=%u",
			     (unsigned long long)sp->size_mb, (unsigned long long)sp->inodes,
			     (unsigned)sp->uid, (unsigned)sp->gid) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* The sandbox's /tmp, /dev/shm and /mnt, inside the scratch. */
static int make_private_dirs(const char *path, uid_t uid, gid_t gid)
{
	static const char *const names[] = { SB_SCRATCH_TMP, SB_SCRATCH_SHM, SB_SCRATCH_MNT };
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !err; i++)
		if (mkdirat(fd, names[i], 0700) || fchownat(fd, names[i], uid, gid, 0))
			err = -errno;
	close(fd);
	return err;
}

int sb_scratch_create(const struct sb_scratch_spec *sp, char *path, size_t plen, char *detail,
		      size_t dlen)
{
	unsigned long flags = MS_NOSUID | MS_NODEV | (sp->exec ? 0 : MS_NOEXEC);
	char root[PATH_MAX], opts[160];
	int tfd, err;

	err = fs_mkdir_p(sp->root, 0755);
	if (err) {
		snprintf(detail, dlen, "cannot create scratch root %s: %s", sp->root,
			 strerror(-err));
		return err;
	}
	/* Canonical: the sandbox's root has the scratch at this path. */
	if (!realpath(sp->root, root)) {
		snprintf(detail, dlen, "cannot resolve scratch root %s: %s", sp->root,
			 strerror(errno));
		return -errno;
	}
	if ((size_t)snprintf(path, plen, "%s/%s/%s", root, sp->tenant, sp->id) >= plen ||
	    tmpfs_options(sp, opts, sizeof(opts))) {
		snprintf(detail, dlen, "scratch path too long");
		return -ENAMETOOLONG;
	}
	tfd = open_tenant_dir(root, sp->tenant, true, detail, dlen);
	if (tfd < 0)
		return tfd;
	if (mkdirat(tfd, sp->id, 0700)) {
		err = -errno;
		if (err != -EEXIST)
			snprintf(detail, dlen, "cannot create scratch %s: %s", path,
				 strerror(errno));
		close(tfd);
		return err;
	}
	/* Its own tmpfs: a size and an inode bound of its own, pages charged
	 * to the memory cgroup of whoever writes them (the sandbox), no
	 * setuid, no devices, no execution, and a teardown that is one
	 * unmount however deep the tenant nested its directories. */
	if (mount("sandguard-scratch", path, "tmpfs", flags, opts)) {
		err = -errno;
		snprintf(detail, dlen, "cannot mount the scratch tmpfs on %s: %s", path,
			 strerror(errno));
	} else if ((err = make_private_dirs(path, sp->uid, sp->gid))) {
		snprintf(detail, dlen, "cannot set up scratch %s: %s", path, strerror(-err));
		umount2(path, MNT_DETACH);
	}
	if (err)
		unlinkat(tfd, sp->id, AT_REMOVEDIR);
	close(tfd);
	return err;
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = write(fd, data, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write one file; intermediate directories are created 0700. The scratch
 * is fresh (no tenant code ran in it yet), O_NOFOLLOW is belt and braces. */
static int write_one(int dirfd, const struct sandbox_file *f, uid_t uid, gid_t gid)
{
	char rel[PATH_MAX], *comp = rel, *slash;
	int dfd = dup(dirfd), fd, err;

	if (dfd < 0)
		return -errno;
	snprintf(rel, sizeof(rel), "%s", f->path);
	while ((slash = strchr(comp, '/'))) {
		int next;

		*slash = '\0';
		if (mkdirat(dfd, comp, 0700) == 0) {
			if (fchownat(dfd, comp, uid, gid, AT_SYMLINK_NOFOLLOW)) {
				err = -errno;
				close(dfd);
				return err;
			}
		} else if (errno != EEXIST) {
			err = -errno;
			close(dfd);
			return err;
		}
		next = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = -errno;
		close(dfd);
		if (next < 0)
			return err;
		dfd = next;
		comp = slash + 1;
	}
	fd = openat(dfd, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	err = -errno;
	close(dfd);
	if (fd < 0)
		return err;
	err = write_all(fd, f->data, f->len);
	if (!err && (fchown(fd, uid, gid) || fchmod(fd, f->mode & 0777)))
		err = -errno;
	/* close() is where NFS and friends report a full disk. */
	if (close(fd) && !err)
		err = -errno;
	return err;
}

int sb_scratch_write_files(const char *scratch, const struct sandbox_file *files, size_t n,
			   uid_t uid, gid_t gid, char *detail, size_t dlen)
{
	int dirfd, err = 0;

	if (!n)
		return 0;
	dirfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		snprintf(detail, dlen, "cannot open scratch %s: %s", scratch, strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < n && !err; i++) {
		if (!sb_scratch_path_valid(files[i].path) || (files[i].len && !files[i].data)) {
			snprintf(detail, dlen,
				 "bad scratch file path '%s': must be relative, "
				 "without '..', '.' or empty components",
				 files[i].path ? files[i].path : "(null)");
			err = -EINVAL;
			break;
		}
		err = write_one(dirfd, &files[i], uid, gid);
		if (err)
			snprintf(detail, dlen, "cannot write scratch file %s/%s: %s", scratch,
				 files[i].path, strerror(-err));
	}
	close(dirfd);
	return err;
}

/* Open <dirfd>/<rel> without following any symlink and without leaving
 * dirfd: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel
 * has it (5.6), else a walk with O_NOFOLLOW on every component. */
static int open_beneath(int dirfd, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	char buf[PATH_MAX], *comp = buf, *slash;
	int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	int dfd;

	if (fd >= 0 || errno != ENOSYS)
		return fd;
	snprintf(buf, sizeof(buf), "%s", rel);
	dfd = dup(dirfd);
	if (dfd < 0)
		return -1;
	while ((slash = strchr(comp, '/'))) {
		int next;

		*slash = '\0';
		next = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		if (next < 0)
			return -1;
		dfd = next;
		comp = slash + 1;
	}
	fd = openat(dfd, comp, (int)how.flags);
	close(dfd);
	return fd;
}

/* An error of the executor's, not of what the tenant left: out of fds or
 * memory, or the disk's I/O. Any other refusal (missing, a symlink, a
 * socket, outside the scratch) is the tenant's file not being there, and
 * the tenant cannot make one of these happen to the executor. */
static bool platform_errno(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS || err == EIO;
}

int sb_scratch_fetch(int scratch_fd, const char *rel, uid_t owner, size_t cap,
		     struct sandbox_fetched *out)
{
	struct stat st;
	int fd;
	size_t len = 0;

	memset(out, 0, sizeof(*out));
	out->path = strdup(rel ? rel : "");
	if (!out->path)
		return -ENOMEM;
	if (scratch_fd < 0)
		return -EBADF;
	if (!sb_scratch_path_valid(rel))
		return 0;
	fd = open_beneath(scratch_fd, rel);
	if (fd < 0)
		return platform_errno(errno) ? -errno : 0;
	/* Only the tenant's own regular file: not a FIFO that would block,
	 * not a hard link to a file of root's. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != owner) {
		close(fd);
		return 0;
	}
	out->data = malloc(cap + 1);
	if (!out->data) {
		close(fd);
		return -ENOMEM;
	}
	while (len < cap) {
		ssize_t n = read(fd, out->data + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && platform_errno(errno)) {
			int err = -errno;

			close(fd);
			return err;
		}
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (len == cap) {
		char probe;
		out->truncated = read(fd, &probe, 1) == 1;
	}
	close(fd);
	out->data[len] = '\0';
	out->len = len;
	return 0;
}

int sb_scratch_remove(const char *root, const char *tenant, const char *id)
{
	char detail[256], path[PATH_MAX];
	int tfd, err = 0;

	tfd = open_tenant_dir(root, tenant, false, detail, sizeof(detail));
	if (tfd < 0)
		return tfd == -ENOENT ? 0 : tfd;
	snprintf(path, sizeof(path), "%s/%s/%s", root, tenant, id);
	/* Lazily: a process that still holds the tmpfs (there should be
	 * none: the cgroup was emptied first) keeps it alive on its own. */
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) && errno != EINVAL && errno != ENOENT)
		err = -errno;
	if (!err && unlinkat(tfd, id, AT_REMOVEDIR) && errno != ENOENT)
		err = -errno;
	if (err)
		sg_error("cannot remove scratch %s: %s", path, strerror(-err));
	close(tfd);
	return err;
}

int sb_scratch_mark(const char *path, uid_t uid, gid_t gid, struct sb_scratch_marks *m)
{
	struct stat root, tmp, shm, mnt;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &root) || fstatat(fd, SB_SCRATCH_TMP, &tmp, AT_SYMLINK_NOFOLLOW) ||
	    fstatat(fd, SB_SCRATCH_SHM, &shm, AT_SYMLINK_NOFOLLOW) ||
	    fstatat(fd, SB_SCRATCH_MNT, &mnt, AT_SYMLINK_NOFOLLOW))
		err = -errno;
	close(fd);
	if (err)
		return err;
	/* Field by field: a compound literal would zero kept[] too, 128 KiB
	 * that nothing reads past n_kept, and page faults cost tens of
	 * microseconds each on a cold launch's path. */
	m->dev = root.st_dev;
	m->root = root.st_ino;
	m->tmp = tmp.st_ino;
	m->shm = shm.st_ino;
	m->mnt = mnt.st_ino;
	m->uid = uid;
	m->gid = gid;
	m->times[0] = root.st_atim;
	m->times[1] = root.st_mtim;
	m->n_kept = 0;
	return 0;
}

/* A walk that puts a scratch back: what it must keep, what it met of it. */
struct walk {
	const struct sb_scratch_marks *m;
	size_t seen;
};

static int kept_index(const struct sb_scratch_marks *m, const char *rel)
{
	for (size_t i = 0; i < m->n_kept; i++)
		if (!strcmp(m->kept[i].rel, rel))
			return (int)i;
	return -1;
}

/* A kept entry, as made: the same inode; a directory is emptied of
 * anything else. */
static int keep_entry(int dfd, const char *name, const char *rel, int k, int depth, struct walk *w);

/* Remove everything below the directory open at dfd, whose path in the
 * scratch is `rel` (NULL: nothing in it is kept); depth-bounded. The top
 * level's .tmp and .shm are reset_private()'s. 0 or -errno. */
static int empty_dir(int dfd, const char *rel, int depth, struct walk *w)
{
	enum { DENTS = 4096 };
	char *buf, *sub;
	int err = 0;
	long n;

	/* getdents64 on dfd itself, not readdir() on a copy: fdopendir()'s
	 * dup, fstat and two fcntl per directory were a third of a reset's
	 * system calls, for every test (docs/performance-executor-cost.md).
	 * Entries are removed between two reads, as readdir() did. Every
	 * caller opened dfd for this walk, so it reads from the start.
	 * Neither the entries nor the path of a kept one are on the stack:
	 * the walk recurses, up to SB_SCRATCH_RESET_DEPTH levels of the
	 * tenant's making, on a serve worker's 256 KiB stack (with `sub` on
	 * it, a 63-deep tree made by one test's program overflowed it and
	 * took serve down). A level's frame is now some 100 bytes. */
	buf = malloc(DENTS + PATH_MAX);
	if (!buf)
		return -ENOMEM;
	sub = buf + DENTS;
	while (!err && (n = syscall(SYS_getdents64, dfd, buf, DENTS)) > 0) {
		for (long off = 0; !err && off < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			const char *name = e->d_name;
			int k = -1, fd;

			off += e->d_reclen;
			if (!strcmp(name, ".") || !strcmp(name, "..") ||
			    (rel && !*rel &&
			     (!strcmp(name, SB_SCRATCH_TMP) || !strcmp(name, SB_SCRATCH_SHM) ||
			      !strcmp(name, SB_SCRATCH_MNT))))
				continue;
			if (rel && w->m->n_kept) {
				snprintf(sub, PATH_MAX, "%s%s%s", rel, *rel ? "/" : "", name);
				k = kept_index(w->m, sub);
			}
			if (k >= 0) {
				err = keep_entry(dfd, name, sub, k, depth, w);
				continue;
			}
			if (!unlinkat(dfd, name, 0) || errno == ENOENT)
				continue;
			if (errno != EISDIR)
				err = -errno;
			else if (depth >= SB_SCRATCH_RESET_DEPTH)
				err = -EBUSY;
			else if ((fd = openat(dfd, name,
					      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				err = -errno;
			else {
				err = empty_dir(fd, NULL, depth + 1, w);
				close(fd);
				if (!err && unlinkat(dfd, name, AT_REMOVEDIR))
					err = -errno;
			}
		}
	}
	if (!err && n < 0)
		err = -errno;
	free(buf);
	return err;
}

static int keep_entry(int dfd, const char *name, const char *rel, int k, int depth, struct walk *w)
{
	struct stat st;
	int fd, err;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (st.st_ino != w->m->kept[k].ino || st.st_dev != w->m->dev)
		return -EBUSY;
	w->seen++;
	if (!S_ISDIR(st.st_mode))
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = empty_dir(fd, rel, depth + 1, w);
	close(fd);
	return err;
}

int sb_scratch_mark_kept(const char *path, char (*rel)[PATH_MAX], size_t n,
			 struct sb_scratch_marks *m)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err = 0;
	struct stat st;

	if (n > SB_SCRATCH_KEEP)
		return -E2BIG;
	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < n && !err; i++) {
		if (fstatat(fd, rel[i], &st, AT_SYMLINK_NOFOLLOW))
			err = -errno;
		snprintf(m->kept[i].rel, sizeof(m->kept[i].rel), "%s", rel[i]);
		m->kept[i].ino = st.st_ino;
	}
	close(fd);
	m->n_kept = err ? 0 : n;
	return err;
}

/* Owner, mode, no extended attribute (ACLs included) and the times: as
 * made. The times too, because a run may set them (utimensat needs no
 * Landlock right) and the next run would read 2 x 64 bits per directory
 * from it. */
static int restore(int fd, const struct stat *st, const struct sb_scratch_marks *m)
{
	char names[4096];
	ssize_t len = flistxattr(fd, names, sizeof(names));

	for (ssize_t off = 0; len > 0 && off < len; off += (ssize_t)strlen(names + off) + 1)
		if (fremovexattr(fd, names + off) && errno != ENODATA)
			return -errno;
	if (len < 0 && errno != ENOTSUP)
		return -errno;
	/* Owner and mode as fstat() found them before the walk (which
	 * changes neither): set only when a run changed them. The times
	 * always: the walk's own reads may have moved the access time. */
	if ((st->st_uid != m->uid || st->st_gid != m->gid) && fchown(fd, m->uid, m->gid))
		return -errno;
	if ((st->st_mode & 07777) != 0700 && fchmod(fd, 0700))
		return -errno;
	return futimens(fd, m->times) ? -errno : 0;
}

/* .tmp, .shm or .mnt: the very directory the sandbox's root binds,
 * emptied. */
static int reset_private(int root, const char *name, ino_t ino, struct walk *w)
{
	struct stat st;
	int fd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -EBUSY : -errno;
	err = fstat(fd, &st) ? -errno : st.st_ino != ino || st.st_dev != w->m->dev ? -EBUSY : 0;
	err = err ?: empty_dir(fd, name, 1, w);
	err = err ?: restore(fd, &st, w->m);
	close(fd);
	return err;
}

int sb_scratch_reset(const char *path, const struct sb_scratch_marks *m, char *detail, size_t dlen)
{
	int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err;
	struct walk w = { .m = m };
	struct stat st;

	if (root < 0) {
		snprintf(detail, dlen, "cannot open scratch %s: %s", path, strerror(errno));
		return -errno;
	}
	err = fstat(root, &st) ? -errno : st.st_ino != m->root || st.st_dev != m->dev ? -EBUSY : 0;
	err = err ?: reset_private(root, SB_SCRATCH_TMP, m->tmp, &w);
	err = err ?: reset_private(root, SB_SCRATCH_SHM, m->shm, &w);
	err = err ?: reset_private(root, SB_SCRATCH_MNT, m->mnt, &w);
	err = err ?: empty_dir(root, "", 1, &w);
	err = err ?: restore(root, &st, m);
	if (!err && w.seen != m->n_kept)
		err = -EBUSY; /* something the root build made is gone */
	close(root);
	if (err == -EBUSY)
		snprintf(detail, dlen,
			 "scratch %s is not as it was made (its .tmp, .shm or the sandbox root's "
			 "mount points in them replaced, or a tree deeper than %d)",
			 path, SB_SCRATCH_RESET_DEPTH);
	else if (err)
		snprintf(detail, dlen, "cannot reset scratch %s: %s", path, strerror(-err));
	return err;
}
