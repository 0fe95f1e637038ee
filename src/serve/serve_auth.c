/* Tenant tokens: loading DIR (see serve_auth.h), re-reading it when due,
 * and finding a token's tenant in constant time. A token never reaches a
 * log line or an error message: errors name the file and the line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "serve_auth.h"

#define TOKEN_FILE_MAX (64u << 10) /* one tenant's file */

struct token_entry {
	char tenant[SG_TENANT_MAX];
	unsigned char token[TOKEN_MAX]; /* zero-padded: every comparison reads all of it */
	size_t len;
};

struct token_set {
	struct token_entry *v;
	size_t n;
};

struct serve_tokens {
	char dir[4096];
	pthread_rwlock_t lock; /* over `set` */
	struct token_set set;
	atomic_ullong next_load_ms;
	atomic_bool last_load_failed; /* warn once per failing streak */
};

bool serve_token_valid(const char *token, size_t len)
{
	if (len < TOKEN_MIN || len > TOKEN_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = token[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == '~'))
			return false;
	}
	return true;
}

static void set_free(struct token_set *s)
{
	if (s->v) /* no secret outlives its table in freed memory */
		explicit_bzero(s->v, s->n * sizeof(*s->v));
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int set_add(struct token_set *s, size_t *cap, const char *tenant, const char *tok,
		   size_t len)
{
	struct token_entry *e;

	if (s->n == TOKENS_MAX)
		return -E2BIG;
	if (s->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct token_entry *v = calloc(ncap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		if (s->v) {
			memcpy(v, s->v, s->n * sizeof(*v));
			explicit_bzero(s->v, s->n * sizeof(*v));
			free(s->v);
		}
		s->v = v;
		*cap = ncap;
	}
	e = &s->v[s->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->tenant, sizeof(e->tenant), "%s", tenant);
	memcpy(e->token, tok, len);
	e->len = len;
	return 0;
}

/* Index of the entry holding `tok`, or -1. Every entry is compared over
 * all TOKEN_MAX bytes whatever matches, so the time taken says nothing
 * about how close a guess came. */
static long set_find(const struct token_set *s, const char *tok, size_t len)
{
	unsigned char probe[TOKEN_MAX] = { 0 };
	long found = -1;

	if (len > TOKEN_MAX)
		return -1;
	memcpy(probe, tok, len);
	for (size_t i = 0; i < s->n; i++) {
		unsigned diff = (unsigned)(s->v[i].len ^ len);

		for (size_t j = 0; j < TOKEN_MAX; j++)
			diff |= s->v[i].token[j] ^ probe[j];
		/* diff < 256, so (diff - 1) has its top bit set iff diff is 0:
		 * mask is all ones on a match, else 0, with no branch on it. */
		unsigned eq = ((diff - 1u) >> 31) & 1u;
		long mask = -(long)eq;

		found = (found & ~mask) | ((long)i & mask);
	}
	explicit_bzero(probe, sizeof(probe));
	return found;
}

/* One tenant's file: every token line into `s`. */
static int load_file(const char *dir, const char *name, struct token_set *s, size_t *cap, char *err,
		     size_t err_len)
{
	char path[4096 + 256], *text = NULL, *line, *save = NULL;
	struct stat st;
	size_t len, lineno = 0;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &st)) {
		ret = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(err, err_len,
			 "%s: a directory, expected a token file named after a tenant", path);
		return -EINVAL;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		snprintf(err, err_len,
			 "%s: readable or writable by every user (mode %04o): chmod o-rw, or "
			 "defaultMode 0400 on the Secret volume",
			 path, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	ret = fs_read_all(path, TOKEN_FILE_MAX, &text, &len);
	if (ret) {
		snprintf(err, err_len, "%s: %s", path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t n;

		lineno++;
		while (*line == ' ' || *line == '\t')
			line++;
		n = strlen(line);
		while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
			n--;
		if (n == 0 || line[0] == '#')
			continue;
		if (!serve_token_valid(line, n)) {
			snprintf(err, err_len,
				 "%s:%zu: not a token: expected %d to %d characters of "
				 "[A-Za-z0-9._~-] (the token itself is not shown)",
				 path, lineno, TOKEN_MIN, TOKEN_MAX);
			ret = -EINVAL;
			break;
		}
		if (set_find(s, line, n) >= 0) {
			snprintf(
				err, err_len,
				"%s:%zu: this token is listed twice (here or in another tenant's file)",
				path, lineno);
			ret = -EINVAL;
			break;
		}
		ret = set_add(s, cap, name, line, n);
		if (ret) {
			snprintf(err, err_len, "%s: %s", path,
				 ret == -E2BIG ? "too many tokens in the directory"
					       : strerror(-ret));
			break;
		}
	}
	explicit_bzero(text, len);
	free(text);
	return ret;
}

static int load_dir(const char *dir, struct token_set *out, char *err, size_t err_len)
{
	struct token_set s = { 0 };
	size_t cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);
	int ret = 0;

	if (!d) {
		ret = -errno;
		snprintf(err, err_len, "tokens directory %s: %s", dir, strerror(errno));
		return ret;
	}
	while (!ret && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue; /* ., .., and a Secret volume's ..data and ..<timestamp> */
		if (!tenant_name_valid(de->d_name)) {
			snprintf(err, err_len,
				 "%s/%s: not a tenant name ([a-z0-9][a-z0-9_-]{0,62}): each file "
				 "of the tokens directory is named after its tenant",
				 dir, de->d_name);
			ret = -EINVAL;
			break;
		}
		ret = load_file(dir, de->d_name, &s, &cap, err, err_len);
	}
	closedir(d);
	if (!ret && s.n == 0) {
		snprintf(err, err_len, "tokens directory %s holds no token", dir);
		ret = -ENOENT;
	}
	if (ret) {
		set_free(&s);
		return ret;
	}
	*out = s;
	return 0;
}

int serve_tokens_open(const char *dir, struct serve_tokens **out, char *err, size_t err_len)
{
	struct serve_tokens *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return -ENOMEM;
	if (strlen(dir) >= sizeof(t->dir)) {
		snprintf(err, err_len, "tokens directory path too long");
		free(t);
		return -ENAMETOOLONG;
	}
	snprintf(t->dir, sizeof(t->dir), "%s", dir);
	ret = load_dir(dir, &t->set, err, err_len);
	if (ret) {
		free(t);
		return ret;
	}
	pthread_rwlock_init(&t->lock, NULL);
	atomic_store(&t->next_load_ms, clock_ms(CLOCK_MONOTONIC) + TOKENS_RELOAD_MS);
	*out = t;
	return 0;
}

void serve_tokens_free(struct serve_tokens *t)
{
	if (!t)
		return;
	set_free(&t->set);
	pthread_rwlock_destroy(&t->lock);
	free(t);
}

/* Re-read the directory when due; one caller does it, the others go on
 * with the tokens in force. */
static void reload_if_due(struct serve_tokens *t)
{
	unsigned long long due = atomic_load(&t->next_load_ms), now = clock_ms(CLOCK_MONOTONIC);
	struct token_set fresh, old;
	char err[512];

	if (now < due ||
	    !atomic_compare_exchange_strong(&t->next_load_ms, &due, now + TOKENS_RELOAD_MS))
		return;
	if (load_dir(t->dir, &fresh, err, sizeof(err))) {
		if (!t->last_load_failed)
			sg_error("serve: tokens not reloaded, the previous ones stay in force: %s",
				 err);
		t->last_load_failed = true;
		return;
	}
	if (t->last_load_failed)
		sg_info("serve: tokens directory %s valid again (%zu tokens)", t->dir, fresh.n);
	t->last_load_failed = false;
	pthread_rwlock_wrlock(&t->lock);
	old = t->set;
	t->set = fresh;
	pthread_rwlock_unlock(&t->lock);
	set_free(&old);
}

bool serve_tokens_lookup(struct serve_tokens *t, const char *token, size_t len,
			 char tenant[SG_TENANT_MAX])
{
	long i;

	if (!serve_token_valid(token, len))
		return false;
	reload_if_due(t);
	pthread_rwlock_rdlock(&t->lock);
	i = set_find(&t->set, token, len);
	if (i >= 0)
		snprintf(tenant, SG_TENANT_MAX, "%s", t->set.v[i].tenant);
	pthread_rwlock_unlock(&t->lock);
	return i >= 0;
}

size_t serve_tokens_count(struct serve_tokens *t)
{
	size_t n;

	reload_if_due(t);
	pthread_rwlock_rdlock(&t->lock);
	n = t->set.n;
	pthread_rwlock_unlock(&t->lock);
	return n;
}
