/* The /run_code build cache: see run_build_cache.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "run_build_cache.h"
#include "serve_internal.h"
#include "telemetry/journal.h"

#define MAGIC        "sandguard-build-cache 1"
#define ENTRY_MAX    (1ull << 30) /* no program of a policy's output cap is larger */
#define EVICT_SCAN   4096         /* entries looked at per tenant when over its bound */
#define KEY_MATERIAL "sandguard /run_code build key 1"
#define FAILED_KEPT  64    /* compiles that left no program, remembered... */
#define FAILED_MS    60000 /* ...this long */

/* What a language's programs were when they were hashed. */
struct tool_seen {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

struct compiler_identity {
	bool known;
	struct tool_seen seen[SERVE_LANG_TOOLS];
	char hex[SHA256_HEX];
};

/* A compile under way: identical requests wait for it. */
struct in_flight {
	char tenant[64];
	char hex[SHA256_HEX];
	struct in_flight *next;
};

struct run_build_cache {
	char dir[PATH_MAX];
	uint64_t tenant_bytes;
	pthread_mutex_t lock; /* the fields below */
	pthread_cond_t done;  /* a compile in flight ended */
	struct in_flight *flying;
	/* Compiles that left nothing to keep (a compile error): requests
	 * that waited for one compile on their own, at once, not in turn. */
	struct in_flight failed[FAILED_KEPT];
	uint64_t failed_at[FAILED_KEPT];
	unsigned next_failed;
	struct compiler_identity compilers[LANG__COUNT];
};

/* A directory of ours alone: made 0700 if missing; refused when another
 * user owns it or others may write in it. */
static int own_dir(const char *path, char *err, size_t err_len)
{
	struct stat st;

	if (mkdir(path, 0700) && errno != EEXIST) {
		snprintf(err, err_len, "cannot make %s: %s", path, strerror(errno));
		return -errno;
	}
	if (lstat(path, &st)) {
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(err, err_len,
			 "%s must be a directory of uid %u that no one else may write in "
			 "(mode 0700)",
			 path, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}

int run_build_cache_open(const char *dir, uint64_t tenant_mb, struct run_build_cache **out,
			 char *err, size_t err_len)
{
	struct run_build_cache *bc;
	char state[PATH_MAX];
	int ret;

	*out = NULL;
	if (!tenant_mb)
		return 0;
	bc = calloc(1, sizeof(*bc));
	if (!bc) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	if (!dir && (ret = journal_state_dir(state, sizeof(state)))) {
		snprintf(err, err_len, "the build cache: no state directory: %s", strerror(-ret));
		free(bc);
		return ret;
	}
	/* Only the cache's own directory must be ours alone: a directory of
	 * someone else's cannot be swapped in for it (we check its owner),
	 * and every entry is checked again before use. */
	if (dir) {
		snprintf(bc->dir, sizeof(bc->dir), "%s", dir);
	} else {
		fs_mkdir_p(state, 0755); /* as the journal makes it */
		snprintf(bc->dir, sizeof(bc->dir), "%s/%s", state, RUN_BUILD_CACHE_SUBDIR);
	}
	ret = own_dir(bc->dir, err, err_len);
	if (ret) {
		free(bc);
		return ret;
	}
	bc->tenant_bytes = tenant_mb << 20;
	pthread_mutex_init(&bc->lock, NULL);
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* the waits' deadlines */
	pthread_cond_init(&bc->done, &attr);
	pthread_condattr_destroy(&attr);
	*out = bc;
	return 0;
}

void run_build_cache_free(struct run_build_cache *bc)
{
	if (!bc)
		return;
	pthread_mutex_destroy(&bc->lock);
	pthread_cond_destroy(&bc->done);
	free(bc);
}

/* ---- the key ------------------------------------------------------------ */

static void hash_field(struct sha256 *s, const void *data, size_t len)
{
	uint64_t n = len;

	sha256_update(s, &n, sizeof(n)); /* lengths first: no two lists hash alike */
	sha256_update(s, data, len);
}

/* The language's programs, hashed again when one changed on disk: at
 * first use, outside the lock (g++'s 37 MB take 0.8 s on a 2-core VM), so
 * that other requests are not held up meanwhile. */
static int compiler_identity(struct run_build_cache *bc, const struct serve_langs *l, int lang,
			     char hex[SHA256_HEX])
{
	struct compiler_identity *ci = &bc->compilers[lang];
	struct tool_seen now[SERVE_LANG_TOOLS] = { 0 };
	uint8_t d[SHA256_BYTES];
	struct sha256 s;
	bool known;

	for (int i = 0; i < l->n_tools[lang]; i++) {
		struct stat st;

		if (stat(l->tools[lang][i], &st))
			return -errno;
		now[i] = (struct tool_seen){ st.st_dev, st.st_ino, st.st_size, st.st_mtim };
	}
	pthread_mutex_lock(&bc->lock);
	known = ci->known && !memcmp(now, ci->seen, sizeof(now));
	if (known)
		memcpy(hex, ci->hex, SHA256_HEX);
	pthread_mutex_unlock(&bc->lock);
	if (known)
		return 0;
	sha256_init(&s);
	for (int i = 0; i < l->n_tools[lang]; i++) {
		char tool[SHA256_HEX];
		int ret = sha256_file(l->tools[lang][i], tool);

		if (ret)
			return ret;
		hash_field(&s, l->tools[lang][i], strlen(l->tools[lang][i]));
		hash_field(&s, tool, strlen(tool));
	}
	sha256_final(&s, d);
	sha256_to_hex(d, hex);
	pthread_mutex_lock(&bc->lock);
	memcpy(ci->hex, hex, SHA256_HEX);
	memcpy(ci->seen, now, sizeof(now));
	ci->known = true;
	pthread_mutex_unlock(&bc->lock);
	return 0;
}

int run_build_cache_key(struct run_build_cache *bc, const char *tenant, const struct serve_langs *l,
			int lang, const struct lang_plan *lp, const struct sandbox_file *files,
			size_t n_files, struct run_build_key *key)
{
	char compiler[SHA256_HEX];
	uint8_t d[SHA256_BYTES];
	struct sha256 s;
	int ret;

	ret = compiler_identity(bc, l, lang, compiler);
	if (ret)
		return ret;
	sha256_init(&s);
	hash_field(&s, KEY_MATERIAL, strlen(KEY_MATERIAL));
	hash_field(&s, tenant, strlen(tenant));
	hash_field(&s, serve_lang_name(lang), strlen(serve_lang_name(lang)));
	hash_field(&s, compiler, strlen(compiler));
	for (int i = 0; lp->compile[i]; i++)
		hash_field(&s, lp->compile[i], strlen(lp->compile[i]));
	hash_field(&s, lp->artifact, strlen(lp->artifact));
	for (size_t i = 0; i < n_files + lp->n_setup; i++) {
		const struct sandbox_file *f = i < n_files ? &files[i] : &lp->setup[i - n_files];

		hash_field(&s, f->path, strlen(f->path));
		hash_field(&s, &f->mode, sizeof(f->mode));
		hash_field(&s, f->data, f->len);
	}
	sha256_final(&s, d);
	sha256_to_hex(d, key->hex);
	snprintf(key->tenant, sizeof(key->tenant), "%s", tenant);
	key->claimed = false;
	return 0;
}

/* ---- entries ------------------------------------------------------------ */

static void entry_path(const struct run_build_cache *bc, const struct run_build_key *key, char *buf,
		       size_t len)
{
	snprintf(buf, len, "%s/%s/%s", bc->dir, key->tenant, key->hex);
}

/* The digest an entry carries: of its key, compile_result and program. */
static void entry_digest(const struct run_build_key *key, const char *result, size_t result_len,
			 const void *program, size_t len, char hex[SHA256_HEX])
{
	uint8_t d[SHA256_BYTES];
	struct sha256 s;

	sha256_init(&s);
	hash_field(&s, key->hex, strlen(key->hex));
	hash_field(&s, result, result_len);
	hash_field(&s, program, len);
	sha256_final(&s, d);
	sha256_to_hex(d, hex);
}

/* An entry's bytes, if it is a regular file of ours alone with one link. */
static int read_entry(const char *path, uint64_t max, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), ret;
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) || st.st_nlink != 1 || (uint64_t)st.st_size > max) {
		close(fd);
		return -EPERM;
	}
	ret = fs_read_fd(fd, max, data, len);
	close(fd);
	return ret;
}

