/* The sandbox's minimal root (see src/sandbox/sandbox_root.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "lib/array_len.h"
#include "lib/log.h"
#include "sandbox_landlock.h"
#include "sandbox_root.h"
#include "sandbox_scratch.h"

#define MAX_HOPS 40 /* symlinks followed per policy path, as the kernel */
/* The root itself holds only directories, mount points and links. */
#define ROOT_TMPFS_OPTS "mode=0755,size=1m,nr_inodes=4096"
#define DEV_TMPFS_OPTS  "mode=0755,size=64k,nr_inodes=64"

static const char *const devices[] = { "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random" };

/* ---- planning (parent) ------------------------------------------------ */

/* Strings on the heap, each as long as it is: arrays of PATH_MAX each
 * would put every entry on a page of its own, and a page fault costs tens
 * of microseconds on a cold launch's path. */
struct links {
	char **path;
	char **target;
	size_t n, cap;
};

/* The canonical paths to bind, and what resolving them met. */
struct resolved {
	char **canon;
	size_t n;
	struct links links;
};

size_t sb_root_in_scratch(const struct sb_root_plan *rp, char (*rel)[PATH_MAX], size_t max)
{
	static const char *const in[][2] = { { "/tmp/", SB_SCRATCH_TMP "/" },
					     { "/dev/shm/", SB_SCRATCH_SHM "/" },
					     { "/mnt/", SB_SCRATCH_MNT "/" } };
	size_t n = 0;

	for (size_t i = 0; i < rp->n_ops; i++) {
		const struct sb_root_op *op = &rp->ops[i];
		const char *path = rp->arena + op->path;

		if (op->kind != SB_OP_DIR && op->kind != SB_OP_FILE && op->kind != SB_OP_SYMLINK)
			continue;
		for (size_t k = 0; k < ARRAY_LEN(in); k++) {
			size_t len = strlen(in[k][0]);

			if (strncmp(path, in[k][0], len) || !path[len])
				continue;
			if (n < max)
				snprintf(rel[n], PATH_MAX, "%s%s", in[k][1], path + len);
			n++;
		}
	}
	return n;
}

const char *sb_root_str(const struct sb_root_plan *rp, size_t off)
{
	return rp->arena + off;
}

static size_t put_str(struct sb_root_plan *rp, const char *s)
{
	size_t n = strlen(s) + 1, off = rp->len;

	if (rp->len + n > rp->cap) {
		size_t cap = rp->cap ? rp->cap * 2 : 4096;
		char *a;

		while (cap < rp->len + n)
			cap *= 2;
		a = realloc(rp->arena, cap);
		if (!a)
			return 0;
		rp->arena = a;
		rp->cap = cap;
	}
	memcpy(rp->arena + off, s, n);
	rp->len += n;
	return off;
}

static int add_op(struct sb_root_plan *rp, int kind, unsigned long flags, const char *path,
		  const char *src)
{
	struct sb_root_op op = { .kind = kind, .flags = flags };

	if (rp->n_ops == rp->cap_ops) {
		size_t cap = rp->cap_ops ? rp->cap_ops * 2 : 64;
		struct sb_root_op *ops = realloc(rp->ops, cap * sizeof(*ops));

		if (!ops)
			return -ENOMEM;
		rp->ops = ops;
		rp->cap_ops = cap;
	}
	op.path = put_str(rp, path);
	op.src = src ? put_str(rp, src) : 0;
	if (!op.path || (src && !op.src))
		return -ENOMEM;
	rp->ops[rp->n_ops++] = op;
	return 0;
}

/* path is `dir` or below it. */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

static bool planned(const struct sb_root_plan *rp, int kind, const char *path)
{
	for (size_t i = 0; i < rp->n_ops; i++)
		if (rp->ops[i].kind == kind && !strcmp(rp->arena + rp->ops[i].path, path))
			return true;
	return false;
}

/* mkdir -p of path's ancestors and path itself inside the new root. */
static int ensure_dirs(struct sb_root_plan *rp, const char *path)
{
	char prefix[PATH_MAX];
	int err = 0;

	for (const char *p = path + 1; !err; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(p - path), path);
		if (!planned(rp, SB_OP_DIR, prefix))
			err = add_op(rp, SB_OP_DIR, 0, prefix, NULL);
		if (*p == '\0')
			break;
	}
	return err;
}

