/* The agent's BPF objects: open -> set rodata -> load -> attach -> pin ->
 * switch generation, as separate steps. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf_loader.h"
#include "lib/cgroup.h"
#include "abi/events.h"
#include "lib/log.h"
#include "abi/maps.h"
#include "policy/policy.h"
#include "lib/array_len.h"
#include "control/ondemand.h"
#include "control/pinned.h"
#include "egress.skel.h"
#include "files.skel.h"
#include "tasks.skel.h"
/* Only the ELF bytes of the compat builds are used: the skeleton types
 * above describe them too (same source, same programs and maps). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "egress_compat.skel.h"
#include "files_compat.skel.h"
#include "tasks_compat.skel.h"
#pragma GCC diagnostic pop

#define BPF_FS_MAGIC_       0xcafe4a11
#define ATTACH_UNIX_CONNECT 49
#define ATTACH_UNIX_SENDMSG 50

static int ensure_pin_root(void)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) || (unsigned long)st.f_type != BPF_FS_MAGIC_) {
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700")) {
			sg_error("bpffs is not mounted at /sys/fs/bpf and mounting it failed: %s",
				 strerror(errno));
			return -errno;
		}
	}
	if (mkdir(sg_pin_root(), 0700) && errno != EEXIST) {
		sg_error("cannot create %s: %s", sg_pin_root(), strerror(errno));
		return -errno;
	}
	return 0;
}

/* The maps no program reads (include/abi/maps.h): pinned too, so that a
 * restarted agent and the executors find them. */
static int open_user_map(const char *name, enum bpf_map_type type, uint32_t key_size,
			 uint32_t value_size, uint32_t max_entries)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts,
		    .map_flags = type == BPF_MAP_TYPE_HASH ? BPF_F_NO_PREALLOC : 0);
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", sg_pin_root(), name);
	fd = bpf_obj_get(path);
	if (fd >= 0)
		return fd;
	fd = bpf_map_create(type, name, key_size, value_size, max_entries, &opts);
	if (fd < 0) {
		sg_error("cannot create the map %s: %s", name, strerror(errno));
		return -errno;
	}
	if (bpf_obj_pin(fd, path)) {
		int err = -errno;
		sg_error("cannot pin %s: %s", path, strerror(errno));
		close(fd);
		return err;
	}
	return fd;
}

