/* Tenants and sandboxes, and the map entries that make the kernel enforce
 * on them. */
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
#include "policy_compile.h"
#include "registry.h"

static time_t policy_file_mtime(const struct registry *r, const char *tenant)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s.json", r->policy_dir, tenant);
	if (stat(path, &st) == 0)
		return st.st_mtime;
	snprintf(path, sizeof(path), "%s/default.json", r->policy_dir);
	return stat(path, &st) == 0 ? st.st_mtime : 0;
}

/* Load and compile a tenant's policy. On any error the policy in force
 * (if any) stays. */
static int tenant_load_policy(struct registry *r, struct sg_tenant *t)
{
	struct sg_policy_error perr;
	struct sg_policy *p = malloc(sizeof(*p));
	char msg[512];
	int err;

	if (!p)
		return -ENOMEM;
	err = policy_for_tenant(r->policy_dir, t->name, p, &perr);
	if (err) {
		policy_error_format(&perr, msg, sizeof(msg));
		sg_error("policy for tenant %s rejected, %s: %s", t->name,
			 t->policy ? "the previous one stays in force"
				   : "its sandboxes are denied everything",
			 msg);
		free(p);
		return err;
	}
	err = policy_compile_apply(r->bpf, t->idx, p, r->host_root_fd, r->host_root, msg,
				   sizeof(msg));
	if (err) {
		sg_error("%s", msg);
		free(p);
		return err;
	}
	free(t->policy);
	t->policy = p;
	t->policy_mtime = policy_file_mtime(r, t->name);
	return 0;
}

struct sg_tenant *registry_tenant_by_idx(struct registry *r, uint32_t idx)
{
	return idx < SG_MAX_TENANTS ? r->tenants[idx] : NULL;
}

static struct sg_tenant *tenant_new(struct registry *r, const char *name, uint32_t idx)
{
	struct sg_tenant *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->idx = idx;
	r->tenants[idx] = t;
	if (idx >= r->n_tenants)
		r->n_tenants = idx + 1;
	return t;
}

struct sg_tenant *registry_tenant(struct registry *r, const char *name, bool create)
{
	char key_name[SG_TENANT_MAX] = { 0 };
	struct sg_tenant *t;
	uint32_t idx;

	for (uint32_t i = 0; i < r->n_tenants; i++)
		if (r->tenants[i] && !strcmp(r->tenants[i]->name, name))
			return r->tenants[i];
	if (!create || !tenant_name_valid(name))
		return NULL;
	for (idx = 0; idx < SG_MAX_TENANTS && r->tenants[idx]; idx++)
		;
	if (idx == SG_MAX_TENANTS) {
		sg_error("tenant %s: the node already has %d tenants", name, SG_MAX_TENANTS);
		return NULL;
	}
	t = tenant_new(r, name, idx);
	if (!t)
		return NULL;
	snprintf(key_name, sizeof(key_name), "%s", name);
	if (bpf_map_update_elem(r->bpf->tenant_names_fd, &idx, key_name, BPF_ANY))
		sg_warn("tenant %s: cannot record its index: %s", name, strerror(errno));
	tenant_load_policy(r, t);
	return t;
}

/* A restarted agent maps the pinned tenant indexes back to names. */
static void restore_tenants(struct registry *r)
{
	char name[SG_TENANT_MAX];

	for (uint32_t idx = 0; idx < SG_MAX_TENANTS; idx++) {
		if (bpf_map_lookup_elem(r->bpf->tenant_names_fd, &idx, name) || !name[0])
			continue;
		name[SG_TENANT_MAX - 1] = 0;
		if (tenant_new(r, name, idx))
			tenant_load_policy(r, r->tenants[idx]);
	}
}

static uint32_t slot_of(uint64_t cgid)
{
	return (uint32_t)((cgid * 0x9E3779B97F4A7C15ull) >> 50) % SG_REG_SLOTS;
}

struct sg_sandbox_entry *registry_find(struct registry *r, uint64_t cgid)
{
	for (uint32_t i = 0, s = slot_of(cgid); i < SG_REG_SLOTS; i++, s = (s + 1) % SG_REG_SLOTS) {
		if (r->slots[s].cgid == cgid)
			return &r->slots[s];
		if (!r->slots[s].cgid)
			return NULL;
	}
	return NULL;
}

