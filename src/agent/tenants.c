/* Policy slots: which tenant's policy each sg_policies entry holds.
 *
 * Only a tenant with a policy file of its own (<policy dir>/<name>.json)
 * gets a slot; every other tenant's sandboxes use SG_TENANT_DEFAULT, the
 * default policy's. So a name nobody configured (an HTTP client inventing
 * tenants) never takes a slot, and a configured tenant always finds one:
 * when all are taken, the idle slot used longest ago is given up, never
 * one a live sandbox uses. Executors read the slot of a tenant from the
 * pinned name index (sg_tenant_index), which lists only slots whose policy
 * is compiled. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "bpf_loader.h"
#include "compile_cache.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "registry.h"

#define EVICT_TRIES 8

static bool is_default(const struct sg_tenant *t)
{
	return t->idx == SG_TENANT_DEFAULT;
}

/* <dir>/<name>.json, or default.json for the default slot. */
static void policy_path(const struct registry *r, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.json", r->policy_dir, name);
}

static int file_version(const char *path, struct policy_file_version *v)
{
	struct stat st;

	memset(v, 0, sizeof(*v));
	if (stat(path, &st))
		return -errno;
	v->dev = st.st_dev;
	v->ino = st.st_ino;
	v->size = st.st_size;
	v->mtime = st.st_mtim;
	return 0;
}

