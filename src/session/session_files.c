/* A session's files, written and copied by root on the host into a
 * scratch the tenant's code has written to before: every path is walked
 * one component at a time with O_NOFOLLOW, never leaving the scratch's
 * own filesystem, so a symlink or a mount the tenant left cannot turn a
 * write of ours into a write elsewhere. Nothing of the tenant's runs
 * while we do it (a session's calls take turns), so what we check is
 * what we write to. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sandbox/sandbox_scratch.h"
#include "session_files.h"

#define COPY_DEPTH_MAX 64

static int write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The directory that holds rel's last component, made (0700, the slot's)
 * where missing; *base points at that component. -errno. */
static int open_parent(int root, const char *rel, char *buf, size_t len, const char **base,
		       uid_t uid)
{
	char *comp, *slash;
	int dfd = dup(root);

	snprintf(buf, len, "%s", rel);
	comp = buf;
	if (dfd < 0)
		return -errno;
	while ((slash = strchr(comp, '/'))) {
		int next;

		*slash = '\0';
		if (mkdirat(dfd, comp, 0700) == 0 &&
		    fchownat(dfd, comp, uid, uid, AT_SYMLINK_NOFOLLOW)) {
			close(dfd);
			return -errno;
		}
		next = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		if (next < 0)
			return errno == ELOOP ? -ENOTDIR : -errno;
		dfd = next;
		comp = slash + 1;
	}
	*base = comp;
	return dfd;
}

int session_file_put(int root, const char *rel, const void *data, size_t len, unsigned mode,
		     uid_t uid)
{
	char buf[PATH_MAX], tmp[64];
	const char *base = NULL;
	int dfd, fd, err;

	if (!sb_scratch_path_valid(rel))
		return -EINVAL;
	dfd = open_parent(root, rel, buf, sizeof(buf), &base, uid);
	if (dfd < 0)
		return dfd;
	/* Made under a name of ours and renamed over the target: a symlink
	 * the tenant put there is replaced, never followed. */
	snprintf(tmp, sizeof(tmp), ".sandguard-put-%d-%lx", (int)getpid(), (long)random());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		close(dfd);
		return err;
	}
	err = write_all(fd, data, len);
	if (!err && (fchown(fd, uid, uid) || fchmod(fd, mode & 0777)))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(dfd, tmp, dfd, base))
		err = -errno;
	if (err)
		unlinkat(dfd, tmp, 0);
	close(dfd);
	return err;
}

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st, uid_t uid)
{
	int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), out, err = 0;

	if (in < 0)
		return -errno;
	out = openat(ddir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		err = -errno;
		close(in);
		return err;
	}
	/* sendfile() copies in the kernel between any two files (two tmpfs
	 * scratches: copy_file_range() would refuse the cross-device copy). */
	for (;;) {
		ssize_t n = sendfile(out, in, NULL, 1 << 30);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		if (n <= 0)
			break;
	}
	if (!err && (fchown(out, uid, uid) || fchmod(out, st->st_mode & 07777 & ~06000)))
		err = -errno;
	if (close(out) && !err)
		err = -errno;
	close(in);
	return err;
}

static int copy_dir(int sdir, int ddir, uid_t uid, int depth, struct session_copy_stats *cs);

static int copy_entry(int sdir, int ddir, const char *name, uid_t uid, int depth,
		      struct session_copy_stats *cs)
{
	struct stat st;
	char target[PATH_MAX];
	ssize_t n;
	int s, d, err;

	if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (S_ISREG(st.st_mode)) {
		cs->files++;
		cs->bytes += (uint64_t)st.st_size;
		return copy_file(sdir, ddir, name, &st, uid);
	}
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(sdir, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		unlinkat(ddir, name, 0);
		if (symlinkat(target, ddir, name) ||
		    fchownat(ddir, name, uid, uid, AT_SYMLINK_NOFOLLOW))
			return -errno;
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		cs->skipped++; /* a FIFO, a socket: a live process's, not state */
		return 0;
	}
	if (depth >= COPY_DEPTH_MAX)
		return -ELOOP;
	if (mkdirat(ddir, name, 0700) && errno != EEXIST)
		return -errno;
	s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0)
		return -errno;
	d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0) {
		err = -errno;
		close(s);
		return err;
	}
	err = copy_dir(s, d, uid, depth + 1, cs);
	if (!err && (fchown(d, uid, uid) || fchmod(d, st.st_mode & 07777 & ~06000)))
		err = -errno;
	close(d);
	close(s);
	return err;
}

static int copy_dir(int sdir, int ddir, uid_t uid, int depth, struct session_copy_stats *cs)
{
	int fd = dup(sdir), err = 0;
	DIR *dir;
	struct dirent *e;

	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		err = -errno;
		close(fd);
		return err;
	}
	while (!err && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		err = copy_entry(sdir, ddir, e->d_name, uid, depth, cs);
	}
	closedir(dir);
	return err;
}

int session_copy_tree(const char *from, const char *to, uid_t uid, struct session_copy_stats *cs)
{
	int s = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), d, err;

	memset(cs, 0, sizeof(*cs));
	if (s < 0)
		return -errno;
	d = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0) {
		err = -errno;
		close(s);
		return err;
	}
	err = copy_dir(s, d, uid, 0, cs);
	close(d);
	close(s);
	return err;
}