/* The directories above `path` (an absolute path, not "/"). */
static int ensure_parent(struct sb_root_plan *rp, const char *path)
{
	char parent[PATH_MAX];

	snprintf(parent, sizeof(parent), "%s", path);
	*strrchr(parent, '/') = '\0';
	return parent[0] ? ensure_dirs(rp, parent) : 0;
}

static int remember_link(struct links *l, const char *path, const char *target)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->path[i], path))
			return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		void *p = realloc(l->path, cap * sizeof(*l->path));
		void *t = p ? realloc(l->target, cap * sizeof(*l->target)) : NULL;

		if (p)
			l->path = p;
		if (!t)
			return -ENOMEM;
		l->target = t;
		l->cap = cap;
	}
	l->path[l->n] = strdup(path);
	l->target[l->n] = strdup(target);
	if (!l->path[l->n] || !l->target[l->n]) {
		free(l->path[l->n]);
		free(l->target[l->n]);
		return -ENOMEM;
	}
	l->n++;
	return 0;
}

/* Resolve `path` on the host one component at a time, as the kernel
 * would, into `canon`, remembering every symlink met: the new root
 * recreates them so that the policy's path works inside as it does
 * outside. -ENOENT for a path (or a link target) that does not exist. */
static int resolve(const char *path, char *canon, struct links *links)
{
	char cur[PATH_MAX] = "", todo[PATH_MAX], next[PATH_MAX], target[PATH_MAX];
	int hops = 0;

	snprintf(todo, sizeof(todo), "%s", path);
	for (char *comp = todo, *end; *comp;) {
		struct stat st;
		ssize_t n;
		int err;

		while (*comp == '/')
			comp++;
		if (!*comp)
			break;
		end = strchr(comp, '/');
		if (end)
			*end = '\0';
		if (!strcmp(comp, "..")) {
			char *slash = strrchr(cur, '/');
			if (slash)
				*slash = '\0'; /* cur has no symlinks: ".." is lexical */
		} else if (strcmp(comp, ".")) {
			if ((size_t)snprintf(next, sizeof(next), "%s/%s", cur, comp) >=
			    sizeof(next))
				return -ENAMETOOLONG;
			if (lstat(next, &st))
				return -errno;
			if (!S_ISLNK(st.st_mode)) {
				memcpy(cur, next, sizeof(cur));
			} else {
				if (++hops > MAX_HOPS)
					return -ELOOP;
				n = readlink(next, target, sizeof(target) - 1);
				if (n < 0)
					return -errno;
				target[n] = '\0';
				err = remember_link(links, next, target);
				if (err)
					return err;
				/* Go on with the link's target, then what was left. */
				if (target[0] == '/')
					cur[0] = '\0';
				snprintf(next, sizeof(next), "%s/%s", target, end ? end + 1 : "");
				memcpy(todo, next, sizeof(todo));
				comp = todo;
				continue;
			}
		}
		if (!end)
			break;
		comp = end + 1;
	}
	snprintf(canon, PATH_MAX, "%s", cur[0] ? cur : "/");
	return 0;
}

static int by_length(const void *pa, const void *pb)
{
	const char *a = *(char *const *)pa, *b = *(char *const *)pb;
	size_t la = strlen(a), lb = strlen(b);

	return la < lb ? -1 : la > lb ? 1 : strcmp(a, b);
}

/* The policy's read_only paths as canonical host paths, sorted so that a
 * directory comes before anything below it. */
static int resolve_all(const struct sg_policy *p, struct resolved *r, char *detail, size_t dlen)
{
	char canon[PATH_MAX];

	r->canon = calloc((size_t)p->n_read_only + 1, sizeof(*r->canon));
	if (!r->canon)
		return -ENOMEM;
	for (int i = 0; i < p->n_read_only; i++) {
		int err = resolve(p->read_only[i], canon, &r->links);

		if (!err && !(r->canon[r->n] = strdup(canon)))
			err = -ENOMEM;
		if (err == -ENOENT || err == -ENOTDIR) {
			sg_debug("sandbox root: %s does not exist here; not in the sandbox",
				 p->read_only[i]);
			continue;
		}
		if (err) {
			snprintf(detail, dlen, "cannot resolve read-only path %s: %s",
				 p->read_only[i], strerror(-err));
			return err;
		}
		r->n++;
	}
	qsort(r->canon, r->n, sizeof(*r->canon), by_length);
	return 0;
}