static bool same_version(const struct policy_file_version *a, const struct policy_file_version *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Whether the tenant has a policy file of its own. */
static bool has_own_file(const struct registry *r, const char *name)
{
	struct policy_file_version v;
	char path[PATH_MAX];

	if (!strcmp(name, "default"))
		return false;
	policy_path(r, name, path, sizeof(path));
	return file_version(path, &v) == 0;
}

static void index_put(struct registry *r, const struct sg_tenant *t)
{
	char key[SG_TENANT_MAX] = { 0 };

	snprintf(key, sizeof(key), "%s", t->name);
	if (bpf_map_update_elem(r->bpf->tenant_index_fd, key, &t->idx, BPF_ANY))
		sg_warn("tenant %s: cannot index its slot: %s", t->name, strerror(errno));
}

static void index_del(struct registry *r, const char *name)
{
	char key[SG_TENANT_MAX] = { 0 };

	snprintf(key, sizeof(key), "%s", name);
	bpf_map_delete_elem(r->bpf->tenant_index_fd, key);
}

static void names_put(struct registry *r, uint32_t idx, const char *name)
{
	char value[SG_TENANT_MAX] = { 0 };

	snprintf(value, sizeof(value), "%s", name);
	if (bpf_map_update_elem(r->bpf->tenant_names_fd, &idx, value, BPF_ANY))
		sg_warn("tenant %s: cannot record its slot: %s", name, strerror(errno));
}

/* FNV-1a: the bucket of a name in r->by_name. With thousands of tenants a
 * linear search by name at every load and every run would cost more than
 * the compilation. */
static uint32_t name_bucket(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h & (SG_TENANT_BUCKETS - 1);
}

static void by_name_del(struct registry *r, struct sg_tenant *t)
{
	struct sg_tenant **p = &r->by_name[name_bucket(t->name)];

	while (*p && *p != t)
		p = &(*p)->hnext;
	if (*p)
		*p = t->hnext;
}

static struct sg_tenant *slot_new(struct registry *r, const char *name, uint32_t idx)
{
	struct sg_tenant *t = calloc(1, sizeof(*t));
	uint32_t b;

	if (!t)
		return NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->idx = idx;
	t->last_used_ns = clock_ns(CLOCK_BOOTTIME);
	r->tenants[idx] = t;
	b = name_bucket(t->name);
	t->hnext = r->by_name[b];
	r->by_name[b] = t;
	if (idx >= r->n_tenants)
		r->n_tenants = idx + 1;
	names_put(r, idx, is_default(t) ? "" : name);
	return t;
}

static void slot_free(struct registry *r, struct sg_tenant *t)
{
	index_del(r, t->name);
	policy_compile_remove(r->bpf, t->idx, &t->compiled);
	policy_compiled_free(&t->compiled);
	names_put(r, t->idx, "");
	by_name_del(r, t);
	r->tenants[t->idx] = NULL;
	free(t->policy);
	free(t);
}

static struct sg_tenant *find_slot(struct registry *r, const char *name)
{
	for (struct sg_tenant *t = r->by_name[name_bucket(name)]; t; t = t->hnext)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

/* Whether an entry in sg_sandboxes uses the slot: an executor may have
 * written one the agent has not adopted yet. */
static bool slot_in_maps(struct registry *r, uint32_t idx)
{
	uint64_t key, *prev = NULL;
	struct sg_sandbox sb;

	while (bpf_map_get_next_key(r->bpf->sandboxes_fd, prev, &key) == 0) {
		if (bpf_map_lookup_elem(r->bpf->sandboxes_fd, &key, &sb) == 0 && sb.tenant == idx)
			return true;
		prev = &key;
	}
	return false;
}

/* The idle slot used longest ago, not among `tried`. */
static struct sg_tenant *idle_lru(struct registry *r, const uint32_t *tried, int n_tried)
{
	struct sg_tenant *best = NULL;

	for (uint32_t i = 1; i < r->n_tenants; i++) {
		struct sg_tenant *t = r->tenants[i];
		bool skip = !t || t->active;

		for (int k = 0; k < n_tried && !skip; k++)
			skip = tried[k] == i;
		if (!skip && (!best || t->last_used_ns < best->last_used_ns))
			best = t;
	}
	return best;
}

/* A slot for `name`: a free one, else an idle one given up. Taking it out
 * of the index first means an executor that read it before either sees it
 * missing when it checks again, or left an entry we find here. */
static struct sg_tenant *slot_alloc(struct registry *r, const char *name, bool may_evict)
{
	uint32_t tried[EVICT_TRIES];
	int n_tried = 0;

	/* The next slot past the last one used is free when slots were
	 * only ever added (a start): no scan of the ones before. */
	if (r->n_tenants > 0 && r->n_tenants < SG_MAX_TENANTS && !r->tenants[r->n_tenants])
		return slot_new(r, name, r->n_tenants);
	for (uint32_t i = 1; i < SG_MAX_TENANTS; i++)
		if (!r->tenants[i])
			return slot_new(r, name, i);
	/* At start and on a reload (no eviction) the caller counts the files
	 * left without a slot and logs one line for all of them. */
	if (!may_evict)
		return NULL;
	while (may_evict && n_tried < EVICT_TRIES) {
		struct sg_tenant *victim = idle_lru(r, tried, n_tried);
		uint32_t idx;

		if (!victim)
			break;
		tried[n_tried++] = victim->idx;
		index_del(r, victim->name);
		if (slot_in_maps(r, victim->idx)) {
			if (!victim->retired && victim->policy)
				index_put(r, victim);
			continue;
		}
		idx = victim->idx;
		sg_info("tenant %s takes the policy slot of idle tenant %s", name, victim->name);
		slot_free(r, victim);
		r->evictions++;
		return slot_new(r, name, idx);
	}
	/* Once per minute at most: a tenant retried in a loop must not
	 * flood the log; the refusal itself goes back to its executor. */
	{
		static uint64_t logged_ns;
		uint64_t now = clock_ns(CLOCK_BOOTTIME);

		if (!logged_ns || now - logged_ns > 60ull * 1000000000ull) {
			logged_ns = now;
			sg_error("tenant %s: all %d policy slots hold tenants with live "
				 "sandboxes; its sandboxes run under the default policy until "
				 "one is idle (logged once a minute)",
				 name, SG_MAX_TENANTS - 1);
		}
	}
	return NULL;
}

/* (Re)compile a slot from its file. A tenant whose own file is gone gets
 * the default policy (what an executor now uses for it too) and is
 * retired: out of the index, freed once idle. On error the policy in
 * force stays. */
static int load_policy(struct registry *r, struct sg_tenant *t, struct compile_cache *cache,
		       bool force)
{
	struct policy_file_version v;
	struct sg_policy_error perr;
	struct sg_policy_kept *kept;
	struct sg_policy *p;
	char path[PATH_MAX], msg[512];
	bool gone;
	int err;

	policy_path(r, t->name, path, sizeof(path));
	gone = file_version(path, &v) != 0 && !is_default(t);
	if (gone && !t->retired) {
		t->retired = true;
		index_del(r, t->name);
		sg_info("tenant %s: %s is gone; the default policy applies to it", t->name, path);
		force = true;
	}
	if (!force && t->policy && same_version(&v, &t->version))
		return 0;
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	err = policy_for_tenant(r->policy_dir, t->name, p, &perr);
	if (err) {
		policy_error_format(&perr, msg, sizeof(msg));
		sg_error("policy for tenant %s rejected, %s: %s", t->name,
			 t->policy ? "the previous one stays in force"
				   : "its sandboxes are denied everything",
			 msg);
		snprintf(t->error, sizeof(t->error), "%s", msg);
		free(p);
		return err;
	}
	err = policy_compile_apply(r->bpf, t->idx, &t->compiled, p, r->host_root_fd, r->host_root,
				   cache, msg, sizeof(msg));
	if (err) {
		sg_error("%s", msg);
		snprintf(t->error, sizeof(t->error), "%s", msg);
		free(p);
		return err;
	}
	kept = malloc(sizeof(*kept));
	if (!kept) {
		free(p);
		return -ENOMEM;
	}
	memcpy(kept->action, p->action, sizeof(kept->action));
	kept->health = p->health;
	snprintf(kept->scratch_root, sizeof(kept->scratch_root), "%s", p->scratch_root);
	snprintf(kept->source, sizeof(kept->source), "%s", p->source);
	free(p);
	free(t->policy);
	t->policy = kept;
	t->version = v;
	t->error[0] = 0;
	if (!is_default(t) && !t->retired)
		index_put(r, t);
	return 0;
}

struct sg_tenant *registry_tenant_by_idx(struct registry *r, uint32_t idx)
{
	return idx < SG_MAX_TENANTS ? r->tenants[idx] : NULL;
}

/* A slot for a tenant with a file of its own that has none yet. */
static struct sg_tenant *compile_new(struct registry *r, const char *name, bool may_evict)
{
	struct compile_cache *cache = compile_cache_new();
	struct sg_tenant *t = find_slot(r, name);

	if (!cache)
		return NULL;
	if (t)
		t->retired = false; /* its file is back */
	else
		t = slot_alloc(r, name, may_evict);
	if (t)
		load_policy(r, t, cache, true);
	compile_cache_free(cache);
	return t;
}

struct sg_tenant *registry_tenant(struct registry *r, const char *name, bool create)
{
	struct sg_tenant *t;

	if (!tenant_name_valid(name))
		return NULL;
	t = find_slot(r, name);
	if ((!t || t->retired) && create && has_own_file(r, name))
		t = compile_new(r, name, true);
	if (!t || t->retired)
		t = r->tenants[SG_TENANT_DEFAULT];
	if (t)
		t->last_used_ns = clock_ns(CLOCK_BOOTTIME);
	return t;
}

int registry_compile_tenant(struct registry *r, const char *name, char *err, size_t len)
{
	char path[PATH_MAX];
	struct sg_tenant *t;

	if (!tenant_name_valid(name)) {
		snprintf(err, len, "invalid tenant name");
		return -EINVAL;
	}
	policy_path(r, name, path, sizeof(path));
	if (!has_own_file(r, name)) {
		snprintf(err, len, "the agent has no policy file %s", path);
		return -ENOENT;
	}
	t = registry_tenant(r, name, true);
	if (!t || is_default(t)) {
		snprintf(err, len, "all %d policy slots hold tenants with live sandboxes",
			 SG_MAX_TENANTS - 1);
		return -ENOSPC;
	}
	if (!t->policy) {
		snprintf(err, len, "%s", t->error[0] ? t->error : "its policy could not be loaded");
		return -EINVAL;
	}
	return 0;
}

void tenants_use(struct registry *r, uint32_t slot, int delta)
{
	struct sg_tenant *t = registry_tenant_by_idx(r, slot);

	if (!t)
		return;
	if (delta < 0 && t->active)
		t->active--;
	else if (delta > 0)
		t->active++;
	t->last_used_ns = clock_ns(CLOCK_BOOTTIME);
	if (!t->active && t->retired)
		slot_free(r, t);
}

void tenants_release_unused(struct registry *r)
{
	for (uint32_t i = 1; i < r->n_tenants; i++)
		if (r->tenants[i] && r->tenants[i]->retired && !r->tenants[i]->active)
			slot_free(r, r->tenants[i]);
}

/* Every <name>.json of the policy directory without a slot gets one (a
 * free one: at start and on a reload nothing is evicted; the rest are
 * compiled on demand). Returns the files rejected. */
static int load_new_files(struct registry *r, struct compile_cache *cache)
{
	DIR *d = opendir(r->policy_dir);
	struct dirent *de;
	int rejected = 0, skipped = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char name[SG_TENANT_MAX];
		size_t n = strlen(de->d_name);
		struct sg_tenant *t;

		if (n <= 5 || n - 5 >= sizeof(name) || strcmp(de->d_name + n - 5, ".json"))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), de->d_name);
		if (!tenant_name_valid(name) || !strcmp(name, "default"))
			continue;
		t = find_slot(r, name);
		if (t && !t->retired)
			continue;
		if (t)
			t->retired = false;
		else
			t = slot_alloc(r, name, false);
		if (!t)
			skipped++;
		else if (load_policy(r, t, cache, true))
			rejected++;
	}
	closedir(d);
	/* One line for all of them, and only when the count changes: a
	 * reload of the same directory says nothing new. */
	if (skipped && (uint32_t)skipped != r->n_unslotted)
		sg_warn("%d policy files got no slot now (all %d taken): they are compiled when "
			"their tenant runs, in the slot of an idle tenant",
			skipped, SG_MAX_TENANTS - 1);
	r->n_unslotted = skipped;
	return rejected;
}

