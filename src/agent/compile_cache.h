/* Policy paths and exec globs resolved to (dev, ino) identities once per
 * pass over many tenants. Tenants mostly share the same read-only paths
 * and globs; resolving "/usr/bin/python3*" read all of /usr/bin again for
 * each one, which made an agent with 1,024 tenants take minutes to start. */
#ifndef SG_COMPILE_CACHE_H
#define SG_COMPILE_CACHE_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sg_identity {
	uint32_t dev; /* kernel dev_t */
	uint64_t ino;
};

struct compile_cache;

struct compile_cache *compile_cache_new(void);
void compile_cache_free(struct compile_cache *c);

/* The identities of a read-only path (followed; one identity) or of the
 * regular executable files an exec glob matches (any number), resolved
 * beneath root_fd / root_path the first time they are asked for. *ids
 * stays valid until the cache is freed. Returns 0, or -errno for a path
 * that cannot be resolved (the same error every time it is asked). */
int compile_cache_lookup(struct compile_cache *c, bool glob, const char *what, int root_fd,
			 const char *root_path, const struct sg_identity **ids, int *n);

/* The kernel's internal dev_t (MKDEV), which is what s_dev holds. */
uint32_t kernel_dev(dev_t d);

#endif
