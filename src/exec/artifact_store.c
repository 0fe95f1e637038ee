/* The verified-digest cache and the store (see src/exec/artifact_store.h
 * and the design in src/exec/artifact.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "artifact.h"
#include "artifact/artifact_bound.h"
#include "artifact_store.h"
#include "lib/fs_util.h"
#include "node/tenant_state.h"

int artifact_store_dir(char *buf, size_t len)
{
	const char *env = getenv("SANDGUARD_ARTIFACT_DIR");
	char state[PATH_MAX];
	int ret;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return 0;
	}
	ret = tenant_state_dir(state, sizeof(state));
	if (!ret)
		snprintf(buf, len, "%s/artifacts", state);
	return ret;
}

/* <store>/<sub>, made (0700: only root reads what was verified) when
 * missing. */
static int store_sub(const char *sub, char *buf, size_t len)
{
	char dir[PATH_MAX];
	int ret = artifact_store_dir(dir, sizeof(dir));

	if (ret)
		return ret;
	snprintf(buf, len, "%s/%s", dir, sub);
	return access(buf, F_OK) ? fs_mkdir_p(buf, 0700) : 0;
}

int artifact_store_path(const char *sub, const char *name, char *buf, size_t len)
{
	char dir[PATH_MAX];
	int ret = store_sub(sub, dir, sizeof(dir));

	if (!ret)
		snprintf(buf, len, "%s/%s", dir, name);
	return ret;
}

