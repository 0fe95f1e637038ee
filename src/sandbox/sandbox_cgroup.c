/* A sandbox's cgroups, v2 and v1 (see src/sandbox/sandbox_cgroup.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "lib/cgroup.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_cgroup.h"

static const char *const ctrl_name[SB_CTRL__COUNT] = {
	[SB_CTRL_PIDS] = "pids",
	[SB_CTRL_MEMORY] = "memory",
	[SB_CTRL_CPU] = "cpu",
	[SB_CTRL_IO] = "io",
};

/* The same controllers' names on cgroup v1. */
static const char *const v1_name[SB_CTRL__COUNT] = {
	[SB_CTRL_PIDS] = "pids",
	[SB_CTRL_MEMORY] = "memory",
	[SB_CTRL_CPU] = "cpu",
	[SB_CTRL_IO] = "blkio",
};

#define CPU_PERIOD_US 100000
/* Whether <dir>/cgroup.controllers lists `ctrl`, i.e. the parent enabled it. */
static bool v2_offers(const char *dir, const char *ctrl)
{
	char path[PATH_MAX], tok[64];
	bool found = false;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.controllers", dir) >= sizeof(path))
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fscanf(f, "%63s", tok) == 1)
		if (!strcmp(tok, ctrl))
			found = true;
	fclose(f);
	return found;
}

/* Enable `ctrl` for the children of root and of root/tenant. */
static bool v2_enable(const char *root, const char *tenant_dir, const char *ctrl)
{
	char plus[32];
	int err;

	if (!v2_offers(root, ctrl))
		return false;
	snprintf(plus, sizeof(plus), "+%s", ctrl);
	err = write_file(root, "cgroup.subtree_control", plus);
	if (!err)
		err = write_file(tenant_dir, "cgroup.subtree_control", plus);
	if (err) {
		sg_warn("cannot enable the %s controller below %s: %s; trying cgroup v1", ctrl,
			root, strerror(-err));
		return false;
	}
	return true;
}

int sb_cgroup_mkdir(const char *path, bool exclusive, char *detail, size_t dlen)
{
	if (mkdir(path, 0755) == 0 || (!exclusive && errno == EEXIST))
		return 0;
	snprintf(detail, dlen, "cannot create cgroup %s: %s", path, strerror(errno));
	return -errno;
}

/* <v1 mount>/<base>/<tenant>/<id> for one v1 controller, mounted on `mnt`
 * ("": none). Returns 0, 1 when the controller has no v1 mount, or -errno. */
static int create_v1(struct sb_cgroup *cg, enum sb_ctrl c, const char *mnt, const char *base,
		     const char *tenant, const char *id, char *detail, size_t dlen)
{
	char dir[PATH_MAX];
	int err = 0;

	if (!mnt[0])
		return 1;
	if ((size_t)snprintf(cg->v1[c], sizeof(cg->v1[c]), "%s/%s/%s/%s", mnt, base, tenant, id) >=
	    sizeof(cg->v1[c])) {
		cg->v1[c][0] = '\0';
		snprintf(detail, dlen, "v1 cgroup path too long");
		return -ENAMETOOLONG;
	}
	/* Both parents are prefixes of the leaf, which fitted. */
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", mnt, base) < sizeof(dir))
		err = sb_cgroup_mkdir(dir, false, detail, dlen);
	if (!err && (size_t)snprintf(dir, sizeof(dir), "%s/%s/%s", mnt, base, tenant) < sizeof(dir))
		err = sb_cgroup_mkdir(dir, false, detail, dlen);
	if (!err)
		err = sb_cgroup_mkdir(cg->v1[c], true, detail, dlen);
	if (err)
		cg->v1[c][0] = '\0';
	return err;
}

static int set_limit(const char *dir, const char *file, const char *value, bool optional,
		     char *detail, size_t dlen)
{
	int err = write_file(dir, file, value);

	if (err == -ENOENT && optional)
		return 0;
	if (err)
		snprintf(detail, dlen, "cannot set %s/%s to %s: %s", dir, file, value,
			 strerror(-err));
	return err;
}

static bool wants_io(const struct sg_limits *lim)
{
	return lim->io_read_mbps || lim->io_write_mbps || lim->io_read_iops || lim->io_write_iops;
}