/* "MAGIC <digest> <result bytes> <program bytes>\n<result><program>":
 * 0 with the parts, or -EBADMSG naming what is wrong in `why`. */
static int parse_entry(const struct run_build_key *key, char *data, size_t len, void **program,
		       size_t *program_len, json_t **result, const char **why)
{
	char digest[SHA256_HEX], want[SHA256_HEX], *nl = memchr(data, '\n', len);
	unsigned long long rlen, plen;
	size_t head;

	*why = "a malformed header";
	if (!nl || (size_t)(nl - data) > 200)
		return -EBADMSG;
	*nl = '\0';
	if (sscanf(data, MAGIC " %64s %llu %llu", digest, &rlen, &plen) != 3 ||
	    strlen(digest) != SHA256_HEX - 1)
		return -EBADMSG;
	head = (size_t)(nl - data) + 1;
	*why = "a size that is not the file's (truncated?)";
	if (rlen > len || plen > len || head + rlen + plen != len)
		return -EBADMSG;
	entry_digest(key, data + head, rlen, data + head + rlen, plen, want);
	*why = "a digest that does not match its contents";
	if (strcmp(digest, want))
		return -EBADMSG;
	*why = "a compile_result that is not JSON";
	*result = json_loadb(data + head, rlen, 0, NULL);
	if (!*result)
		return -EBADMSG;
	*program = malloc(plen ? plen : 1);
	if (!*program) {
		json_decref(*result);
		*why = "out of memory";
		return -ENOMEM;
	}
	memcpy(*program, data + head + rlen, plen);
	*program_len = plen;
	return 0;
}