/* The sandbox's own /tmp, /dev, /mnt and /proc, before any policy path. */
static int plan_private(struct sb_root_plan *rp, const char *scratch, bool exec_in_scratch)
{
	unsigned long scratch_flags = MS_NOSUID | MS_NODEV | (exec_in_scratch ? 0 : MS_NOEXEC);
	static const char *const fd_links[][2] = { { "/dev/fd", "/proc/self/fd" },
						   { "/dev/stdin", "/proc/self/fd/0" },
						   { "/dev/stdout", "/proc/self/fd/1" },
						   { "/dev/stderr", "/proc/self/fd/2" } };
	char src[PATH_MAX];
	int err;

	snprintf(src, sizeof(src), "%s/%s", scratch, SB_SCRATCH_TMP);
	err = add_op(rp, SB_OP_DIR, 0, "/tmp", NULL);
	err = err ?: add_op(rp, SB_OP_BIND, scratch_flags, "/tmp", src);
	err = err ?: add_op(rp, SB_OP_DIR, 0, "/dev", NULL);
	err = err ?: add_op(rp, SB_OP_TMPFS, MS_NOSUID | MS_NOEXEC, "/dev", DEV_TMPFS_OPTS);
	/* Writing a device node does not need a writable mount. */
	for (size_t i = 0; i < ARRAY_LEN(devices) && !err; i++) {
		err = add_op(rp, SB_OP_FILE, 0, devices[i], NULL);
		err = err
			      ?: add_op(rp, SB_OP_BIND, MS_RDONLY | MS_NOSUID | MS_NOEXEC,
					devices[i], devices[i]);
	}
	for (size_t i = 0; i < ARRAY_LEN(fd_links) && !err; i++)
		err = add_op(rp, SB_OP_SYMLINK, 0, fd_links[i][0], fd_links[i][1]);
	snprintf(src, sizeof(src), "%s/%s", scratch, SB_SCRATCH_SHM);
	err = err ?: add_op(rp, SB_OP_DIR, 0, "/dev/shm", NULL);
	err = err ?: add_op(rp, SB_OP_BIND, scratch_flags, "/dev/shm", src);
	snprintf(src, sizeof(src), "%s/%s", scratch, SB_SCRATCH_MNT);
	err = err ?: add_op(rp, SB_OP_DIR, 0, "/mnt", NULL);
	err = err ?: add_op(rp, SB_OP_BIND, scratch_flags, "/mnt", src);
	err = err ?: add_op(rp, SB_OP_DIR, 0, "/proc", NULL);
	err = err ?: add_op(rp, SB_OP_PROC, MS_NOSUID | MS_NODEV | MS_NOEXEC, "/proc", NULL);
	return err;
}

/* The reward-model tier's inference pool (policy inference_devices, the
 * policy refuses them for any other tier): each node bound into the
 * sandbox's /dev, the only accelerator nodes it sees. A bind of a device
 * node on a read-only mount still opens for writing (the mount's
 * read-only flag guards a file's data, not a device's). */
static int plan_inference_devices(struct sb_root_plan *rp, const struct sg_policy *p, char *detail,
				  size_t dlen)
{
	char dir[SG_POLICY_PATHLEN];
	struct stat st;
	int err = 0;

	for (int i = 0; i < p->n_inference_devices && !err; i++) {
		const char *d = p->inference_devices[i];
		char *slash;

		if (stat(d, &st) || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))) {
			snprintf(detail, dlen,
				 "the policy's inference device %s is %s on this node: the "
				 "reward-model pool's devices must exist here",
				 d, errno == ENOENT ? "missing" : "not a device node");
			return -ENODEV;
		}
		snprintf(dir, sizeof(dir), "%s", d);
		slash = strrchr(dir, '/');
		*slash = '\0';
		if (strcmp(dir, "/dev"))
			err = add_op(rp, SB_OP_DIR, 0, dir, NULL);
		err = err ?: add_op(rp, SB_OP_FILE, 0, d, NULL);
		err = err ?: add_op(rp, SB_OP_BIND, MS_RDONLY | MS_NOSUID | MS_NOEXEC, d, d);
	}
	return err;
}