/* "max" for 0 (no limit), else the number scaled. */
static const char *io_value(uint64_t v, uint64_t scale, char *buf, size_t len)
{
	if (!v)
		return "max";
	snprintf(buf, len, "%" PRIu64, v * scale);
	return buf;
}

/* io.max on v2: one line per device. v1: the throttle files, one value
 * per file and device (a 0 there would mean "no limit" too). */
static int apply_io(struct sb_cgroup *cg, const struct sg_policy *p, char *detail, size_t dlen)
{
	static const char *const v1_files[4] = { "blkio.throttle.read_bps_device",
						 "blkio.throttle.write_bps_device",
						 "blkio.throttle.read_iops_device",
						 "blkio.throttle.write_iops_device" };
	const struct sg_limits *lim = &p->limits;
	uint64_t v[4] = { lim->io_read_mbps << 20, lim->io_write_mbps << 20, lim->io_read_iops,
			  lim->io_write_iops };
	char devs[SB_IO_MAX_DEVS][32], line[256], a[32], b[32], c[32], d[32];
	int n = sb_io_devices(p, devs, SB_IO_MAX_DEVS), err = 0;

	for (int i = 0; i < n && !err; i++) {
		if (cg->where[SB_CTRL_IO] == SB_WHERE_V2) {
			snprintf(line, sizeof(line), "%s rbps=%s wbps=%s riops=%s wiops=%s",
				 devs[i], io_value(lim->io_read_mbps, 1 << 20, a, sizeof(a)),
				 io_value(lim->io_write_mbps, 1 << 20, b, sizeof(b)),
				 io_value(lim->io_read_iops, 1, c, sizeof(c)),
				 io_value(lim->io_write_iops, 1, d, sizeof(d)));
			err = set_limit(cg->v2, "io.max", line, false, detail, dlen);
			continue;
		}
		for (int f = 0; f < 4 && !err; f++) {
			if (!v[f])
				continue;
			snprintf(line, sizeof(line), "%s %" PRIu64, devs[i], v[f]);
			err = set_limit(cg->v1[SB_CTRL_IO], v1_files[f], line, false, detail, dlen);
		}
	}
	return err;
}

static int apply_limits(struct sb_cgroup *cg, const struct sg_limits *lim, char *detail,
			size_t dlen)
{
	const char *pids = cg->where[SB_CTRL_PIDS] == SB_WHERE_V2 ? cg->v2 : cg->v1[SB_CTRL_PIDS];
	const char *mem = cg->where[SB_CTRL_MEMORY] == SB_WHERE_V2 ? cg->v2
								   : cg->v1[SB_CTRL_MEMORY];
	const char *cpu = cg->where[SB_CTRL_CPU] == SB_WHERE_V2 ? cg->v2 : cg->v1[SB_CTRL_CPU];
	bool v2;
	char val[64];
	int err = 0;

	if (lim->max_tasks && *pids) {
		snprintf(val, sizeof(val), "%u", lim->max_tasks);
		err = set_limit(pids, "pids.max", val, false, detail, dlen);
	}
	if (!err && lim->memory_mb && *mem) {
		v2 = cg->where[SB_CTRL_MEMORY] == SB_WHERE_V2;
		snprintf(val, sizeof(val), "%" PRIu64, lim->memory_mb << 20);
		err = set_limit(mem, v2 ? "memory.max" : "memory.limit_in_bytes", val, false,
				detail, dlen);
		/* No swap beyond the limit: memory + swap = the limit (v1
		 * needs memsw >= limit, so it comes second). */
		if (!err)
			err = v2 ? set_limit(mem, "memory.swap.max", "0", true, detail, dlen)
				 : set_limit(mem, "memory.memsw.limit_in_bytes", val, true, detail,
					     dlen);
	}
	if (!err && lim->cpu > 0 && *cpu) {
		long quota = (long)(lim->cpu * CPU_PERIOD_US);

		if (quota < 1000)
			quota = 1000; /* the kernel's minimum */
		if (cg->where[SB_CTRL_CPU] == SB_WHERE_V2) {
			snprintf(val, sizeof(val), "%ld %d", quota, CPU_PERIOD_US);
			err = set_limit(cpu, "cpu.max", val, false, detail, dlen);
		} else {
			snprintf(val, sizeof(val), "%d", CPU_PERIOD_US);
			err = set_limit(cpu, "cpu.cfs_period_us", val, false, detail, dlen);
			snprintf(val, sizeof(val), "%ld", quota);
			if (!err)
				err = set_limit(cpu, "cpu.cfs_quota_us", val, false, detail, dlen);
		}
	}
	return err;
}