/* A verified entry, or none (a bad one is removed). */
static bool lookup(struct run_build_cache *bc, const struct run_build_key *key, void **program,
		   size_t *len, json_t **result)
{
	char path[PATH_MAX], *data = NULL;
	const char *why = "";
	size_t n;
	int ret = read_entry((entry_path(bc, key, path, sizeof(path)), path), ENTRY_MAX, &data, &n);

	if (ret == -ENOENT)
		return false;
	if (!ret)
		ret = parse_entry(key, data, n, program, len, result, &why);
	else
		why = ret == -EPERM ? "not a file of ours alone (owner, mode or links)"
				    : strerror(-ret);
	free(data);
	if (ret) {
		sg_warn("serve: build cache entry %s refused, compiled again: %s", path, why);
		unlink(path);
		return false;
	}
	utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW); /* recently used */
	return true;
}

static struct in_flight **find_flying(struct run_build_cache *bc, const struct run_build_key *key)
{
	struct in_flight **p = &bc->flying;

	while (*p && (strcmp((*p)->hex, key->hex) || strcmp((*p)->tenant, key->tenant)))
		p = &(*p)->next;
	return p;
}

/* Whether an identical compile left nothing lately. Under bc->lock. */
static bool failed_lately(const struct run_build_cache *bc, const struct run_build_key *key)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);

	for (int i = 0; i < FAILED_KEPT; i++)
		if (bc->failed_at[i] && now - bc->failed_at[i] < FAILED_MS &&
		    !strcmp(bc->failed[i].hex, key->hex) &&
		    !strcmp(bc->failed[i].tenant, key->tenant))
			return true;
	return false;
}

bool run_build_cache_get(struct run_build_cache *bc, struct run_build_key *key,
			 uint64_t wait_until_ms, void **program, size_t *len, json_t **result)
{
	struct in_flight *f;

	for (;;) {
		pthread_mutex_lock(&bc->lock);
		while (*find_flying(bc, key)) {
			struct timespec until;
			uint64_t now = clock_ms(CLOCK_MONOTONIC);

			if (now >= wait_until_ms) { /* compile it ourselves, unclaimed */
				pthread_mutex_unlock(&bc->lock);
				return false;
			}
			until.tv_sec = (time_t)(wait_until_ms / 1000);
			until.tv_nsec = (long)(wait_until_ms % 1000) * 1000000;
			pthread_cond_timedwait(&bc->done, &bc->lock, &until);
		}
		pthread_mutex_unlock(&bc->lock);
		if (lookup(bc, key, program, len, result))
			return true;
		pthread_mutex_lock(&bc->lock);
		if (failed_lately(bc, key)) {
			pthread_mutex_unlock(&bc->lock);
			return false; /* compile it ourselves, unclaimed */
		}
		if (!*find_flying(bc, key))
			break; /* nobody claimed it since: we do */
		pthread_mutex_unlock(&bc->lock);
	}
	f = calloc(1, sizeof(*f));
	if (f) {
		snprintf(f->tenant, sizeof(f->tenant), "%s", key->tenant);
		memcpy(f->hex, key->hex, SHA256_HEX);
		f->next = bc->flying;
		bc->flying = f;
		key->claimed = true;
	}
	pthread_mutex_unlock(&bc->lock);
	return false;
}

