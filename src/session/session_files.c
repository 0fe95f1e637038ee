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
#include <stdbool.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sandbox/sandbox_scratch.h"
#include "session_files.h"

/* Directory levels a fork copies; a deeper scratch cannot be forked
 * (-ELOOP). The walk itself uses no stack per level. */
#define COPY_DEPTH_MAX 256

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

/* The file's data, holes kept as holes: a sparse file the tenant made
 * costs its fork no more than it cost the parent. sendfile() copies in
 * the kernel between any two files (two tmpfs scratches, where
 * copy_file_range() refuses the cross-device copy). */
bool session_file_err_tenants(int err)
{
	switch (-err) {
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
	case ENOTDIR:
	case EISDIR:
	case ELOOP:
	case EEXIST:
	case ENAMETOOLONG:
	case EINVAL:
		return true;
	default:
		return false;
	}
}

static int copy_data(int in, int out, off_t size)
{
	off_t at = 0;

	if (ftruncate(out, size))
		return -errno;
	while (at < size) {
		off_t data = lseek(in, at, SEEK_DATA), hole;

		if (data < 0)
			return errno == ENXIO ? 0 : -errno; /* the rest is a hole */
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		at = data;
		while (at < hole) {
			off_t from = at;
			ssize_t n;

			if (lseek(out, at, SEEK_SET) < 0)
				return -errno;
			n = sendfile(out, in, &from, (size_t)(hole - at));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			if (n == 0)
				return 0; /* it shrank under us: what was there is copied */
			at += n;
		}
	}
	return 0;
}

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st, uid_t uid)
{
	int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), out, err;

	if (in < 0)
		return -errno;
	out = openat(ddir, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		err = -errno;
		close(in);
		return err;
	}
	err = copy_data(in, out, st->st_size);
	if (!err && (fchown(out, uid, uid) || fchmod(out, st->st_mode & 07777 & ~06000)))
		err = -errno;
	if (close(out) && !err)
		err = -errno;
	close(in);
	return err;
}

/* One directory being copied: its entries are read one at a time, so the
 * walk holds a frame per level, on the heap, and never recurses (a tree
 * as deep as the tenant likes must not overflow a server thread's stack:
 * the depth is bounded, with an error, at COPY_DEPTH_MAX). */
struct frame {
	DIR *src; /* owns the source directory's fd */
	int dst;
	mode_t mode; /* the source directory's, applied once it is filled */
};

/* A link, a regular file or nothing (FIFOs and sockets are a live
 * process's, not state). 1 when `name` is a directory (not copied here). */
static int copy_leaf(int sdir, int ddir, const char *name, uid_t uid, struct stat *st,
		     struct session_copy_stats *cs)
{
	char *target;
	ssize_t n;
	int err = 0;

	if (fstatat(sdir, name, st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (S_ISDIR(st->st_mode))
		return 1;
	if (S_ISREG(st->st_mode)) {
		cs->files++;
		cs->bytes += (uint64_t)st->st_size;
		return copy_file(sdir, ddir, name, st, uid);
	}
	if (!S_ISLNK(st->st_mode)) {
		cs->skipped++;
		return 0;
	}
	target = malloc(PATH_MAX);
	if (!target)
		return -ENOMEM;
	n = readlinkat(sdir, name, target, PATH_MAX - 1);
	if (n < 0) {
		err = -errno;
	} else {
		target[n] = '\0';
		unlinkat(ddir, name, 0);
		if (symlinkat(target, ddir, name) ||
		    fchownat(ddir, name, uid, uid, AT_SYMLINK_NOFOLLOW))
			err = -errno;
	}
	free(target);
	return err;
}

/* Open `name` below both directories as a new frame. 0 or -errno. */
static int push(struct frame *f, int sdir, int ddir, const char *name, mode_t mode)
{
	int s, d;

	if (mkdirat(ddir, name, 0700) && errno != EEXIST)
		return -errno;
	s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0)
		return -errno;
	d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0 || !(f->src = fdopendir(s))) {
		int err = -errno;

		close(s);
		if (d >= 0)
			close(d);
		return err;
	}
	f->dst = d;
	f->mode = mode;
	return 0;
}

static int pop(struct frame *f, uid_t uid, bool apply)
{
	int err = 0;

	if (apply && (fchown(f->dst, uid, uid) || fchmod(f->dst, f->mode & 07777 & ~06000)))
		err = -errno;
	close(f->dst);
	closedir(f->src);
	return err;
}

int session_copy_tree(const char *from, const char *to, uid_t uid, struct session_copy_stats *cs)
{
	struct frame *stack = calloc(COPY_DEPTH_MAX + 1, sizeof(*stack));
	int depth = 0, err = 0, s, d;

	memset(cs, 0, sizeof(*cs));
	if (!stack)
		return -ENOMEM;
	s = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = s < 0 ? -1 : open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0 || !(stack[0].src = fdopendir(s))) {
		err = -errno;
		if (s >= 0)
			close(s);
		if (d >= 0)
			close(d);
		free(stack);
		return err;
	}
	stack[0].dst = d;
	while (depth >= 0 && !err) {
		struct frame *f = &stack[depth];
		struct dirent *e = readdir(f->src);
		struct stat st;
		int r;

		if (!e) { /* this directory is done; the root keeps its own mode */
			err = pop(f, uid, depth > 0);
			depth--;
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = copy_leaf(dirfd(f->src), f->dst, e->d_name, uid, &st, cs);
		if (r <= 0) {
			err = r;
			continue;
		}
		if (depth + 1 > COPY_DEPTH_MAX) {
			err = -ELOOP;
			continue;
		}
		err = push(&stack[depth + 1], dirfd(f->src), f->dst, e->d_name, st.st_mode);
		if (!err)
			depth++;
	}
	while (depth >= 0) /* after an error: close what is open */
		pop(&stack[depth--], uid, false);
	free(stack);
	return err;
}
