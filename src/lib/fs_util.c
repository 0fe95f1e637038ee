/* Small file helpers shared by the executor's state, log and input code. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fs_util.h"

int fs_mkdir_p(const char *dir, mode_t mode)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (!n || n >= sizeof(path))
		return -ENAMETOOLONG;
	/* Most calls find the whole path there already: one mkdir, not one
	 * per component (a cold launch makes half a dozen of these calls). */
	if (!mkdir(dir, mode) || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	memcpy(path, dir, n + 1);
	for (char *p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(path, mode) && errno != EEXIST)
			return -errno;
		*p = saved;
		if (!saved)
			break;
	}
	return 0;
}

int fs_env_dir(const char *env, const char *def, char *buf, size_t len)
{
	const char *v = getenv(env);

	if (!v || !*v)
		v = def;
	if ((size_t)snprintf(buf, len, "%s", v) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int fs_run_dir(char *buf, size_t len)
{
	return fs_env_dir("SANDGUARD_RUN_DIR", FS_RUN_DIR_DEFAULT, buf, len);
}

int fs_run_subdir(const char *sub, mode_t mode, char *buf, size_t len)
{
	char run[PATH_MAX];
	int err = fs_run_dir(run, sizeof(run));

	if (err)
		return err;
	if ((size_t)snprintf(buf, len, "%s/%s", run, sub) >= len)
		return -ENAMETOOLONG;
	return mode ? fs_mkdir_p(buf, mode) : 0;
}

void fs_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int fs_read_all(const char *path, size_t max, char **data, size_t *len)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO, ret;

	if (fd < 0)
		return -errno;
	ret = fs_read_fd(fd, max, data, len);
	if (fd != STDIN_FILENO)
		close(fd);
	return ret;
}

int fs_read_fd(int fd, size_t max, char **data, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = NULL;
	int ret = 0;

	buf = malloc(cap + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;
			if (cap > max) {
				ret = -EFBIG;
				goto out;
			}
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				ret = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		if (!r)
			break;
		n += r;
	}
	if (n > max) {
		ret = -EFBIG;
		goto out;
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	return ret;
}

/* One "key value" line (without its newline): 1 with *v set when it is
 * key's, with a decimal value and nothing after it. */
static int keyed_line(const char *line, const char *key, size_t klen, uint64_t *v)
{
	char *end;
	unsigned long long n;

	if (strncmp(line, key, klen) || line[klen] != ' ' || !isdigit(line[klen + 1]))
		return 0;
	errno = 0;
	n = strtoull(line + klen + 1, &end, 10);
	if (errno || *end)
		return 0;
	*v = n;
	return 1;
}

/* By read() into a buffer on the stack, not stdio: the executor reads a
 * few of these files for every run (cpu.stat, memory.events, ...), and
 * fopen()'s allocations and its fstat() were a tenth of what reading them
 * cost (docs/performance-executor-cost.md). */
int fs_pread_keyed(int fd, const char *key, uint64_t *v)
{
	char buf[4096];
	size_t klen = strlen(key), have = 0;
	bool skipping = false; /* within a line longer than buf: passed over */
	off_t at = 0;
	int ret = 0;

	/* Line by line, so that a key of any length is compared whole and a
	 * malformed line cannot hide the lines after it. */
	while (!ret) {
		ssize_t r = pread(fd, buf + have, sizeof(buf) - 1 - have, at);
		char *line = buf, *nl;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno; /* EISDIR, EIO */
			break;
		}
		at += r;
		have += (size_t)r;
		buf[have] = '\0';
		while (!ret && (nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = '\0';
			ret = skipping ? 0 : keyed_line(line, key, klen, v);
			skipping = false;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		if (ret || r == 0) {
			/* the last line, without a newline */
			if (!ret && have && !skipping)
				ret = keyed_line(line, key, klen, v);
			break;
		}
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			skipping = true;
			have = 0;
		}
	}
	return ret;
}

int fs_read_keyed(const char *dir, const char *file, const char *key, uint64_t *v)
{
	char path[PATH_MAX];
	int fd, ret;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = fs_pread_keyed(fd, key, v);
	close(fd);
	return ret;
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, ret = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%d", path, (int)getpid(),
			     (int)gettid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, (const char *)data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			ret = -errno;
			break;
		}
		off += w;
	}
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}