static int pin_link(struct bpf_link *link, const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path); /* a leftover from a crashed start of the same generation */
	if (bpf_link__pin(link, path)) {
		sg_error("cannot pin link %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Syscall tracepoint programs are attached on demand, only while a
 * sandbox exists (src/control/ondemand.h): pinned, not attached, as
 * <dir>/ondemand/prog/<category>:<tracepoint>. */
static bool on_demand(struct bpf_program *prog)
{
	return bpf_program__type(prog) == BPF_PROG_TYPE_TRACEPOINT &&
	       !strncmp(bpf_program__section_name(prog), "tracepoint/syscalls/", 20);
}

static int pin_on_demand(struct bpf_program *prog, const char *dir)
{
	/* "tracepoint/syscalls/sys_exit_openat" -> "syscalls:sys_exit_openat" */
	const char *tp = bpf_program__section_name(prog) + strlen("tracepoint/");
	char path[PATH_MAX];
	int err;

	snprintf(path, sizeof(path), "%s/ondemand", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/ondemand/prog", dir);
	if (mkdir(path, 0700) && errno != EEXIST) {
		sg_error("cannot create %s: %s", path, strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "%s/ondemand/prog/%s", dir, tp);
	*strchr(path + strlen(dir) + strlen("/ondemand/prog/"), '/') = ':';
	unlink(path); /* a leftover from a crashed start of the same generation */
	err = bpf_program__pin(prog, path);
	if (err)
		sg_error("cannot pin %s: %s", path, strerror(-err));
	return err;
}

/* Attach one program (cgroup programs, lsm_cgroup ones included, to the
 * sandguard root) and pin its link. */
static int attach_prog(struct sg_bpf *b, struct bpf_program *prog, int cgroup_fd, const char *dir)
{
	enum bpf_prog_type type = bpf_program__type(prog);
	bool lsm_cgroup = bpf_program__expected_attach_type(prog) == BPF_LSM_CGROUP;
	bool to_cgroup = type == BPF_PROG_TYPE_CGROUP_SOCK_ADDR ||
			 type == BPF_PROG_TYPE_CGROUP_SKB || lsm_cgroup;
	struct bpf_link *link;
	int err;

	if (!bpf_program__autoload(prog))
		return 0;
	if (on_demand(prog))
		return pin_on_demand(prog, dir);
	link = to_cgroup ? bpf_program__attach_cgroup(prog, cgroup_fd) : bpf_program__attach(prog);
	if (!link) {
		err = -errno;
		/* The kernel takes lsm_cgroup programs on ten hooks at most,
		 * shared by all the node's software: the hooks themselves
		 * take the same judgement. */
		sg_error(
			"cannot attach %s: %s%s", bpf_program__name(prog), strerror(errno),
			lsm_cgroup
				? " (to attach LSM mode's programs to their hooks instead, for every "
				  "task of the node, start the agent with "
				  "SANDGUARD_DISABLE_FEATURES=bpf_lsm_cgroup)"
				: "");
		return err;
	}
	err = pin_link(link, dir, bpf_program__name(prog));
	/* The pin holds the attachment; our handle is not needed. */
	bpf_link__disconnect(link);
	bpf_link__destroy(link);
	if (!err)
		b->n_links++;
	return err;
}

static void set_autoload_all(struct bpf_object *obj, bool on)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, obj) bpf_program__set_autoload(p, on);
}

/* The cgroup level of <root>/<tenant>/<sandbox>: the root's depth below
 * the cgroup2 mount, plus two. */
static int sandbox_level(const char *cgroup_root, uint32_t *level)
{
	char mnt[PATH_MAX];
	const char *p;
	uint32_t depth = 0;
	size_t n;

	if (cgroup2_mount(mnt, sizeof(mnt)))
		return -ENOENT;
	n = strlen(mnt);
	if (strncmp(cgroup_root, mnt, n) || (cgroup_root[n] && cgroup_root[n] != '/')) {
		sg_error("the sandguard cgroup root %s is not below the cgroup2 mount %s",
			 cgroup_root, mnt);
		return -EINVAL;
	}
	for (p = cgroup_root + n; *p; p++)
		if (*p == '/' && p[1] && p[1] != '/')
			depth++;
	*level = depth + 2;
	return 0;
}

/* open_<name>(compat, opts): the skeleton's own open, with the ELF bytes
 * of the compat build swapped in when `compat`. */
#define DEFINE_OPEN(name)                                                                      \
	static struct name##_bpf *open_##name(bool compat,                                     \
					      const struct bpf_object_open_opts *opts)         \
	{                                                                                      \
		struct name##_bpf *obj = calloc(1, sizeof(*obj));                              \
		int err = obj ? name##_bpf__create_skeleton(obj) : -ENOMEM;                    \
                                                                                               \
		if (!err && compat)                                                            \
			obj->skeleton->data =                                                  \
				(void *)name##_compat_bpf__elf_bytes(&obj->skeleton->data_sz); \
		if (!err)                                                                      \
			err = bpf_object__open_skeleton(obj->skeleton, opts);                  \
		if (err) {                                                                     \
			name##_bpf__destroy(obj);                                              \
			errno = -err;                                                          \
			return NULL;                                                           \
		}                                                                              \
		return obj;                                                                    \
	}
DEFINE_OPEN(egress)
DEFINE_OPEN(tasks)
DEFINE_OPEN(files)

static int open_objects(struct sg_bpf *b, const struct sg_features *f, const struct sg_modes *m,
			const char *cgroup_root)
{
	bool compat = !f->f[SG_FEAT_ATOMIC_FETCH].ok;
	bool helper = f->f[SG_FEAT_TRACING_ANCESTOR].ok;
	uint32_t level;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = sg_pin_root());

	b->egress = open_egress(compat, &opts);
	b->tasks = open_tasks(compat, &opts);
	b->files = open_files(compat, &opts);
	if (!b->egress || !b->tasks || !b->files) {
		sg_error("cannot open the BPF objects: %s", strerror(errno));
		return -errno;
	}
	if (sandbox_level(cgroup_root, &level))
		return -EINVAL;
	b->compat = compat;
	b->egress->rodata->sg_gen = b->gen;
	b->tasks->rodata->sg_gen = b->gen;
	b->files->rodata->sg_gen = b->gen;
	b->egress->rodata->sg_sandbox_level = level;
	b->tasks->rodata->sg_sandbox_level = level;
	b->files->rodata->sg_sandbox_level = level;
	b->egress->rodata->sg_ancestor_helper = helper;
	b->tasks->rodata->sg_ancestor_helper = helper;
	b->files->rodata->sg_ancestor_helper = helper;

	/* egress: one program per hook the kernel has. */
	bpf_program__set_autoload(b->egress->progs.sg_connect4, f->f[SG_FEAT_CONNECT4].ok);
	bpf_program__set_autoload(b->egress->progs.sg_connect6, f->f[SG_FEAT_CONNECT6].ok);
	bpf_program__set_autoload(b->egress->progs.sg_sendmsg4, f->f[SG_FEAT_SENDMSG4].ok);
	bpf_program__set_autoload(b->egress->progs.sg_sendmsg6, f->f[SG_FEAT_SENDMSG6].ok);
	bpf_program__set_autoload(b->egress->progs.sg_connect_unix, f->f[SG_FEAT_CONNECT_UNIX].ok);
	bpf_program__set_autoload(b->egress->progs.sg_sendmsg_unix, f->f[SG_FEAT_SENDMSG_UNIX].ok);
	bpf_program__set_autoload(b->egress->progs.sg_skb_egress, f->f[SG_FEAT_SKB_EGRESS].ok);
	bpf_program__set_autoload(b->egress->progs.sg_lsm_unix_connect,
				  m->unix_egress == SG_UNIX_LSM);
	bpf_program__set_autoload(b->egress->progs.sg_lsm_unix_send, m->unix_egress == SG_UNIX_LSM);
	/* No cgroup hook sees a unix bind, on any kernel. */
	bpf_program__set_autoload(b->egress->progs.sg_lsm_unix_bind, m->files == SG_MODE_LSM);
	bpf_program__set_expected_attach_type(b->egress->progs.sg_connect_unix,
					      ATTACH_UNIX_CONNECT);
	bpf_program__set_expected_attach_type(b->egress->progs.sg_sendmsg_unix,
					      ATTACH_UNIX_SENDMSG);

	/* tasks: all or nothing; without tp_btf forks and execs are not tracked. */
	set_autoload_all(b->tasks->obj, f->f[SG_FEAT_TP_BTF].ok);

	/* files: the LSM programs (on the sandguard root where the kernel
	 * has lsm_cgroup, else on the hooks) or the tracepoint fallback. */
	set_autoload_all(b->files->obj, false);
	if (m->files == SG_MODE_LSM) {
		bpf_program__set_autoload(m->lsm_cgroup ? b->files->progs.sg_cg_file_open
							: b->files->progs.sg_file_open,
					  true);
	} else if (m->files == SG_MODE_FALLBACK) {
		/* Attached on demand (src/control/ondemand.h). One set of the
		 * two (src/agent/bpf/files.bpf.c): the file read by plain
		 * loads, or by helper calls where the kernel would refuse
		 * the loads' kfunc. */
		struct bpf_program *by_helpers[] = {
			b->files->progs.sg_exit_openat,         b->files->progs.sg_exit_open,
			b->files->progs.sg_exit_openat2,        b->files->progs.sg_exit_creat,
			b->files->progs.sg_exit_open_by_handle,
		};
		struct bpf_program *by_loads[] = {
			b->files->progs.sg_cast_openat,         b->files->progs.sg_cast_open,
			b->files->progs.sg_cast_openat2,        b->files->progs.sg_cast_creat,
			b->files->progs.sg_cast_open_by_handle,
		};
		for (size_t i = 0; i < ARRAY_LEN(by_helpers); i++)
			bpf_program__set_autoload(m->file_loads ? by_loads[i] : by_helpers[i],
						  true);
	}
	if (m->execs == SG_MODE_LSM)
		bpf_program__set_autoload(m->lsm_cgroup ? b->files->progs.sg_cg_bprm_check
							: b->files->progs.sg_bprm_check,
					  true);
	return 0;
}