/* Beyond the tenant's bound: its least recently used entries go. */
static void evict(struct run_build_cache *bc, const char *tenant_dir)
{
	struct old {
		struct timespec mtime;
		off_t size;
		char name[SHA256_HEX];
	} *all = calloc(EVICT_SCAN, sizeof(*all));
	uint64_t total = 0;
	size_t n = 0;
	DIR *d = opendir(tenant_dir);
	struct dirent *e;

	while (all && d && n < EVICT_SCAN && (e = readdir(d))) {
		struct stat st;

		if (strlen(e->d_name) != SHA256_HEX - 1 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		all[n] = (struct old){ st.st_mtim, st.st_size, "" };
		memcpy(all[n++].name, e->d_name, SHA256_HEX);
		total += (uint64_t)st.st_size;
	}
	while (total > bc->tenant_bytes && n) {
		size_t oldest = 0;

		for (size_t i = 1; i < n; i++)
			if (all[i].mtime.tv_sec < all[oldest].mtime.tv_sec ||
			    (all[i].mtime.tv_sec == all[oldest].mtime.tv_sec &&
			     all[i].mtime.tv_nsec < all[oldest].mtime.tv_nsec))
				oldest = i;
		unlinkat(dirfd(d), all[oldest].name, 0);
		total -= (uint64_t)all[oldest].size;
		all[oldest] = all[--n];
	}
	if (d)
		closedir(d);
	free(all);
}

/* Written whole under a temporary name, then renamed into place
 * (fs_write_atomic()): a reader sees the old entry, the new one or none. */
static int store(struct run_build_cache *bc, const struct run_build_key *key, const void *program,
		 size_t len, json_t *result)
{
	char dir[PATH_MAX], path[PATH_MAX], digest[SHA256_HEX], head[256], err[256];
	char *text = json_dumps(result, JSON_COMPACT), *entry = NULL;
	size_t tlen = text ? strlen(text) : 0;
	int ret = -ENOMEM, n;

	snprintf(dir, sizeof(dir), "%s/%s", bc->dir, key->tenant);
	if (text) {
		entry_digest(key, text, tlen, program, len, digest);
		n = snprintf(head, sizeof(head), MAGIC " %s %zu %zu\n", digest, tlen, len);
		entry = malloc((size_t)n + tlen + len);
	}
	if (entry) {
		memcpy(entry, head, (size_t)n);
		memcpy(entry + n, text, tlen);
		memcpy(entry + n + tlen, program, len);
		ret = own_dir(dir, err, sizeof(err));
		entry_path(bc, key, path, sizeof(path));
		if (!ret)
			ret = fs_write_atomic(path, entry, (size_t)n + tlen + len, 0600);
	}
	free(entry);
	free(text);
	if (!ret)
		evict(bc, dir);
	return ret;
}

void run_build_cache_done(struct run_build_cache *bc, struct run_build_key *key,
			  const void *program, size_t len, json_t *result)
{
	struct in_flight **p, *f;
	int ret = program && result ? store(bc, key, program, len, result) : 0;

	if (ret)
		sg_warn("serve: build cache: cannot keep %s/%s: %s", key->tenant, key->hex,
			strerror(-ret));
	if (!key->claimed)
		return;
	pthread_mutex_lock(&bc->lock);
	p = find_flying(bc, key);
	f = *p;
	if (f)
		*p = f->next;
	if (!program) {
		struct in_flight *slot = &bc->failed[bc->next_failed % FAILED_KEPT];

		snprintf(slot->tenant, sizeof(slot->tenant), "%s", key->tenant);
		memcpy(slot->hex, key->hex, SHA256_HEX);
		bc->failed_at[bc->next_failed++ % FAILED_KEPT] = clock_ms(CLOCK_MONOTONIC);
	}
	pthread_cond_broadcast(&bc->done);
	pthread_mutex_unlock(&bc->lock);
	free(f);
	key->claimed = false;
}
