/* A tenant policy compiled into the kernel's maps. Paths and executables
 * are resolved to (dev, ino) identities here, once, so the programs judge
 * resolved files and never compare strings.
 *
 * Atomicity: a tenant's sg_paths / sg_exec_files entries come in two sets
 * (SG_SET_KEY). A reload fills the set not in force, then swaps the
 * tenant's sg_policies element (one hash update, seen whole or not at all)
 * to point at it, then empties the old set. A failure before the swap
 * leaves the previous policy in force untouched. */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include "bpf_loader.h"
#include "lib/host_path.h"
#include "lib/log.h"
#include "abi/maps.h"
#include "policy/policy.h"
#include "policy_compile.h"

/* The kernel's internal dev_t (MKDEV), which is what s_dev holds. */
static uint32_t kernel_dev(dev_t d)
{
	return (major(d) << 20) | minor(d);
}

void policy_to_kernel(const struct sg_policy *p, struct sg_policy_k *k)
{
	memset(k, 0, sizeof(*k));
	k->enabled = p->enabled;
	k->max_tasks = p->limits.max_tasks;
	k->max_forks = p->limits.max_forks;
	for (int r = 0; r < SG_RULE__COUNT; r++)
		k->action[r] = p->action[r];
	k->allow_unix = p->allow_unix;
	k->n_egress = p->n_egress < SG_MAX_EGRESS ? p->n_egress : SG_MAX_EGRESS;
	for (uint32_t i = 0; i < k->n_egress; i++) {
		memcpy(k->egress[i].addr, p->egress[i].addr, 16);
		k->egress[i].prefix = p->egress[i].prefix;
		k->egress[i].proto = p->egress[i].proto;
		k->egress[i].port = p->egress[i].port;
	}
}

/* Remove every entry of one set of one tenant from a map whose keys start
 * with the SG_SET_KEY word (sg_path_key and sg_exec_key both do). */
static void clear_set(int map_fd, uint32_t set_key)
{
	struct sg_path_key key, next;
	void *prev = NULL;

	while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
		key = next;
		if (key.tenant == set_key) {
			bpf_map_delete_elem(map_fd, &key);
			/* restart: deleting can reorder the iteration */
			prev = NULL;
			continue;
		}
		prev = &key;
	}
}

static int add_path(int fd, int root_fd, uint32_t set_key, const char *path, uint8_t access,
		    int *count)
{
	struct sg_path_key key = { .tenant = set_key };
	struct stat st;
	int err = host_stat(root_fd, path, 0, &st);

	if (err) {
		sg_warn("policy path %s: %s (skipped)", path, strerror(-err));
		return 0;
	}
	key.dev = kernel_dev(st.st_dev);
	key.ino = st.st_ino;
	if (bpf_map_update_elem(fd, &key, &access, BPF_ANY))
		return -errno;
	(*count)++;
	return 0;
}

/* Globs expand beneath the root too: "<root>/usr/bin/python3*", each match
 * then resolved as the node would resolve it. */
static int add_exec_glob(int fd, int root_fd, const char *root_path, uint32_t set_key,
			 const char *pattern, int *count)
{
	size_t skip = strcmp(root_path, "/") ? strlen(root_path) : 0;
	char rooted[PATH_MAX];
	glob_t g;
	int err = 0, rc;

	snprintf(rooted, sizeof(rooted), "%s%s", skip ? root_path : "", pattern);
	rc = glob(rooted, GLOB_NOSORT | GLOB_PERIOD, NULL, &g);
	if (rc == GLOB_NOMATCH) {
		sg_debug("exec glob %s matches nothing", pattern);
		return 0;
	}
	if (rc) {
		sg_warn("exec glob %s: cannot expand (glob error %d)", pattern, rc);
		return 0;
	}
	for (size_t i = 0; i < g.gl_pathc && !err; i++) {
		struct sg_exec_key key = { .tenant = set_key };
		struct stat st;
		uint8_t one = 1;

		/* followed: python3 -> python3.11 is the file run */
		if (host_stat(root_fd, g.gl_pathv[i] + skip, 0, &st) || !S_ISREG(st.st_mode) ||
		    !(st.st_mode & 0111))
			continue;
		key.dev = kernel_dev(st.st_dev);
		key.ino = st.st_ino;
		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY))
			err = -errno;
		else
			(*count)++;
	}
	globfree(&g);
	return err;
}

int policy_compile_apply(const struct sg_bpf *b, uint32_t tenant, const struct sg_policy *p,
			 int root_fd, const char *root_path, char *errbuf, size_t errlen)
{
	struct sg_policy_k cur, next;
	uint32_t old_set = 0, new_set, set_key;
	int n_paths = 0, n_execs = 0, err = 0;
	bool had = bpf_map_lookup_elem(b->policies_fd, &tenant, &cur) == 0;

	if (had)
		old_set = cur.set_gen;
	new_set = had ? !old_set : 0;
	set_key = SG_SET_KEY(tenant, new_set);

	/* Leftovers of an apply that failed halfway are in the new set. */
	clear_set(b->paths_fd, set_key);
	clear_set(b->exec_files_fd, set_key);

	for (int i = 0; i < p->n_read_only && !err; i++)
		err = add_path(b->paths_fd, root_fd, set_key, p->read_only[i], SG_PATH_READ,
			       &n_paths);
	for (int i = 0; i < p->n_exec_allow && !err; i++)
		err = add_exec_glob(b->exec_files_fd, root_fd, root_path, set_key, p->exec_allow[i],
				    &n_execs);
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
	if (had && old_set != new_set) {
		clear_set(b->paths_fd, SG_SET_KEY(tenant, old_set));
		clear_set(b->exec_files_fd, SG_SET_KEY(tenant, old_set));
	}
	sg_debug("tenant %s: policy in force (%d allowed paths, %d executables, %d egress rules)",
		 p->tenant, n_paths, n_execs, p->n_egress);
	return 0;
undo:
	clear_set(b->paths_fd, set_key);
	clear_set(b->exec_files_fd, set_key);
	return err;
}

int policy_compile_remove(const struct sg_bpf *b, uint32_t tenant)
{
	bpf_map_delete_elem(b->policies_fd, &tenant);
	for (int set = 0; set < 2; set++) {
		clear_set(b->paths_fd, SG_SET_KEY(tenant, set));
		clear_set(b->exec_files_fd, SG_SET_KEY(tenant, set));
	}
	return 0;
}