static int load_objects(struct sg_bpf *b)
{
	int err = sg_bpf_check_pins();

	if (err)
		return err;

	/* The first object creates and pins the shared maps, the others
	 * reuse them (libbpf matches them by pin path). */
	err = tasks_bpf__load(b->tasks);
	if (!err)
		err = egress_bpf__load(b->egress);
	if (!err)
		err = files_bpf__load(b->files);
	if (err) {
		sg_error(
			"cannot load the BPF programs: %s (if an older sandguard left incompatible "
			"maps pinned, run 'sandguard agent --cleanup' first)",
			strerror(-err));
		return err;
	}
	b->sandboxes_fd = bpf_map__fd(b->tasks->maps.sg_sandboxes);
	b->state_fd = bpf_map__fd(b->tasks->maps.sg_state);
	b->policies_fd = bpf_map__fd(b->tasks->maps.sg_policies);
	b->paths_fd = bpf_map__fd(b->tasks->maps.sg_paths);
	b->exec_files_fd = bpf_map__fd(b->tasks->maps.sg_exec_files);
	b->config_fd = bpf_map__fd(b->tasks->maps.sg_config);
	b->events_fd = bpf_map__fd(b->tasks->maps.sg_events);
	b->drops_fd = bpf_map__fd(b->tasks->maps.sg_drops);
	b->tenant_names_fd = open_user_map("sg_tenant_names", BPF_MAP_TYPE_ARRAY, sizeof(uint32_t),
					   SG_TENANT_MAX, SG_MAX_TENANTS);
	if (b->tenant_names_fd < 0)
		return b->tenant_names_fd;
	b->tenant_index_fd = open_user_map("sg_tenant_index", BPF_MAP_TYPE_HASH, SG_TENANT_MAX,
					   sizeof(uint32_t), SG_MAX_TENANTS);
	if (b->tenant_index_fd < 0)
		return b->tenant_index_fd;
	b->killed_fd = open_user_map("sg_killed", BPF_MAP_TYPE_HASH, sizeof(uint64_t),
				     sizeof(uint32_t), SG_MAX_SANDBOXES);
	if (b->killed_fd < 0)
		return b->killed_fd;
	b->ids_fd = open_user_map("sg_sandbox_ids", BPF_MAP_TYPE_HASH, sizeof(uint64_t),
				  sizeof(struct sg_sandbox_ids), SG_MAX_SANDBOXES);
	return b->ids_fd < 0 ? b->ids_fd : 0;
}