/* Whether a policy bind already shows `path` (the binds are not nested). */
static bool covered(const struct resolved *r, size_t n_bound, const size_t *bound, const char *path)
{
	for (size_t i = 0; i < n_bound; i++)
		if (under(path, r->canon[bound[i]]))
			return true;
	return false;
}

/* Paths the sandbox gets privately, whatever the policy lists. */
static bool private_path(const char *path)
{
	return under(path, "/dev") || under(path, "/proc") || !strcmp(path, "/tmp") ||
	       !strcmp(path, "/mnt");
}

static int plan_policy(struct sb_root_plan *rp, const struct resolved *r, size_t *bound,
		       size_t *n_bound, char *detail, size_t dlen)
{
	int err = 0;

	for (size_t i = 0; i < r->n && !err; i++) {
		const char *c = r->canon[i];
		struct stat st;

		if (!strcmp(c, "/") || under(c, rp->base) || under(rp->base, c)) {
			snprintf(detail, dlen, "read-only path %s overlaps the sandbox root %s", c,
				 rp->base);
			return -EINVAL;
		}
		/* The sandbox's own procfs: the policy's /proc paths become
		 * Landlock rules on it (the host's are other inodes). */
		if (under(c, "/proc")) {
			err = add_op(rp, SB_OP_LANDLOCK_RD, 0, c, NULL);
			continue;
		}
		if (private_path(c) || covered(r, *n_bound, bound, c))
			continue;
		if (stat(c, &st) || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
			/* Sockets, FIFOs and devices stay out: a bound socket
			 * is connectable even on a read-only mount. */
			sg_debug("sandbox root: %s is not a file or directory; left out", c);
			continue;
		}
		err = ensure_parent(rp, c);
		if (!err && !planned(rp, SB_OP_DIR, c))
			err = add_op(rp, S_ISDIR(st.st_mode) ? SB_OP_DIR : SB_OP_FILE, 0, c, NULL);
		err = err ?: add_op(rp, SB_OP_BIND, MS_RDONLY | MS_NOSUID | MS_NODEV, c, c);
		bound[(*n_bound)++] = i;
	}
	return err;
}

/* The symlinks met while resolving, where no bind shows them already. */
static int plan_links(struct sb_root_plan *rp, const struct resolved *r, const size_t *bound,
		      size_t n_bound)
{
	int err = 0;

	for (size_t i = 0; i < r->links.n && !err; i++) {
		const char *at = r->links.path[i];

		if (private_path(at) || covered(r, n_bound, bound, at) ||
		    planned(rp, SB_OP_SYMLINK, at))
			continue;
		err = ensure_parent(rp, at);
		err = err ?: add_op(rp, SB_OP_SYMLINK, 0, at, r->links.target[i]);
	}
	return err;
}

static void resolved_free(struct resolved *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->canon[i]);
	for (size_t i = 0; i < r->links.n; i++) {
		free(r->links.path[i]);
		free(r->links.target[i]);
	}
	free(r->canon);
	free(r->links.path);
	free(r->links.target);
}

int sb_root_plan(struct sb_root_plan *rp, const struct sg_policy *p, const char *scratch,
		 const char *base, bool exec_in_scratch, char *detail, size_t dlen)
{
	unsigned long scratch_flags = MS_NOSUID | MS_NODEV | (exec_in_scratch ? 0 : MS_NOEXEC);
	struct resolved r = { 0 };
	size_t *bound = NULL, n_bound = 0;
	int err;

	memset(rp, 0, sizeof(*rp));
	snprintf(rp->base, sizeof(rp->base), "%s", base);
	put_str(rp, ""); /* offset 0: "none" */
	if (!rp->arena)
		return -ENOMEM;
	err = resolve_all(p, &r, detail, dlen);
	if (!err && !(bound = calloc(r.n + 1, sizeof(*bound))))
		err = -ENOMEM;
	err = err ?: plan_private(rp, scratch, exec_in_scratch);
	err = err ?: plan_inference_devices(rp, p, detail, dlen);
	err = err ?: plan_policy(rp, &r, bound, &n_bound, detail, dlen);
	err = err ?: plan_links(rp, &r, bound, n_bound);
	/* The scratch last: its mount point may lie in a read-only bind or
	 * in the private /tmp (then it exists, or is made in the scratch's
	 * own .tmp). */
	if (!err && !covered(&r, n_bound, bound, scratch))
		err = ensure_dirs(rp, scratch);
	err = err ?: add_op(rp, SB_OP_BIND, scratch_flags, scratch, scratch);
	err = err ?: add_op(rp, SB_OP_REMOUNT_RO, MS_NOSUID | MS_NOEXEC, "/dev", NULL);
	err = err ?: add_op(rp, SB_OP_REMOUNT_RO, MS_NOSUID | MS_NODEV, "/", NULL);
	free(bound);
	resolved_free(&r);
	if (err == -ENOMEM)
		snprintf(detail, dlen, "out of memory planning the sandbox root");
	if (err)
		sb_root_plan_free(rp);
	return err;
}

