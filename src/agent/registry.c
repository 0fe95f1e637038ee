/* Sandboxes, and the map entries that make the kernel enforce on them.
 * Policy slots are tenants.c's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "lib/clock.h"
#include "bpf_loader.h"
#include "lib/cgroup.h"
#include "lib/host_path.h"
#include "lib/log.h"
#include "control/enroll.h"
#include "control/ondemand.h"
#include "registry.h"

static uint32_t slot_of(uint64_t cgid)
{
	return (uint32_t)((cgid * 0x9E3779B97F4A7C15ull) >> 50) % SG_REG_SLOTS;
}

struct sg_sandbox_entry *registry_find(struct registry *r, uint64_t cgid)
{
	for (uint32_t i = 0, s = slot_of(cgid); i < SG_REG_SLOTS; i++, s = (s + 1) % SG_REG_SLOTS) {
		if (r->cgids[s] == cgid)
			return &r->pool[r->at[s]];
		if (!r->cgids[s])
			return NULL;
	}
	return NULL;
}

void registry_cgroup_path(const struct registry *r, const struct sg_sandbox_entry *s, char *buf,
			  size_t len)
{
	snprintf(buf, len, "%s/%s/%s", r->root, s->tenant, s->name);
}

/* The scratch the executor made for this sandbox, by convention
 * <scratch_root>/<tenant>/<sandbox>. */
static void scratch_identity(const struct registry *r, const struct sg_tenant *t,
			     const char *tenant, const char *name, struct sg_sandbox *sb)
{
	char path[PATH_MAX];

	if (!t || !t->policy)
		return;
	snprintf(path, sizeof(path), "%s/%s/%s", t->policy->scratch_root, tenant, name);
	if (sg_scratch_identity(r->host_root_fd, path, sb))
		sg_debug("sandbox %s/%s has no scratch at %s: nothing is writable", tenant, name,
			 path);
}

/* The ids its executor enrolled the sandbox with, when they are there. A
 * prepared sandbox (a warm pool's) is enrolled before its request is
 * known: its ids come when its run starts, so empty ones are not kept. */
static void load_ids(struct registry *r, struct sg_sandbox_entry *e)
{
	struct sg_sandbox_ids ids;

	if (bpf_map_lookup_elem(r->bpf->ids_fd, &e->cgid, &ids))
		return;
	sg_sandbox_ids_terminate(&ids);
	if (!ids.run_id[0] && !ids.batch_id[0])
		return;
	snprintf(e->run_id, sizeof(e->run_id), "%s", ids.run_id);
	snprintf(e->batch_id, sizeof(e->batch_id), "%s", ids.batch_id);
	e->ids_known = true;
}

void registry_event_ids(struct registry *r, struct sg_sandbox_entry *s)
{
	load_ids(r, s);
}

static uint32_t count_slots(const struct registry *r)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->n_tenants; i++)
		n += r->tenants[i] != NULL;
	return n;
}

/* A cgroup directory name the executor could have made: [A-Za-z0-9_-.],
 * not starting with '.' (no ".", "..", or hidden names). */
static bool sandbox_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= sizeof(((struct sg_sandbox_entry *)0)->name) || name[0] == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
			return false;
	return true;
}

int registry_add(struct registry *r, const char *tenant, const char *name,
		 struct sg_sandbox_entry **out)
{
	struct sg_sandbox_state st = { 0 };
	struct sg_sandbox sb = { 0 };
	struct sg_sandbox_entry *e;
	char path[PATH_MAX], why[300];
	uint64_t cgid;
	uint32_t s;
	int err;