int registry_reload_policies(struct registry *r, bool changed_only)
{
	struct compile_cache *cache = compile_cache_new();
	int rejected = 0;

	if (!cache)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n_tenants; i++)
		if (r->tenants[i] && load_policy(r, r->tenants[i], cache, !changed_only))
			rejected++;
	rejected += load_new_files(r, cache);
	compile_cache_free(cache);
	tenants_release_unused(r);
	if (rejected)
		r->reloads_failed++;
	else
		r->reloads_ok++;
	r->policy_generation++;
	sg_info("policies reloaded (generation %llu, %d rejected)",
		(unsigned long long)r->policy_generation, rejected);
	return rejected;
}

/* Index entries that name no compiled slot of ours (a previous agent's).
 * The index holds at most SG_MAX_TENANTS names. */
static void prune_index(struct registry *r)
{
	char(*keys)[SG_TENANT_MAX] = calloc(SG_MAX_TENANTS, SG_TENANT_MAX);
	char *prev = NULL;
	int n = 0;

	if (!keys)
		return;
	while (n < SG_MAX_TENANTS &&
	       bpf_map_get_next_key(r->bpf->tenant_index_fd, prev, keys[n]) == 0)
		prev = keys[n++];
	for (int i = 0; i < n; i++) {
		struct sg_tenant *t = find_slot(r, keys[i]);

		if (!t || t->retired || is_default(t) || !t->policy)
			bpf_map_delete_elem(r->bpf->tenant_index_fd, keys[i]);
	}
	free(keys);
}

