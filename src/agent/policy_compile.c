/* A tenant policy compiled into the kernel's maps. Paths and executables
 * are resolved to (dev, ino) identities here, once, so the programs judge
 * resolved files and never compare strings.
 *
 * Atomicity: a tenant's sg_paths / sg_exec_files entries come in two sets
 * (SG_SET_KEY). A reload fills the set not in force, then swaps the
 * tenant's sg_policies element (one hash update, seen whole or not at all)
 * to point at it, then empties the old set. A failure before the swap
 * leaves the previous policy in force untouched.
 *
 * Cost: every key of every set is listed in userspace (struct
 * sg_compiled), so emptying a set deletes those keys and never walks the
 * whole map; walking it per tenant made a start with 1,024 tenants
 * quadratic. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "bpf_loader.h"
#include "compile_cache.h"
#include "lib/log.h"
#include "abi/maps.h"
#include "policy/policy.h"
#include "policy_compile.h"

void policy_to_kernel(const struct sg_policy *p, struct sg_policy_k *k)
{
	memset(k, 0, sizeof(*k));
	k->enabled = p->enabled;
	k->max_tasks = p->limits.max_tasks;
	k->max_forks = p->limits.max_forks;
	for (int r = 0; r < SG_RULE__COUNT; r++)
		k->action[r] = p->action[r];
	k->allow_unix = p->allow_unix;
	k->allow_listen = p->allow_listen;
	k->n_egress = p->n_egress < SG_MAX_EGRESS ? p->n_egress : SG_MAX_EGRESS;
	for (uint32_t i = 0; i < k->n_egress; i++) {
		memcpy(k->egress[i].addr, p->egress[i].addr, 16);
		k->egress[i].prefix = p->egress[i].prefix;
		k->egress[i].proto = p->egress[i].proto;
		k->egress[i].port = p->egress[i].port;
	}
}

static int list_add(struct sg_key_list *l, const struct sg_path_key *k)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 16;
		struct sg_path_key *keys = realloc(l->keys, cap * sizeof(*keys));

		if (!keys)
			return -ENOMEM;
		l->keys = keys;
		l->cap = cap;
	}
	l->keys[l->n++] = *k;
	return 0;
}

/* Delete a set's keys from its map. (sg_path_key and sg_exec_key have one
 * layout: the SG_SET_KEY word, dev, ino.) */
static void list_clear(int map_fd, struct sg_key_list *l)
{
	for (uint32_t i = 0; i < l->n; i++)
		bpf_map_delete_elem(map_fd, &l->keys[i]);
	l->n = 0;
}

/* Put one identity in a set (idempotent: a glob and a path may both name
 * the same file). */
static int add_key(int map_fd, struct sg_key_list *l, uint32_t set_key,
		   const struct sg_identity *id, uint8_t value)
{
	struct sg_path_key key = { .tenant = set_key, .dev = id->dev, .ino = id->ino };
	int err;

	if (bpf_map_update_elem(map_fd, &key, &value, BPF_NOEXIST) == 0)
		return list_add(l, &key);
	err = -errno;
	return err == -EEXIST ? 0 : err;
}

static int fill_set(const struct sg_bpf *b, struct sg_compiled *c, int set, uint32_t set_key,
		    const struct sg_policy *p, int root_fd, const char *root_path,
		    struct compile_cache *cache, int *n_paths, int *n_execs)
{
	const struct sg_identity *ids;
	int n, err = 0;

	/* The read-only paths, then the reward-model tier's inference pool
	 * (read and written, as Landlock allows it: sandbox_landlock.c). */
	for (int i = 0; i < p->n_read_only + p->n_inference_devices && !err; i++) {
		bool device = i >= p->n_read_only;
		const char *path = device ? p->inference_devices[i - p->n_read_only]
					  : p->read_only[i];

		err = compile_cache_lookup(cache, false, path, root_fd, root_path, &ids, &n);
		if (err == -ENOMEM)
			return err;
		if (err) {
			sg_warn("tenant %s: policy path %s: %s (skipped)", p->tenant, path,
				strerror(-err));
			err = 0;
			continue;
		}
		/* Writing /dev/null is harmless and everywhere ("2>/dev/null"):
		 * allowed, as Landlock allows it (sandbox_landlock.c). */
		uint32_t access = SG_PATH_READ |
				  (device || !strcmp(path, "/dev/null") ? SG_PATH_WRITE : 0);
		for (int j = 0; j < n && !err; j++)
			err = add_key(b->paths_fd, &c->paths[set], set_key, &ids[j], access);
		*n_paths += n;
	}
	for (int i = 0; i < p->n_exec_allow && !err; i++) {
		err = compile_cache_lookup(cache, true, p->exec_allow[i], root_fd, root_path, &ids,
					   &n);
		for (int j = 0; j < n && !err; j++)
			err = add_key(b->exec_files_fd, &c->execs[set], set_key, &ids[j], 1);
		*n_execs += n;
	}
	return err;
}