	if (!tenant_name_valid(tenant) || !sandbox_name_valid(name))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/%s/%s", r->root, tenant, name);
	err = cgroup_id_of(path, &cgid);
	if (err)
		return err;
	e = registry_find(r, cgid);
	if (e) {
		/* An executor may have rewritten the entry since. */
		if (bpf_map_lookup_elem(r->bpf->sandboxes_fd, &cgid, &sb) == 0 &&
		    sb.tenant != e->slot) {
			tenants_use(r, e->slot, -1);
			e->slot = sb.tenant;
			tenants_use(r, e->slot, +1);
		}
		if (out)
			*out = e;
		return 0;
	}
	if (r->n_sandboxes >= SG_MAX_SANDBOXES) {
		sg_error("sandbox %s/%s: %d sandboxes already enforced", tenant, name,
			 SG_MAX_SANDBOXES);
		return -ENOSPC;
	}
	/* The executor enrolls its sandboxes itself: adopt what it wrote. */
	if (bpf_map_lookup_elem(r->bpf->sandboxes_fd, &cgid, &sb)) {
		struct sg_tenant *t = registry_tenant(r, tenant, true);

		if (!t)
			return -EINVAL;
		/* Live tasks already inside (a sandbox found by the start scan). */
		st.tasks = cgroup_count_procs(path, "cgroup.threads");
		if (st.tasks < 0)
			st.tasks = 0;
		sb.tenant = t->idx;
		scratch_identity(r, t, tenant, name, &sb);
		/* State first: a program that finds the sandbox finds its counters. */
		if (bpf_map_update_elem(r->bpf->state_fd, &cgid, &st, BPF_NOEXIST) &&
		    errno != EEXIST)
			return -errno;
		if (bpf_map_update_elem(r->bpf->sandboxes_fd, &cgid, &sb, BPF_NOEXIST)) {
			err = -errno;
			if (err != -EEXIST || bpf_map_lookup_elem(r->bpf->sandboxes_fd, &cgid, &sb))
				return err;
		}
		/* Entries first, then the programs that judge them, as an
		 * executor does (src/control/ondemand.h). */
		err = sg_ondemand_attach(-1, 0, why, sizeof(why));
		if (err)
			sg_error("sandbox %s/%s: its opens are not watched: %s", tenant, name, why);
	}
	for (s = slot_of(cgid); r->cgids[s]; s = (s + 1) % SG_REG_SLOTS)
		;
	/* Entries are dense in the pool, reused last freed first: memory in
	 * use follows the sandboxes alive, not the table's size. */
	r->at[s] = r->n_free ? r->free[--r->n_free] : r->pool_used++;
	e = &r->pool[r->at[s]];
	memset(e, 0, sizeof(*e));
	e->cgid = cgid;
	e->table_slot = s;
	r->cgids[s] = cgid;
	e->slot = sb.tenant;
	e->kill_rule = -1;
	snprintf(e->tenant, sizeof(e->tenant), "%s", tenant);
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->added_ns = clock_ns(CLOCK_BOOTTIME);
	load_ids(r, e);
	r->n_sandboxes++;
	tenants_use(r, e->slot, +1);
	sg_debug("sandbox %s/%s (cgroup %llu) enforced", tenant, name, (unsigned long long)cgid);
	if (out)
		*out = e;
	return 0;
}

/* Every pinned entry of a sandbox. */
static void delete_entries(struct registry *r, uint64_t cgid)
{
	bpf_map_delete_elem(r->bpf->sandboxes_fd, &cgid);
	bpf_map_delete_elem(r->bpf->state_fd, &cgid);
	bpf_map_delete_elem(r->bpf->killed_fd, &cgid);
	bpf_map_delete_elem(r->bpf->ids_fd, &cgid);
}

void registry_remove(struct registry *r, uint64_t cgid)
{
	struct sg_sandbox_entry *e = registry_find(r, cgid);
	uint32_t s, next;

	delete_entries(r, cgid);
	if (!e)
		return;
	tenants_use(r, e->slot, -1);
	r->n_sandboxes--;
	/* Backward-shift deletion keeps the probe chains intact. */
	s = e->table_slot;
	r->free[r->n_free++] = r->at[s];
	/* (table_slot stays: registry_next() goes on from there when the
	 * entry is removed in the middle of a pass) */
	memset(e, 0, sizeof(*e));
	e->table_slot = s;
	r->cgids[s] = 0;
	for (next = (s + 1) % SG_REG_SLOTS; r->cgids[next]; next = (next + 1) % SG_REG_SLOTS) {
		uint32_t home = slot_of(r->cgids[next]);
		bool movable = (s <= next) ? (home <= s || home > next)
					   : (home <= s && home > next);
		if (movable) {
			r->cgids[s] = r->cgids[next];
			r->at[s] = r->at[next];
			r->pool[r->at[s]].table_slot = s;
			r->cgids[next] = 0;
			s = next;
		}
	}
}

struct sg_sandbox_entry *registry_next(struct registry *r, struct sg_sandbox_entry *prev)
{
	uint32_t s = prev ? prev->table_slot + 1 : 0;

	for (; s < SG_REG_SLOTS; s++)
		if (r->cgids[s])
			return &r->pool[r->at[s]];
	return NULL;
}

/* The watch on a tenant's directory, by name or by watch descriptor. */
static struct tenant_watch *watch_by_name(struct registry *r, const char *name)
{
	for (size_t i = 0; i < r->n_watches; i++)
		if (!strcmp(r->watches[i].name, name))
			return &r->watches[i];
	return NULL;
}