int tenants_init(struct registry *r)
{
	struct sg_compiled **by_slot;
	struct compile_cache *cache;
	char name[SG_TENANT_MAX];
	uint32_t idx, key, *prev = NULL;
	int rejected;

	r->tenants = calloc(SG_MAX_TENANTS, sizeof(*r->tenants));
	r->by_name = calloc(SG_TENANT_BUCKETS, sizeof(*r->by_name));
	by_slot = calloc(SG_MAX_TENANTS, sizeof(*by_slot));
	if (!r->tenants || !r->by_name || !by_slot) {
		free(by_slot);
		sg_error("no memory for %d policy slots", SG_MAX_TENANTS);
		return -ENOMEM;
	}

	/* The slots a previous agent left: live sandboxes may refer to them. */
	for (idx = 1; idx < SG_MAX_TENANTS; idx++) {
		if (bpf_map_lookup_elem(r->bpf->tenant_names_fd, &idx, name) || !name[0])
			continue;
		name[SG_TENANT_MAX - 1] = 0;
		if (!tenant_name_valid(name) || !slot_new(r, name, idx))
			names_put(r, idx, "");
	}
	if (!slot_new(r, "default", SG_TENANT_DEFAULT)) {
		free(by_slot);
		return -ENOMEM;
	}
	for (idx = 0; idx < r->n_tenants; idx++)
		if (r->tenants[idx])
			by_slot[idx] = &r->tenants[idx]->compiled;
	policy_compile_adopt(r->bpf, by_slot);
	free(by_slot);
	/* Policies of slots nobody claims. */
	while (bpf_map_get_next_key(r->bpf->policies_fd, prev, &key) == 0) {
		if (key >= SG_MAX_TENANTS || !r->tenants[key]) {
			bpf_map_delete_elem(r->bpf->policies_fd, &key);
			prev = NULL;
			continue;
		}
		idx = key;
		prev = &idx;
	}

	cache = compile_cache_new();
	if (!cache)
		return -ENOMEM;
	rejected = load_policy(r, r->tenants[SG_TENANT_DEFAULT], cache, true) ? 1 : 0;
	for (idx = 1; idx < r->n_tenants; idx++)
		if (r->tenants[idx] && load_policy(r, r->tenants[idx], cache, true))
			rejected++;
	rejected += load_new_files(r, cache);
	compile_cache_free(cache);
	prune_index(r);
	if (rejected)
		sg_warn("%d policy files rejected at start", rejected);
	return 0;
}

void tenants_free(struct registry *r)
{
	for (uint32_t i = 0; r->tenants && i < SG_MAX_TENANTS; i++)
		if (r->tenants[i]) {
			policy_compiled_free(&r->tenants[i]->compiled);
			free(r->tenants[i]->policy);
			free(r->tenants[i]);
			r->tenants[i] = NULL;
		}
	free(r->tenants);
	free(r->by_name);
	r->tenants = NULL;
	r->by_name = NULL;
}
