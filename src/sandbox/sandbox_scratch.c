/* Sandbox scratch directories (see src/sandbox/sandbox_scratch.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

int sb_scratch_create(const char *root, const char *tenant, const char *id, uid_t uid, gid_t gid,
		      char *path, size_t plen, char *detail, size_t dlen)
{
	int tfd, fd, err;

	if ((size_t)snprintf(path, plen, "%s/%s/%s", root, tenant, id) >= plen) {
		snprintf(detail, dlen, "scratch path too long");
		return -ENAMETOOLONG;
	}
	err = fs_mkdir_p(root, 0755);
	if (err) {
		snprintf(detail, dlen, "cannot create scratch root %s: %s", root, strerror(-err));
		return err;
	}
	tfd = open_tenant_dir(root, tenant, true, detail, dlen);
	if (tfd < 0)
		return tfd;
	if (mkdirat(tfd, id, 0700)) {
		err = -errno;
		if (err != -EEXIST)
			snprintf(detail, dlen, "cannot create scratch %s: %s", path,
				 strerror(errno));
		close(tfd);
		return err;
	}
	fd = openat(tfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchown(fd, uid, gid) || fchmod(fd, 0700)) {
		err = -errno;
		snprintf(detail, dlen, "cannot set up scratch %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlinkat(tfd, id, AT_REMOVEDIR);
		close(tfd);
		return err;
	}
	close(fd);
	close(tfd);
	return 0;
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

int sb_scratch_fetch(const char *scratch, const char *rel, uid_t owner, size_t cap,
		     struct sandbox_fetched *out)
{
	struct stat st;
	int dirfd, fd;
	size_t len = 0;

	memset(out, 0, sizeof(*out));
	out->path = strdup(rel ? rel : "");
	if (!out->path)
		return -ENOMEM;
	if (!sb_scratch_path_valid(rel))
		return 0;
	dirfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return 0;
	fd = open_beneath(dirfd, rel);
	close(dirfd);
	if (fd < 0)
		return 0;
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

/* The directories remove_contents() descended through, by identity, so
 * that climbing back through ".." can check it lands where it came from. */
struct dir_trail {
	struct {
		dev_t dev;
		ino_t ino;
	} * at;
	size_t n, cap;
};

static int trail_push(struct dir_trail *t, int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		void *at = realloc(t->at, cap * sizeof(*t->at));

		if (!at)
			return -ENOMEM;
		t->at = at;
		t->cap = cap;
	}
	t->at[t->n].dev = st.st_dev;
	t->at[t->n].ino = st.st_ino;
	t->n++;
	return 0;
}

/* Pop the last directory and check that fd is it. */
static int trail_pop_check(struct dir_trail *t, int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	t->n--;
	if (st.st_dev != t->at[t->n].dev || st.st_ino != t->at[t->n].ino)
		return -ESTALE;
	return 0;
}

/* Remove everything below dirfd with one directory fd at a time (a tenant
 * can nest directories deeper than we have fds or stack): descend into the
 * first non-empty subdirectory, and climb back through ".." once a
 * directory is empty. The caller makes sure no tenant process is alive
 * any more, so nothing should move under us; should a directory move all
 * the same, ".." is not where we came from and the removal stops there
 * (-ESTALE) rather than continue in some other tree. unlinkat never
 * follows a symlink. */
static int remove_contents(int dirfd)
{
	struct dir_trail trail = { 0 };
	int cur = dup(dirfd), err = 0;

	if (cur < 0)
		return -errno;
	for (;;) {
		/* A fresh open file description: a dup would share (and
		 * inherit the end-of-directory) offset of the last pass. */
		int scan = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), next = -1;
		DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
		struct dirent *e;

		if (!d) {
			err = -errno;
			if (scan >= 0)
				close(scan);
			break;
		}
		while ((e = readdir(d))) {
			const char *name = e->d_name;

			if (!strcmp(name, ".") || !strcmp(name, ".."))
				continue;
			if (!unlinkat(cur, name, 0))
				continue;
			if (errno != EISDIR) {
				err = -errno;
				break;
			}
			if (!unlinkat(cur, name, AT_REMOVEDIR))
				continue;
			if (errno != ENOTEMPTY && errno != EEXIST) {
				err = -errno;
				break;
			}
			next = openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0)
				err = -errno;
			break;
		}
		closedir(d);
		if (!err && next >= 0)
			err = trail_push(&trail, cur);
		if (err) {
			if (next >= 0)
				close(next);
			break;
		}
		if (next >= 0) {
			close(cur);
			cur = next;
			continue;
		}
		if (trail.n == 0)
			break;
		/* cur is empty; the parent's next pass removes it. */
		next = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (next < 0) {
			err = -errno;
			break;
		}
		close(cur);
		cur = next;
		err = trail_pop_check(&trail, cur);
		if (err)
			break;
	}
	close(cur);
	free(trail.at);
	return err;
}

int sb_scratch_remove(const char *root, const char *tenant, const char *id)
{
	char detail[256];
	int tfd, fd, err;

	tfd = open_tenant_dir(root, tenant, false, detail, sizeof(detail));
	if (tfd < 0)
		return tfd;
	fd = openat(tfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ENOENT ? 0 : -errno;
		close(tfd);
		return err;
	}
	err = remove_contents(fd);
	close(fd);
	if (!err && unlinkat(tfd, id, AT_REMOVEDIR))
		err = -errno;
	if (err)
		sg_error("cannot remove scratch %s/%s/%s: %s", root, tenant, id, strerror(-err));
	close(tfd);
	return err;
}