/* The cache key of an open file: what any write to it changes. */
static void stat_key(const struct stat *st, char *buf, size_t len)
{
	snprintf(buf, len, "%llx-%llu-%lld-%lld.%09ld-%lld.%09ld", (unsigned long long)st->st_dev,
		 (unsigned long long)st->st_ino, (long long)st->st_size,
		 (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec,
		 st->st_ctim.tv_nsec);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The digest noted for this key: 0, or -ENOENT (a miss) / -errno. */
static int index_get(const struct stat *st, char hex[SHA256_HEX])
{
	char dir[PATH_MAX], key[160], path[PATH_MAX];
	int ret = store_sub("index", dir, sizeof(dir)), fd;
	ssize_t n;

	if (ret)
		return ret;
	stat_key(st, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/%s", dir, key);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, hex, SHA256_HEX - 1);
	close(fd);
	if (n != SHA256_HEX - 1 || strspn(hex, "0123456789abcdef") < SHA256_HEX - 1)
		return -ENOENT;
	hex[SHA256_HEX - 1] = '\0';
	return 0;
}

/* Notes the digest of the file whose stat was `before` and is `after`
 * once read: only when nothing changed while it was read, and its ctime
 * is not so recent that a write in the same tick could follow. */
static void index_put(const struct stat *before, const struct stat *after,
		      const char hex[SHA256_HEX])
{
	char dir[PATH_MAX], key[160], path[PATH_MAX];
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (!same_file(before, after) || now.tv_sec - after->st_ctim.tv_sec < ARTIFACT_RACY_S ||
	    store_sub("index", dir, sizeof(dir)))
		return;
	stat_key(after, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/%s", dir, key);
	if (!fs_write_atomic(path, hex, SHA256_HEX - 1, 0600)) /* failed: it costs a hash */
		artifact_store_bound(dir, UINT64_MAX, ARTIFACT_NOTES_MAX);
}

/* The store's copy of `hex`, when it holds one of `size` bytes. */
static int store_read(const char hex[SHA256_HEX], off_t size, char **data, size_t *len)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int fd, ret = store_sub("sha256", dir, sizeof(dir));
	struct stat st;

	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s", dir, hex);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size != size) {
		close(fd);
		return -ENOENT;
	}
	futimens(fd, NULL); /* its last use: the bound removes the least recent */
	ret = fs_read_fd(fd, (size_t)size, data, len);
	close(fd);
	if (!ret && *len != (size_t)size) {
		free(*data);
		*data = NULL;
		ret = -ENOENT;
	}
	return ret;
}

static void store_put(const char hex[SHA256_HEX], const char *data, size_t len)
{
	char dir[PATH_MAX], path[PATH_MAX];

	if (store_sub("sha256", dir, sizeof(dir)))
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, hex);
	if (access(path, F_OK) && !fs_write_atomic(path, data, len, 0600)) /* failed: a hash */
		artifact_store_bound(dir, artifact_store_max_bytes(), SIZE_MAX);
}

int artifact_file(const char *path, bool use_cache, char hex[SHA256_HEX], char **data, size_t *len,
		  char *detail, size_t dlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), ret;
	struct stat before, after;

	if (fd < 0) {
		ret = -errno;
		snprintf(detail, dlen, "cannot open %s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &before) || !S_ISREG(before.st_mode)) {
		ret = S_ISREG(before.st_mode) ? -errno : -EINVAL;
		snprintf(detail, dlen, "%s is not a regular file", path);
		close(fd);
		return ret;
	}
	if (data && before.st_size > (off_t)ARTIFACT_FILE_MAX) {
		snprintf(detail, dlen, "%s is %lld bytes; a pinned program is at most %u", path,
			 (long long)before.st_size, ARTIFACT_FILE_MAX);
		close(fd);
		return -EFBIG;
	}
	if (use_cache && !index_get(&before, hex) &&
	    (!data || !store_read(hex, before.st_size, data, len))) {
		close(fd);
		return 0;
	}
	ret = sha256_fd(fd, hex, data, len, ARTIFACT_FILE_MAX);
	if (!ret && use_cache && !fstat(fd, &after)) {
		if (data)
			store_put(hex, *data, *len);
		index_put(&before, &after, hex);
	}
	close(fd);
	if (ret)
		snprintf(detail, dlen, "cannot read %s: %s", path, strerror(-ret));
	return ret;
}

/* ---- directories: the manifest -------------------------------------- */

struct walk {
	char **paths;
	size_t n, cap;
	size_t root_len;
	int err;
	char bad[PATH_MAX];
};

static struct walk *walking; /* nftw() passes no argument; one walk at a time */

static int collect(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	struct walk *w = walking;
	char **grown;

	(void)st;
	(void)ftw;
	if (type == FTW_D || type == FTW_DP)
		return 0;
	if (type != FTW_F || !S_ISREG(st->st_mode)) {
		snprintf(w->bad, sizeof(w->bad), "%s", path);
		w->err = -EINVAL;
		return 1;
	}
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		grown = realloc(w->paths, w->cap * sizeof(*grown));
		if (!grown) {
			w->err = -ENOMEM;
			return 1;
		}
		w->paths = grown;
	}
	if (!(w->paths[w->n] = strdup(path))) {
		w->err = -ENOMEM;
		return 1;
	}
	w->n++;
	return 0;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;

/* One manifest line, hashed, and appended to *text when it is kept. */
static int manifest_line(struct sha256 *s, const char *file_hex, const char *rel, char **text,
			 size_t *len, size_t *cap)
{
	size_t n = SHA256_HEX - 1 + 2 + strlen(rel) + 1;

	sha256_update(s, file_hex, SHA256_HEX - 1);
	sha256_update(s, "  ", 2);
	sha256_update(s, rel, strlen(rel));
	sha256_update(s, "\n", 1);
	if (!text)
		return 0;
	if (*len + n + 1 > *cap) {
		size_t grown_cap = (*cap + n + 1) * 2;
		char *grown = realloc(*text, grown_cap);

		if (!grown)
			return -ENOMEM;
		*text = grown;
		*cap = grown_cap;
	}
	*len += (size_t)snprintf(*text + *len, *cap - *len, "%s  %s\n", file_hex, rel);
	return 0;
}

int artifact_dir(const char *path, bool use_cache, char hex[SHA256_HEX], char **text,
		 size_t *text_len, char *detail, size_t dlen)
{
	struct walk w = { .root_len = strlen(path) };
	size_t cap = 0, len = 0;
	uint8_t digest[SHA256_LEN];
	struct sha256 s;
	int ret;

	if (text)
		*text = NULL;
	pthread_mutex_lock(&walk_lock);
	walking = &w;
	ret = nftw(path, collect, 32, FTW_PHYS);
	walking = NULL;
	pthread_mutex_unlock(&walk_lock);
	if (ret < 0 || w.err) {
		ret = w.err ? w.err : -errno;
		if (ret == -EINVAL)
			snprintf(detail, dlen,
				 "%s is not a regular file: a pinned directory holds files and "
				 "directories only",
				 w.bad);
		else
			snprintf(detail, dlen, "cannot list %s: %s", path, strerror(-ret));
		goto out;
	}
	qsort(w.paths, w.n, sizeof(*w.paths), by_path);
	sha256_init(&s);
	for (size_t i = 0; i < w.n && !ret; i++) {
		char file_hex[SHA256_HEX];
		const char *rel = w.paths[i] + w.root_len + (w.paths[i][w.root_len] == '/');

		ret = artifact_file(w.paths[i], use_cache, file_hex, NULL, NULL, detail, dlen);
		if (ret)
			break;
		ret = manifest_line(&s, file_hex, rel, text, &len, &cap);
	}
	if (!ret) {
		sha256_final(&s, digest);
		sha256_to_hex(digest, hex);
	}
	if (!ret && text && !*text && !(*text = calloc(1, 1)))
		ret = -ENOMEM;
	if (text && ret) {
		free(*text);
		*text = NULL;
	}
	if (text_len)
		*text_len = len;
out:
	for (size_t i = 0; i < w.n; i++)
		free(w.paths[i]);
	free(w.paths);
	return ret;
}

void artifact_verdict_key(const char digest[SHA256_HEX], const char *sig, size_t sig_len,
			  const char (*keys)[SG_PUBKEY_LEN], int n_keys, char key[SHA256_HEX])
{
	static const char tag[] = "sandguard signature verdict 1\n";
	uint8_t out[SHA256_LEN];
	struct sha256 h;
	uint64_t n = sig_len;

	sha256_init(&h);
	sha256_update(&h, tag, sizeof(tag) - 1);
	sha256_update(&h, digest, SHA256_HEX - 1);
	/* The signature's length first: its bytes cannot run into the keys'. */
	sha256_update(&h, &n, sizeof(n));
	sha256_update(&h, sig, sig_len);
	for (int i = 0; i < n_keys; i++)
		sha256_update(&h, keys[i], strlen(keys[i]) + 1);
	sha256_final(&h, out);
	sha256_to_hex(out, key);
}

bool artifact_verdict_known(const char key[SHA256_HEX])
{
	char path[PATH_MAX];
	struct stat st;

	return !artifact_store_path("signed", key, path, sizeof(path)) && !lstat(path, &st) &&
	       S_ISREG(st.st_mode);
}

void artifact_verdict_note(const char key[SHA256_HEX])
{
	char path[PATH_MAX];

	if (artifact_store_path("signed", key, path, sizeof(path)) ||
	    fs_write_atomic(path, "", 0, 0600)) /* a cache: a failed write costs a check */
		return;
	*strrchr(path, '/') = '\0';
	artifact_store_bound(path, UINT64_MAX, ARTIFACT_NOTES_MAX);
}