int sb_cgroup_open(const char *dir, const char *file, int flags, int *fd, char *detail, size_t dlen)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s%s%s", dir, file ? "/" : "", file ? file : "");
	*fd = open(path, flags | O_CLOEXEC);
	if (*fd >= 0)
		return 0;
	snprintf(detail, dlen, "cannot open %s: %s", path, strerror(errno));
	return -errno;
}

/* What the sandbox's init needs to start inside: the v2 directory (born
 * there), its cgroup.procs (or moved there), the v1 `tasks` files. */
static int open_join_fds(struct sb_cgroup *cg, char *detail, size_t dlen)
{
	int err = sb_cgroup_open(cg->v2, NULL, O_RDONLY | O_DIRECTORY, &cg->dir_fd, detail, dlen);

	err = err ?: sb_cgroup_open(cg->v2, "cgroup.procs", O_WRONLY, &cg->procs_fd, detail, dlen);
	for (int c = 0; c < SB_CTRL__COUNT && !err; c++)
		if (cg->v1[c][0])
			err = sb_cgroup_open(cg->v1[c], "tasks", O_WRONLY, &cg->tasks_fd[c], detail,
					     dlen);
	return err;
}

void sb_cgroup_close_join_fds(struct sb_cgroup *cg)
{
	fs_close(&cg->dir_fd);
	fs_close(&cg->procs_fd);
	for (int c = 0; c < SB_CTRL__COUNT; c++)
		fs_close(&cg->tasks_fd[c]);
}

void sb_cgroup_no_fds(struct sb_cgroup *cg)
{
	cg->dir_fd = cg->procs_fd = -1;
	for (int c = 0; c < SB_CTRL__COUNT; c++)
		cg->tasks_fd[c] = -1;
	for (int i = 0; i < SB_STAT__COUNT; i++)
		cg->stat_fd[i] = -1;
}

int sb_cgroup_root(char *buf, size_t len)
{
	return sandguard_root(buf, len, false);
}

int sb_cgroup_create(struct sb_cgroup *cg, const char *tenant, const char *id,
		     const struct sg_policy *p, char *detail, size_t dlen)
{
	const struct sg_limits *lim = &p->limits;
	char *root = cg->root, tenant_dir[PATH_MAX], mnts[SB_CTRL__COUNT][PATH_MAX];
	const char *base;
	bool looked_v1 = false;
	int err;

	memset(cg, 0, sizeof(*cg));
	sb_cgroup_no_fds(cg);
	err = sandguard_root(root, sizeof(cg->root), true);
	if (err) {
		snprintf(detail, dlen, "cannot create the sandguard cgroup root: %s",
			 strerror(-err));
		return err;
	}
	if ((size_t)snprintf(tenant_dir, sizeof(tenant_dir), "%s/%s", root, tenant) >=
		    sizeof(tenant_dir) ||
	    (size_t)snprintf(cg->v2, sizeof(cg->v2), "%s/%s", tenant_dir, id) >= sizeof(cg->v2)) {
		snprintf(detail, dlen, "cgroup path too long");
		cg->v2[0] = '\0';
		return -ENAMETOOLONG;
	}
	err = sb_cgroup_mkdir(tenant_dir, false, detail, dlen);
	if (err) {
		cg->v2[0] = '\0';
		return err;
	}
	for (int c = 0; c < SB_CTRL__COUNT; c++)
		if ((c != SB_CTRL_IO || wants_io(lim)) && v2_enable(root, tenant_dir, ctrl_name[c]))
			cg->where[c] = SB_WHERE_V2;
	err = sb_cgroup_mkdir(cg->v2, true, detail, dlen);
	if (err) {
		cg->v2[0] = '\0';
		return err;
	}
	base = strrchr(root, '/');
	base = base ? base + 1 : root;
	for (int c = 0; c < SB_CTRL__COUNT && !err; c++) {
		if (cg->where[c] == SB_WHERE_V2 || (c == SB_CTRL_IO && !wants_io(lim)))
			continue;
		if (!looked_v1 && cgroup_v1_mounts(v1_name, SB_CTRL__COUNT, mnts))
			memset(mnts, 0, sizeof(mnts));
		looked_v1 = true; /* once, and only where a controller is not on v2 */
		err = create_v1(cg, c, mnts[c], base, tenant, id, detail, dlen);
		if (!err)
			cg->where[c] = SB_WHERE_V1;
		else if (err == 1) {
			/* not usable anywhere (IO: no limit, see docs/sandbox.md) */
			cg->where[c] = c == SB_CTRL_IO ? SB_WHERE_NONE : SB_WHERE_RLIMIT;
			err = 0;
		}
	}
	if (!err)
		err = apply_limits(cg, lim, detail, dlen);
	if (!err && cg->where[SB_CTRL_IO] != SB_WHERE_NONE)
		err = apply_io(cg, p, detail, dlen);
	if (!err && wants_io(lim) && cg->where[SB_CTRL_IO] == SB_WHERE_NONE)
		sg_warn("no io controller (v2 or v1 blkio) here: the IO limits of tenant %s "
			"are not applied",
			tenant);
	if (!err)
		err = open_join_fds(cg, detail, dlen);
	if (!err && cgroup_id_of(cg->v2, &cg->id)) {
		err = -errno;
		snprintf(detail, dlen, "cannot stat cgroup %s: %s", cg->v2, strerror(errno));
	}
	if (err)
		sb_cgroup_destroy(cg);
	return err;
}