void registry_cgroup_path(const struct registry *r, const struct sg_sandbox_entry *s, char *buf,
			  size_t len)
{
	const struct sg_tenant *t = s->tenant < SG_MAX_TENANTS ? r->tenants[s->tenant] : NULL;

	snprintf(buf, len, "%s/%s/%s", r->root, t ? t->name : "?", s->name);
}

/* The scratch directory the executor made for this sandbox, by convention
 * <scratch_root>/<tenant>/<sandbox>. */
static void scratch_identity(const struct registry *r, const struct sg_tenant *t, const char *name,
			     struct sg_sandbox *sb)
{
	char path[PATH_MAX];
	struct stat st;

	if (!t->policy)
		return;
	snprintf(path, sizeof(path), "%s/%s/%s", t->policy->scratch_root, t->name, name);
	if (host_stat(r->host_root_fd, path, 1, &st) == 0 && S_ISDIR(st.st_mode)) {
		sb->scratch_dev = (major(st.st_dev) << 20) | minor(st.st_dev);
		sb->scratch_ino = st.st_ino;
	} else {
		sg_debug("sandbox %s/%s has no scratch at %s: nothing is writable", t->name, name,
			 path);
	}
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
	struct sg_tenant *t;
	char path[PATH_MAX];
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
		if (out)
			*out = e;
		return 0;
	}
	if (r->n_sandboxes >= SG_MAX_SANDBOXES) {
		sg_error("sandbox %s/%s: %d sandboxes already enforced", tenant, name,
			 SG_MAX_SANDBOXES);
		return -ENOSPC;
	}
	t = registry_tenant(r, tenant, true);
	if (!t)
		return -EINVAL;

	/* Live tasks already inside (a sandbox found by the start scan). */
	st.tasks = cgroup_count_procs(path, "cgroup.threads");
	if (st.tasks < 0)
		st.tasks = 0;
	sb.tenant = t->idx;
	scratch_identity(r, t, name, &sb);
	/* State first: a program that finds the sandbox finds its counters. */
	if (bpf_map_update_elem(r->bpf->state_fd, &cgid, &st, BPF_NOEXIST) && errno != EEXIST)
		return -errno;
	if (bpf_map_update_elem(r->bpf->sandboxes_fd, &cgid, &sb, BPF_ANY)) {
		err = -errno;
		bpf_map_delete_elem(r->bpf->state_fd, &cgid);
		return err;
	}
	for (s = slot_of(cgid); r->slots[s].cgid; s = (s + 1) % SG_REG_SLOTS)
		;
	e = &r->slots[s];
	memset(e, 0, sizeof(*e));
	e->cgid = cgid;
	e->tenant = t->idx;
	e->kill_rule = -1;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->added_ns = clock_ns(CLOCK_BOOTTIME);
	r->n_sandboxes++;
	t->active++;
	sg_debug("sandbox %s/%s (cgroup %llu) enforced", tenant, name, (unsigned long long)cgid);
	if (out)
		*out = e;
	return 0;
}

void registry_remove(struct registry *r, uint64_t cgid)
{
	struct sg_sandbox_entry *e = registry_find(r, cgid);
	uint32_t s, next;

	bpf_map_delete_elem(r->bpf->sandboxes_fd, &cgid);
	bpf_map_delete_elem(r->bpf->state_fd, &cgid);
	if (!e)
		return;
	if (r->tenants[e->tenant] && r->tenants[e->tenant]->active)
		r->tenants[e->tenant]->active--;
	r->n_sandboxes--;
	/* Backward-shift deletion keeps the probe chains intact. */
	s = e - r->slots;
	memset(e, 0, sizeof(*e));
	for (next = (s + 1) % SG_REG_SLOTS; r->slots[next].cgid; next = (next + 1) % SG_REG_SLOTS) {
		uint32_t home = slot_of(r->slots[next].cgid);
		bool movable = (s <= next) ? (home <= s || home > next)
					   : (home <= s && home > next);
		if (movable) {
			r->slots[s] = r->slots[next];
			memset(&r->slots[next], 0, sizeof(r->slots[next]));
			s = next;
		}
	}
}

struct sg_sandbox_entry *registry_next(struct registry *r, struct sg_sandbox_entry *prev)
{
	uint32_t s = prev ? (uint32_t)(prev - r->slots) + 1 : 0;

	for (; s < SG_REG_SLOTS; s++)
		if (r->slots[s].cgid)
			return &r->slots[s];
	return NULL;
}

