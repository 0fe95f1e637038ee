/* Identities resolved once per pass over many tenants (see compile_cache.h). */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "compile_cache.h"
#include "lib/host_path.h"
#include "lib/log.h"

struct cache_entry {
	char *key; /* "g:" pattern or "p:" path; NULL = free bucket */
	struct sg_identity *ids;
	int n;
	int err; /* a path that could not be resolved: -errno */
};

struct compile_cache {
	struct cache_entry *buckets;
	size_t cap, used;
};

/* The kernel's internal dev_t (MKDEV), which is what s_dev holds. */
uint32_t kernel_dev(dev_t d)
{
	return (major(d) << 20) | minor(d);
}

struct compile_cache *compile_cache_new(void)
{
	struct compile_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cap = 256;
	c->buckets = calloc(c->cap, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return NULL;
	}
	return c;
}

void compile_cache_free(struct compile_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->cap; i++) {
		free(c->buckets[i].key);
		free(c->buckets[i].ids);
	}
	free(c->buckets);
	free(c);
}

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct cache_entry *slot_for(struct cache_entry *b, size_t cap, const char *key)
{
	size_t i = hash(key) & (cap - 1);

	while (b[i].key && strcmp(b[i].key, key))
		i = (i + 1) & (cap - 1);
	return &b[i];
}

/* Keep the table at most half full. */
static int grow(struct compile_cache *c)
{
	struct cache_entry *nb = calloc(c->cap * 2, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	for (size_t i = 0; i < c->cap; i++)
		if (c->buckets[i].key)
			*slot_for(nb, c->cap * 2, c->buckets[i].key) = c->buckets[i];
	free(c->buckets);
	c->buckets = nb;
	c->cap *= 2;
	return 0;
}

static int add_identity(struct cache_entry *e, const struct stat *st)
{
	struct sg_identity *ids = realloc(e->ids, (e->n + 1) * sizeof(*ids));

	if (!ids)
		return -ENOMEM;
	e->ids = ids;
	ids[e->n].dev = kernel_dev(st->st_dev);
	ids[e->n].ino = st->st_ino;
	e->n++;
	return 0;
}

/* A read-only path, followed (a symlink names its target). */
static void resolve_path(struct cache_entry *e, int root_fd, const char *path)
{
	struct stat st;

	e->err = host_stat(root_fd, path, 0, &st);
	if (!e->err)
		e->err = add_identity(e, &st);
}

/* An exec glob, expanded beneath the root: "<root>/usr/bin/python3*",
 * each match then resolved as the node would resolve it (python3 ->
 * python3.11 is the file run). Regular executable files only. */
static void resolve_glob(struct cache_entry *e, int root_fd, const char *root_path,
			 const char *pattern)
{
	size_t skip = strcmp(root_path, "/") ? strlen(root_path) : 0;
	char rooted[PATH_MAX];
	glob_t g;
	int rc;

	snprintf(rooted, sizeof(rooted), "%s%s", skip ? root_path : "", pattern);
	rc = glob(rooted, GLOB_NOSORT | GLOB_PERIOD, NULL, &g);
	if (rc == GLOB_NOMATCH) {
		sg_debug("exec glob %s matches nothing", pattern);
		return;
	}
	if (rc) {
		sg_warn("exec glob %s: cannot expand (glob error %d)", pattern, rc);
		return;
	}
	for (size_t i = 0; i < g.gl_pathc && !e->err; i++) {
		struct stat st;

		if (host_stat(root_fd, g.gl_pathv[i] + skip, 0, &st) || !S_ISREG(st.st_mode) ||
		    !(st.st_mode & 0111))
			continue;
		e->err = add_identity(e, &st);
	}
	globfree(&g);
}

int compile_cache_lookup(struct compile_cache *c, bool glob, const char *what, int root_fd,
			 const char *root_path, const struct sg_identity **ids, int *n)
{
	struct cache_entry *e;
	char key[PATH_MAX + 2];

	snprintf(key, sizeof(key), "%c:%s", glob ? 'g' : 'p', what);
	if (c->used * 2 >= c->cap && grow(c))
		return -ENOMEM;
	e = slot_for(c->buckets, c->cap, key);
	if (!e->key) {
		e->key = strdup(key);
		if (!e->key)
			return -ENOMEM;
		c->used++;
		if (glob)
			resolve_glob(e, root_fd, root_path, what);
		else
			resolve_path(e, root_fd, what);
	}
	*ids = e->ids;
	*n = e->n;
	return e->err;
}