int sb_cgroup_kill(struct sb_cgroup *cg, int timeout_ms)
{
	int err = 0, e;

	/* Every sandbox process is in the v2 cgroup: init was cloned into it
	 * and joined the v1 leaves from there, and its descendants inherit
	 * both. v2 empty is the sandbox empty, and the v1 leaves are left to
	 * sb_cgroup_destroy(), whose rmdir fails (EBUSY) on anything root
	 * moved into them alone; it kills that then. Not a pass over each
	 * hierarchy (~12 syscalls each) on the way to a cold exec's exit. */
	if (cg->v2[0]) {
		err = cgroup_kill(cg->v2, timeout_ms);
		if (!err)
			return 0;
	}
	for (int c = 0; c < SB_CTRL__COUNT; c++) {
		if (!cg->v1[c][0])
			continue;
		e = cgroup_kill(cg->v1[c], timeout_ms);
		if (!err)
			err = e;
	}
	return err;
}

int sb_cgroup_pids_backstop(struct sb_cgroup *cg, const struct sg_limits *lim)
{
	const char *pids = cg->where[SB_CTRL_PIDS] == SB_WHERE_V2 ? cg->v2 : cg->v1[SB_CTRL_PIDS];
	uint32_t headroom = lim->max_tasks / 4 > 8 ? lim->max_tasks / 4 : 8;
	char val[32], detail[256];

	if (!lim->max_tasks || cg->where[SB_CTRL_PIDS] == SB_WHERE_RLIMIT || !*pids)
		return 0;
	snprintf(val, sizeof(val), "%u", lim->max_tasks + headroom);
	return set_limit(pids, "pids.max", val, false, detail, sizeof(detail));
}

/* The highest CPU weight a cgroup can have (cpu.weight's 10000 on v2,
 * cpu.shares' 262144 on v1): among its tenant's sandboxes, the kernel
 * then gives it the CPU first whenever they contend. Its quota still
 * holds it to its own share. */
int sb_cgroup_cpu_favour(const struct sb_cgroup *cg, char *detail, size_t dlen)
{
	switch (cg->where[SB_CTRL_CPU]) {
	case SB_WHERE_V2:
		return set_limit(cg->v2, "cpu.weight", "10000", false, detail, dlen);
	case SB_WHERE_V1:
		return set_limit(cg->v1[SB_CTRL_CPU], "cpu.shares", "262144", false, detail, dlen);
	default:
		snprintf(detail, dlen, "no cpu controller for the sandbox's cgroup");
		return -EOPNOTSUPP;
	}
}

/* rmdir, retrying briefly: a cgroup stays busy for a moment while its
 * last tasks finish exiting. The runs' cgroups below it go first. */
static int remove_children(const char *path);