static int attach_objects(struct sg_bpf *b, const char *cgroup_root, const char *dir)
{
	struct bpf_program *p;
	int cg_fd, err = 0;

	cg_fd = open(cgroup_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0) {
		sg_error("cannot open cgroup %s: %s", cgroup_root, strerror(errno));
		return -errno;
	}
	bpf_object__for_each_program(p, b->egress->obj) if (!err)
		err = attach_prog(b, p, cg_fd, dir);
	bpf_object__for_each_program(p, b->tasks->obj) if (!err) err = attach_prog(b, p, -1, dir);
	bpf_object__for_each_program(p, b->files->obj) if (!err)
		err = attach_prog(b, p, cg_fd, dir);
	close(cg_fd);
	return err;
}

/* A generation's pins: its links, and its on-demand programs and links
 * in the directories below. */
static void remove_dir_pins(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (de->d_type == DT_DIR)
				remove_dir_pins(path);
			else
				unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

/* Unpinning a link detaches its program (nothing else holds it). */
static void retire_generations_except(uint32_t keep)
{
	DIR *d = opendir(sg_pin_root());
	struct dirent *de;
	char keep_name[32], path[PATH_MAX];

	if (!d)
		return;
	snprintf(keep_name, sizeof(keep_name), "gen-%u", keep);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "gen-", 4) && strcmp(de->d_name, keep_name)) {
			snprintf(path, sizeof(path), "%s/%s", sg_pin_root(), de->d_name);
			remove_dir_pins(path);
		}
	closedir(d);
}

static const char *compat_note(const struct sg_bpf *b)
{
	return b->compat ? " (compat objects: no fetching atomics)" : "";
}