static void watch_tenant_dir(struct registry *r, const char *tenant)
{
	struct sg_tenant *t = registry_tenant(r, tenant, true);
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (!t)
		return;
	snprintf(path, sizeof(path), "%s/%s", r->root, tenant);
	if (r->tenant_wd[t->idx] <= 0)
		r->tenant_wd[t->idx] =
			inotify_add_watch(r->inotify_fd, path, IN_CREATE | IN_DELETE | IN_ONLYDIR);
	/* Scan after watching, so nothing created in between is missed. */
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.')
			registry_add(r, tenant, de->d_name, NULL);
	closedir(d);
}

static void scan_root(struct registry *r)
{
	struct dirent *de;
	DIR *d = opendir(r->root);

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && tenant_name_valid(de->d_name))
			watch_tenant_dir(r, de->d_name);
	closedir(d);
}

/* Sandboxes gone while the agent was down. */
static void prune_stale(struct registry *r)
{
	uint64_t key, next, *prev = NULL;

	while (bpf_map_get_next_key(r->bpf->sandboxes_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (!registry_find(r, key)) {
			bpf_map_delete_elem(r->bpf->sandboxes_fd, &key);
			bpf_map_delete_elem(r->bpf->state_fd, &key);
			prev = NULL;
		}
	}
}

bool registry_same_root(const struct registry *r, uint64_t dev, uint64_t ino)
{
	struct stat st;

	return fstat(r->host_root_fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

int registry_init(struct registry *r, const struct sg_bpf *bpf, const char *root,
		  const char *policy_dir, const char *host_root)
{
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
	r->slots = calloc(SG_REG_SLOTS, sizeof(*r->slots));
	if (!r->slots)
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
	restore_tenants(r);
	scan_root(r);
	prune_stale(r);
	r->policy_generation = 1;
	sg_info("%u tenants, %u sandboxes enforced under %s", r->n_tenants, r->n_sandboxes, root);
	return 0;
}

void registry_free(struct registry *r)
{
	for (uint32_t i = 0; i < SG_MAX_TENANTS; i++)
		if (r->tenants[i]) {
			free(r->tenants[i]->policy);
			free(r->tenants[i]);
		}
	free(r->slots);
	if (r->inotify_fd >= 0)
		close(r->inotify_fd);
	if (r->host_root_fd > 0)
		close(r->host_root_fd);
}

static uint32_t tenant_of_wd(struct registry *r, int wd)
{
	for (uint32_t i = 0; i < r->n_tenants; i++)
		if (r->tenant_wd[i] == wd)
			return i;
	return UINT32_MAX;
}

static void sandbox_gone(struct registry *r, struct sg_tenant *t, const char *name)
{
	for (struct sg_sandbox_entry *s = NULL; (s = registry_next(r, s));)
		if (s->tenant == t->idx && !strcmp(s->name, name)) {
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

void registry_handle_inotify(struct registry *r)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool policies_changed = false;
	ssize_t n;

	while ((n = read(r->inotify_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->wd == r->policy_wd) {
				policies_changed |= policy_file_event(ev);
				continue;
			}
			if (!ev->len || !(ev->mask & IN_ISDIR))
				continue;
			if (ev->wd == r->root_wd) {
				if ((ev->mask & IN_CREATE) && tenant_name_valid(ev->name))
					watch_tenant_dir(r, ev->name);
				continue;
			}
			uint32_t ti = tenant_of_wd(r, ev->wd);
			if (ti == UINT32_MAX || !r->tenants[ti])
				continue;
			if (ev->mask & IN_CREATE)
				registry_add(r, r->tenants[ti]->name, ev->name, NULL);
			else if (ev->mask & IN_DELETE)
				sandbox_gone(r, r->tenants[ti], ev->name);
		}
	}
	if (policies_changed)
		registry_reload_policies(r);
}

int registry_reload_policies(struct registry *r)
{
	int rejected = 0;

	for (uint32_t i = 0; i < r->n_tenants; i++)
		if (r->tenants[i] && tenant_load_policy(r, r->tenants[i]))
			rejected++;
	if (rejected)
		r->reloads_failed++;
	else
		r->reloads_ok++;
	r->policy_generation++;
	sg_info("policies reloaded (generation %llu, %d rejected)",
		(unsigned long long)r->policy_generation, rejected);
	return rejected;
}