static int remove_dir(const char *path)
{
	remove_children(path);
	for (int i = 0; i < 200; i++) {
		if (!rmdir(path) || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			break;
		usleep(5000);
	}
	sg_error("cannot remove cgroup %s: %s", path, strerror(errno));
	return -errno;
}

/* A cgroup that should be empty already (the v1 leaves once the v2
 * cgroup is): removed at once, or, when something is still in it, killed
 * first. */
static int remove_or_kill(const char *path)
{
	int err;

	if (!rmdir(path) || errno == ENOENT)
		return 0;
	if (errno != EBUSY) {
		err = -errno;
		sg_error("cannot remove cgroup %s: %s", path, strerror(errno));
		return err;
	}
	sg_warn("cgroup %s still holds a task that is not in the sandbox's v2 cgroup: "
		"killing it",
		path);
	err = cgroup_kill(path, 2000);
	if (err) {
		sg_error("cannot empty cgroup %s: %s", path, strerror(-err));
		return err;
	}
	return remove_dir(path);
}

/* The runs' cgroups (one level below a sandbox's), emptied already. */
static int remove_children(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char sub[PATH_MAX];
	int err = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		for (int i = 0; i < 200 && rmdir(sub) && errno == EBUSY; i++)
			usleep(5000);
		if (!access(sub, F_OK) && !err)
			err = -EBUSY;
	}
	closedir(d);
	return err;
}

int sb_cgroup_destroy(struct sb_cgroup *cg)
{
	int err, e;

	sb_cgroup_close_join_fds(cg);
	err = sb_cgroup_kill(cg, 2000);
	if (err)
		sg_error("cannot empty sandbox cgroup %s: %s", cg->v2, strerror(-err));
	/* The paths stay as they were: a second call finds them gone
	 * (ENOENT is done), and clearing them would write a page per path
	 * (PATH_MAX each), each a copy-on-write fault while a cold launch's
	 * init still shares them. */
	for (int c = 0; c < SB_CTRL__COUNT; c++) {
		if (!cg->v1[c][0])
			continue;
		e = remove_or_kill(cg->v1[c]);
		if (!err)
			err = e;
	}
	if (cg->v2[0]) {
		e = remove_dir(cg->v2);
		if (!err)
			err = e;
	}
	return err;
}

/* rmdir, waiting briefly for the last tasks to leave; ENOENT is done. */
static int reclaim_dir(const char *path)
{
	int err;

	if (access(path, F_OK))
		return 0;
	err = cgroup_kill(path, 2000);
	return err ? err : remove_dir(path);
}

int sb_cgroup_reclaim(const char *root, const char *tenant, const char *id)
{
	const char *base = strrchr(root, '/') ? strrchr(root, '/') + 1 : root;
	char path[PATH_MAX], mnt[PATH_MAX];
	int err;

	snprintf(path, sizeof(path), "%s/%s/%s", root, tenant, id);
	err = reclaim_dir(path);
	for (int c = 0; c < SB_CTRL__COUNT && !err; c++) {
		if (cgroup_v1_mount(v1_name[c], mnt, sizeof(mnt)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s/%s", mnt, base, tenant, id);
		err = reclaim_dir(path);
	}
	return err;
}

/* The whole disk of a partition: io.max and blkio take disks only. */
static void whole_disk(unsigned maj, unsigned min, char *dev, size_t len)
{
	char path[128], buf[32];
	FILE *f;

	snprintf(dev, len, "%u:%u", maj, min);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/partition", maj, min);
	if (access(path, F_OK))
		return;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../dev", maj, min);
	f = fopen(path, "re");
	if (f && fgets(buf, sizeof(buf), f))
		snprintf(dev, len, "%.*s", (int)strcspn(buf, "\n"), buf);
	if (f)
		fclose(f);
}

int sb_io_devices(const struct sg_policy *p, char devs[][32], int max)
{
	int n = 0;

	for (int i = 0; i < p->n_read_only; i++) {
		struct stat st;
		char dev[32];
		bool seen = false;

		if (stat(p->read_only[i], &st) || major(st.st_dev) == 0)
			continue;
		whole_disk(major(st.st_dev), minor(st.st_dev), dev, sizeof(dev));
		for (int k = 0; k < n; k++)
			seen = seen || !strcmp(devs[k], dev);
		if (!seen && n < max)
			snprintf(devs[n++], 32, "%s", dev);
	}
	return n;
}