int sg_bpf_load(struct sg_bpf *b, const struct sg_features *f, const struct sg_modes *m,
		const char *cgroup_root)
{
	struct sg_config cfg = { 0 };
	char dir[PATH_MAX], why[300];
	uint32_t zero = 0;
	int err, lock;

	memset(b, 0, sizeof(*b));
	b->tenant_names_fd = b->tenant_index_fd = b->killed_fd = b->ids_fd = -1;
	err = ensure_pin_root();
	if (err)
		return err;
	b->prev_gen = sg_pinned_generation();
	b->gen = b->prev_gen + 1 ? b->prev_gen + 1 : 1;

	err = open_objects(b, f, m, cgroup_root);
	if (!err)
		err = load_objects(b);
	if (err)
		goto fail;

	snprintf(dir, sizeof(dir), "%s/gen-%u", sg_pin_root(), b->gen);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		err = -errno;
		sg_error("cannot create %s: %s", dir, strerror(errno));
		goto fail;
	}
	err = attach_objects(b, cgroup_root, dir);
	if (err) {
		remove_dir_pins(dir); /* the previous generation keeps enforcing */
		goto fail;
	}

	/* The switch: one map write. From here the new programs enforce and
	 * the previous generation's programs see no sandboxes. Under the
	 * on-demand lock: an executor attaching the on-demand programs of
	 * the active generation meanwhile would attach the old ones. */
	lock = sg_ondemand_lock();
	if (lock < 0) {
		err = lock;
		sg_error("cannot lock %s: %s", sg_pin_root(), strerror(-lock));
		remove_dir_pins(dir);
		goto fail;
	}
	if (!sg_ondemand_no_sandbox()) {
		err = sg_ondemand_attach(lock, b->gen, why, sizeof(why));
		if (err) {
			sg_error("cannot attach the file programs: %s", why);
			sg_ondemand_unlock(lock);
			remove_dir_pins(dir);
			goto fail;
		}
	}
	bpf_map_lookup_elem(b->config_fd, &zero, &cfg); /* the epoch goes on */
	cfg.active_gen = b->gen;
	cfg.file_mode = m->files;
	cfg.exec_mode = m->execs;
	cfg.verdict_epoch++;
	if (bpf_map_update_elem(b->config_fd, &zero, &cfg, BPF_ANY)) {
		err = -errno;
		sg_error("cannot activate generation %u: %s", b->gen, strerror(errno));
		sg_ondemand_unlock(lock);
		remove_dir_pins(dir);
		goto fail;
	}
	retire_generations_except(b->gen);
	sg_ondemand_unlock(lock);
	if (b->prev_gen)
		sg_info("adopted pinned maps of generation %u; generation %u active with %d programs%s",
			b->prev_gen, b->gen, b->n_links, compat_note(b));
	else
		sg_info("generation %u active with %d programs%s", b->gen, b->n_links,
			compat_note(b));
	return 0;
fail:
	sg_bpf_close(b);
	return err;
}

void sg_bpf_close(struct sg_bpf *b)
{
	int *user_fds[] = { &b->tenant_names_fd, &b->tenant_index_fd, &b->killed_fd, &b->ids_fd };

	egress_bpf__destroy(b->egress);
	tasks_bpf__destroy(b->tasks);
	files_bpf__destroy(b->files);
	for (size_t i = 0; i < ARRAY_LEN(user_fds); i++) {
		if (*user_fds[i] >= 0)
			close(*user_fds[i]);
		*user_fds[i] = -1;
	}
	b->egress = NULL;
	b->tasks = NULL;
	b->files = NULL;
}

int sg_bpf_cleanup(void)
{
	DIR *d = opendir(sg_pin_root());
	struct dirent *de;
	char path[PATH_MAX];
	int n = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", sg_pin_root(), de->d_name);
		if (!strncmp(de->d_name, "gen-", 4))
			remove_dir_pins(path);
		else
			unlink(path);
		n++;
	}
	closedir(d);
	if (rmdir(sg_pin_root()) && errno != ENOENT)
		return -errno;
	sg_info("removed %d pins under %s: sandboxes are no longer enforced", n, sg_pin_root());
	return 0;
}

uint64_t sg_bpf_drops(const struct sg_bpf *b)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t total = 0, *vals;
	uint32_t zero = 0;

	if (ncpu <= 0)
		return 0;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return 0;
	if (!bpf_map_lookup_elem(b->drops_fd, &zero, vals))
		for (int i = 0; i < ncpu; i++)
			total += vals[i];
	free(vals);
	return total;
}

int sg_bpf_new_verdict_epoch(const struct sg_bpf *b)
{
	struct sg_config cfg;
	uint32_t zero = 0;

	/* Only the agent writes sg_config, from its one thread. */
	if (bpf_map_lookup_elem(b->config_fd, &zero, &cfg))
		return -errno;
	cfg.verdict_epoch++;
	return bpf_map_update_elem(b->config_fd, &zero, &cfg, BPF_ANY) ? -errno : 0;
}