static struct tenant_watch *watch_by_wd(struct registry *r, int wd)
{
	for (size_t i = 0; i < r->n_watches; i++)
		if (r->watches[i].wd == wd)
			return &r->watches[i];
	return NULL;
}

static void watch_add(struct registry *r, const char *name, const char *path)
{
	struct tenant_watch *w;
	int wd;

	if (watch_by_name(r, name))
		return;
	wd = inotify_add_watch(r->inotify_fd, path, IN_CREATE | IN_DELETE | IN_ONLYDIR);
	if (wd < 0) {
		sg_warn("cannot watch %s (%s): its sandboxes are found by the sweep", path,
			strerror(errno));
		return;
	}
	if (r->n_watches == r->cap_watches) {
		size_t cap = r->cap_watches ? r->cap_watches * 2 : 64;
		w = realloc(r->watches, cap * sizeof(*w));
		if (!w)
			return;
		r->watches = w;
		r->cap_watches = cap;
	}
	w = &r->watches[r->n_watches++];
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->wd = wd;
}

/* A watch the kernel dropped (its directory is gone). */
static void watch_forget(struct registry *r, int wd)
{
	struct tenant_watch *w = watch_by_wd(r, wd);

	if (w)
		*w = r->watches[--r->n_watches];
}

/* Sandbox cgroups seen by a scan, so that the sweep never deletes the
 * entries of one that exists. */
struct cgid_set {
	uint64_t *ids;
	size_t n, cap;
};

static void cgid_set_add(struct cgid_set *set, const char *path)
{
	uint64_t id;

	if (!set || cgroup_id_of(path, &id))
		return;
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 256;
		uint64_t *ids = realloc(set->ids, cap * sizeof(*ids));
		if (!ids)
			return;
		set->ids = ids;
		set->cap = cap;
	}
	set->ids[set->n++] = id;
}

static bool cgid_set_has(const struct cgid_set *set, uint64_t id)
{
	for (size_t i = 0; i < set->n; i++)
		if (set->ids[i] == id)
			return true;
	return false;
}

static void watch_tenant_dir(struct registry *r, const char *tenant, struct cgid_set *seen)
{
	char path[PATH_MAX], sub[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", r->root, tenant);
	watch_add(r, tenant, path);
	/* Scan after watching, so nothing created in between is missed. */
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.') {
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			cgid_set_add(seen, sub);
			registry_add(r, tenant, de->d_name, NULL);
		}
	closedir(d);
}

static void scan_root(struct registry *r, struct cgid_set *seen)
{
	struct dirent *de;
	DIR *d = opendir(r->root);

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && tenant_name_valid(de->d_name))
			watch_tenant_dir(r, de->d_name, seen);
	closedir(d);
}

/* Keys of a map that no sandbox of ours accounts for, appended to *out. */
static void unaccounted(struct registry *r, int map_fd, struct cgid_set *out)
{
	uint64_t key, *prev = NULL;

	while (bpf_map_get_next_key(map_fd, prev, &key) == 0) {
		if (!registry_find(r, key) && out->n < 3 * SG_MAX_SANDBOXES) {
			if (out->n == out->cap) {
				size_t cap = out->cap ? out->cap * 2 : 64;
				uint64_t *ids = realloc(out->ids, cap * sizeof(*ids));
				if (!ids)
					return;
				out->ids = ids;
				out->cap = cap;
			}
			out->ids[out->n++] = key;
		}
		prev = &key;
	}
}

void registry_sweep_maps(struct registry *r)
{
	struct cgid_set stray = { 0 }, seen = { 0 };

	unaccounted(r, r->bpf->sandboxes_fd, &stray);
	unaccounted(r, r->bpf->state_fd, &stray);
	unaccounted(r, r->bpf->killed_fd, &stray);
	unaccounted(r, r->bpf->ids_fd, &stray);
	if (stray.n) {
		/* An executor enrolled it (adopted now), or it is gone. */
		scan_root(r, &seen);
		for (size_t i = 0; i < stray.n; i++) {
			uint64_t id = stray.ids[i];

			if (registry_find(r, id) || cgid_set_has(&seen, id))
				continue;
			delete_entries(r, id);
		}
	}
	free(stray.ids);
	free(seen.ids);
}

