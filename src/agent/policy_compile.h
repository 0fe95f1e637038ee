/* Tenant policies compiled into the BPF maps, atomically per tenant. */
#ifndef SG_POLICY_COMPILE_H
#define SG_POLICY_COMPILE_H
#include <stddef.h>
#include <stdint.h>
#include "abi/maps.h"
#include "policy/policy.h"

struct sg_bpf;
struct compile_cache;

/* The keys one set of a tenant holds in one map. */
struct sg_key_list {
	struct sg_path_key *keys;
	uint32_t n, cap;
};

/* What a tenant slot holds in sg_paths and sg_exec_files, per set. */
struct sg_compiled {
	struct sg_key_list paths[2], execs[2];
};

void policy_to_kernel(const struct sg_policy *p, struct sg_policy_k *k);

/* Put `p` in force for tenant slot `tenant`, its paths resolved beneath
 * root_fd / root_path (the node's root: "/" unless --host-root) through
 * `cache`. On error the previous policy (if any) stays in force and
 * errbuf says why. */
int policy_compile_apply(const struct sg_bpf *b, uint32_t tenant, struct sg_compiled *c,
			 const struct sg_policy *p, int root_fd, const char *root_path,
			 struct compile_cache *cache, char *errbuf, size_t errlen);

/* Take a slot's policy and every one of its keys out of the maps. */
void policy_compile_remove(const struct sg_bpf *b, uint32_t tenant, struct sg_compiled *c);
void policy_compiled_free(struct sg_compiled *c);

/* A restarted agent: sort the pinned keys into each slot's lists (one
 * pass over each map); keys of slots with no list (NULL) are deleted. */
void policy_compile_adopt(const struct sg_bpf *b, struct sg_compiled *by_slot[SG_MAX_TENANTS]);

#endif