int policy_compile_apply(const struct sg_bpf *b, uint32_t tenant, struct sg_compiled *c,
			 const struct sg_policy *p, int root_fd, const char *root_path,
			 struct compile_cache *cache, char *errbuf, size_t errlen)
{
	struct sg_policy_k cur, next;
	uint32_t old_set = 0, new_set;
	int n_paths = 0, n_execs = 0, err;
	bool had = bpf_map_lookup_elem(b->policies_fd, &tenant, &cur) == 0;

	if (had)
		old_set = cur.set_gen & 1;
	new_set = had ? !old_set : 0;

	/* Leftovers of an apply that failed halfway are in the new set. */
	list_clear(b->paths_fd, &c->paths[new_set]);
	list_clear(b->exec_files_fd, &c->execs[new_set]);
	err = fill_set(b, c, new_set, SG_SET_KEY(tenant, new_set), p, root_fd, root_path, cache,
		       &n_paths, &n_execs);
	if (err) {
		snprintf(errbuf, errlen, "tenant %s: cannot fill the path/exec maps: %s", p->tenant,
			 strerror(-err));
		goto undo;
	}

	policy_to_kernel(p, &next);
	next.set_gen = new_set;
	if (bpf_map_update_elem(b->policies_fd, &tenant, &next, BPF_ANY)) {
		err = -errno;
		snprintf(errbuf, errlen, "tenant %s: cannot update the policy map: %s", p->tenant,
			 strerror(errno));
		goto undo;
	}
	/* After the swap: a verdict found under the old policy is never
	 * used again (include/abi/maps.h, struct sg_verdict_key). */
	sg_bpf_new_verdict_epoch(b);
	if (had && old_set != new_set) {
		list_clear(b->paths_fd, &c->paths[old_set]);
		list_clear(b->exec_files_fd, &c->execs[old_set]);
	}
	sg_debug("tenant %s: policy in force (%d allowed paths, %d executables, %d egress rules)",
		 p->tenant, n_paths, n_execs, p->n_egress);
	return 0;
undo:
	list_clear(b->paths_fd, &c->paths[new_set]);
	list_clear(b->exec_files_fd, &c->execs[new_set]);
	return err;
}

void policy_compile_remove(const struct sg_bpf *b, uint32_t tenant, struct sg_compiled *c)
{
	bpf_map_delete_elem(b->policies_fd, &tenant);
	sg_bpf_new_verdict_epoch(b);
	for (int set = 0; set < 2; set++) {
		list_clear(b->paths_fd, &c->paths[set]);
		list_clear(b->exec_files_fd, &c->execs[set]);
	}
}

void policy_compiled_free(struct sg_compiled *c)
{
	for (int set = 0; set < 2; set++) {
		free(c->paths[set].keys);
		free(c->execs[set].keys);
	}
	memset(c, 0, sizeof(*c));
}

/* One pass over a map: each key goes to its slot's list; keys no slot
 * claims are deleted after the pass (deleting during it would reorder
 * the iteration). */
static void adopt_map(int map_fd, struct sg_compiled *by_slot[SG_MAX_TENANTS], bool paths)
{
	struct sg_path_key key, *prev = NULL;
	struct sg_key_list stale = { 0 };

	while (bpf_map_get_next_key(map_fd, prev, &key) == 0) {
		uint32_t slot = key.tenant & ~(1u << 31), set = key.tenant >> 31;
		struct sg_compiled *c = slot < SG_MAX_TENANTS ? by_slot[slot] : NULL;

		if (!c || list_add(paths ? &c->paths[set] : &c->execs[set], &key))
			list_add(&stale, &key);
		prev = &key;
	}
	list_clear(map_fd, &stale);
	free(stale.keys);
}

void policy_compile_adopt(const struct sg_bpf *b, struct sg_compiled *by_slot[SG_MAX_TENANTS])
{
	adopt_map(b->paths_fd, by_slot, true);
	adopt_map(b->exec_files_fd, by_slot, false);
}