bool registry_same_root(const struct registry *r, uint64_t dev, uint64_t ino)
{
	struct stat st;

	return fstat(r->host_root_fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

int registry_init(struct registry *r, const struct sg_bpf *bpf, const char *root,
		  const char *policy_dir, const char *host_root)
{
	uint64_t started = clock_ns(CLOCK_MONOTONIC);
	int err;

	memset(r, 0, sizeof(*r));
	r->bpf = bpf;
	snprintf(r->root, sizeof(r->root), "%s", root);
	snprintf(r->policy_dir, sizeof(r->policy_dir), "%s", policy_dir);
	snprintf(r->host_root, sizeof(r->host_root), "%s", host_root);
	r->inotify_fd = -1;
	r->host_root_fd = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r->host_root_fd < 0) {
		sg_error("--host-root %s: %s", host_root, strerror(errno));
		return -errno;
	}
	r->cgids = calloc(SG_REG_SLOTS, sizeof(*r->cgids));
	r->at = calloc(SG_REG_SLOTS, sizeof(*r->at));
	r->pool = calloc(SG_MAX_SANDBOXES, sizeof(*r->pool));
	r->free = calloc(SG_MAX_SANDBOXES, sizeof(*r->free));
	if (!r->cgids || !r->at || !r->pool || !r->free)
		return -ENOMEM;
	r->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (r->inotify_fd < 0) {
		sg_error("inotify: %s", strerror(errno));
		return -errno;
	}
	r->root_wd = inotify_add_watch(r->inotify_fd, root, IN_CREATE | IN_DELETE | IN_ONLYDIR);
	if (r->root_wd < 0) {
		sg_error("cannot watch %s: %s", root, strerror(errno));
		return -errno;
	}
	r->policy_wd = inotify_add_watch(r->inotify_fd, policy_dir,
					 IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_CREATE);
	if (r->policy_wd < 0)
		sg_warn("cannot watch policy dir %s (%s): reload with SIGHUP", policy_dir,
			strerror(errno));
	err = tenants_init(r);
	if (err)
		return err;
	registry_sweep_maps(r); /* finds every sandbox, forgets the gone ones */
	tenants_release_unused(r);
	r->policy_generation = 1;
	sg_info("%u policy slots, %u sandboxes enforced under %s (%llu ms)", count_slots(r),
		r->n_sandboxes, root,
		(unsigned long long)((clock_ns(CLOCK_MONOTONIC) - started) / 1000000));
	return 0;
}

void registry_free(struct registry *r)
{
	tenants_free(r);
	free(r->cgids);
	free(r->at);
	free(r->pool);
	free(r->free);
	free(r->watches);
	if (r->inotify_fd >= 0)
		close(r->inotify_fd);
	if (r->host_root_fd > 0)
		close(r->host_root_fd);
}

static void sandbox_gone(struct registry *r, const char *tenant, const char *name)
{
	for (struct sg_sandbox_entry *s = NULL; (s = registry_next(r, s));)
		if (!strcmp(s->tenant, tenant) && !strcmp(s->name, name)) {
			registry_remove(r, s->cgid);
			return;
		}
}

/* A policy file changed: <name>.json, or a Kubernetes ConfigMap volume
 * swapping its "..data" symlink. Editors' and installers' temporary files
 * are not policies. */
static bool policy_file_event(const struct inotify_event *ev)
{
	size_t n = ev->len ? strlen(ev->name) : 0;

	if (!n)
		return false;
	if (!strcmp(ev->name, "..data"))
		return true;
	return ev->name[0] != '.' && n > 5 && !strcmp(ev->name + n - 5, ".json");
}

static void on_event(struct registry *r, const struct inotify_event *ev, bool *policies_changed)
{
	struct tenant_watch *w;
	char tenant[SG_TENANT_MAX];

	if (ev->wd == r->policy_wd) {
		*policies_changed |= policy_file_event(ev);
		return;
	}
	if (ev->mask & IN_IGNORED) {
		watch_forget(r, ev->wd);
		return;
	}
	if (!ev->len || !(ev->mask & IN_ISDIR))
		return;
	if (ev->wd == r->root_wd) {
		if ((ev->mask & IN_CREATE) && tenant_name_valid(ev->name))
			watch_tenant_dir(r, ev->name, NULL);
		return;
	}
	w = watch_by_wd(r, ev->wd);
	if (!w)
		return;
	snprintf(tenant, sizeof(tenant), "%s", w->name);
	if (ev->mask & IN_CREATE)
		registry_add(r, tenant, ev->name, NULL);
	else if (ev->mask & IN_DELETE)
		sandbox_gone(r, tenant, ev->name);
}

void registry_handle_inotify(struct registry *r)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool policies_changed = false;
	ssize_t n;

	while ((n = read(r->inotify_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			on_event(r, ev, &policies_changed);
		}
	}
	if (policies_changed)
		registry_reload_policies(r, true);
}