void sb_root_plan_free(struct sb_root_plan *rp)
{
	free(rp->ops);
	free(rp->arena);
	rp->ops = NULL;
	rp->arena = NULL;
	rp->n_ops = rp->cap_ops = rp->len = rp->cap = 0;
}

/* ---- building (child) ------------------------------------------------- */

/* base + path into buf, without snprintf (async-signal-safe). */
static int join(char *buf, size_t len, const char *base, const char *path)
{
	size_t b = strlen(base), p = strlen(path);

	if (!strcmp(path, "/"))
		p = 0;
	if (b + p + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf, base, b);
	memcpy(buf + b, path, p);
	buf[b + p] = '\0';
	return 0;
}

static int run_op(const struct sb_root_plan *rp, const struct sb_root_op *op, int landlock_fd,
		  uint64_t landlock_read)
{
	const char *src = rp->arena + op->src;
	char at[PATH_MAX];
	int fd, err = join(at, sizeof(at), rp->base, rp->arena + op->path);

	if (err)
		return err;
	switch (op->kind) {
	case SB_OP_DIR:
		return mkdir(at, 0755) && errno != EEXIST ? -errno : 0;
	case SB_OP_FILE:
		/* mknod, not open: in the sandbox's cgroup the agent judges
		 * every open, and this file is no tenant's business. */
		return mknod(at, S_IFREG | 0444, 0) && errno != EEXIST ? -errno : 0;
	case SB_OP_SYMLINK:
		return symlink(src, at) ? -errno : 0;
	case SB_OP_BIND:
		if (mount(src, at, NULL, MS_BIND, NULL))
			return -errno;
		return mount(NULL, at, NULL, MS_BIND | MS_REMOUNT | op->flags, NULL) ? -errno : 0;
	case SB_OP_TMPFS:
		return mount("sandguard", at, "tmpfs", op->flags, src) ? -errno : 0;
	case SB_OP_PROC:
		return mount("proc", at, "proc", op->flags, NULL) ? -errno : 0;
	case SB_OP_REMOUNT_RO:
		return mount(NULL, at, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | op->flags, NULL)
			       ? -errno
			       : 0;
	case SB_OP_LANDLOCK_RD:
		if (landlock_fd < 0 || !landlock_read)
			return 0;
		fd = open(at, O_PATH | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOENT ? 0 : -errno;
		err = landlock_allow_fd(landlock_fd, fd, landlock_read);
		close(fd);
		return err;
	}
	return -EINVAL;
}

int sb_root_enter(const struct sb_root_plan *rp, int landlock_fd, uint64_t landlock_read,
		  size_t *failed_op)
{
	int err;

	*failed_op = rp->n_ops; /* "the root itself" */
	/* Nothing done below may propagate back to the host's mounts. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return -errno;
	if (mount("sandguard-root", rp->base, "tmpfs", MS_NOSUID | MS_NODEV, ROOT_TMPFS_OPTS))
		return -errno;
	for (size_t i = 0; i < rp->n_ops; i++) {
		err = run_op(rp, &rp->ops[i], landlock_fd, landlock_read);
		if (err) {
			*failed_op = i;
			return err;
		}
	}
	/* pivot_root(".", "."): the old root ends up on top of the new one,
	 * and a lazy unmount of "." drops it, with every host mount in it. */
	if (chdir(rp->base) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/"))
		return -errno;
	return 0;
}
