/* Each run's cgroup: starting inside the cgroups (clone3
 * CLONE_INTO_CGROUP, the v1 `tasks` join), the run's own cgroup below the
 * sandbox's, and the sandbox's counters a run's end reads (see
 * src/sandbox/sandbox_cgroup.h). The counter files read or reset at every
 * run are opened once, when the sandbox's cgroups are made, and read again
 * with pread() at offset 0 (a cgroup file is generated afresh for each
 * read from its start). A run then opens none of them: each open is a
 * path walk and a descriptor, on every test's path
 * (docs/performance-executor-cost.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "lib/cgroup.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_cgroup.h"

bool sb_clone3_works(void)
{
	static int works = -1;

	/* A size below the first version's: EINVAL where clone3 exists. */
	if (works < 0)
		works = syscall(SYS_clone3, NULL, 0) < 0 && errno == EINVAL;
	return works;
}

pid_t sb_clone_into(unsigned long flags, int cgroup_fd)
{
	struct clone_args args = { .flags = flags, .exit_signal = SIGCHLD };

	if (cgroup_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup_fd;
	}
	/* No stack: the child runs on a copy of ours, like fork(). */
	return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

int sb_cgroup_join_self(const struct sb_cgroup *cg, bool migrate)
{
	/* "0" is the writer: the process in cgroup.procs, the calling
	 * thread in `tasks` (the process has no other thread yet). */
	if (migrate && write(cg->procs_fd, "0", 1) != 1)
		return -errno;
	for (int c = 0; c < SB_CTRL__COUNT; c++)
		if (cg->tasks_fd[c] >= 0 && write(cg->tasks_fd[c], "0", 1) != 1)
			return -errno;
	return 0;
}

void sb_cgroup_leaf_init(struct sb_leaf *leaf)
{
	leaf->dir_fd = leaf->procs_fd = leaf->cpu_stat_fd = leaf->kill_fd = leaf->events_fd = -1;
}

void sb_cgroup_leaf_close(struct sb_leaf *leaf)
{
	fs_close(&leaf->dir_fd);
	fs_close(&leaf->procs_fd);
	fs_close(&leaf->cpu_stat_fd);
	fs_close(&leaf->kill_fd);
	fs_close(&leaf->events_fd);
}

/* The files every run's end reads or writes (sandbox_exec.c,
 * sandbox_outcome.c), opened once through the leaf's directory. Each is
 * optional: without one, the caller goes by the path as before. */
static void leaf_open_files(struct sb_leaf *leaf)
{
	leaf->cpu_stat_fd = openat(leaf->dir_fd, "cpu.stat", O_RDONLY | O_CLOEXEC);
	leaf->kill_fd = openat(leaf->dir_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
	leaf->events_fd = openat(leaf->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
}

int sb_cgroup_leaf_make(const struct sb_cgroup *cg, unsigned n, struct sb_leaf *leaf, char *detail,
			size_t dlen)
{
	int err;

	sb_cgroup_leaf_init(leaf);
	if ((size_t)snprintf(leaf->path, sizeof(leaf->path), "%s/run-%u", cg->v2, n) >=
	    sizeof(leaf->path)) {
		leaf->path[0] = '\0';
		snprintf(detail, dlen, "cgroup path too long");
		return -ENAMETOOLONG;
	}
	err = sb_cgroup_mkdir(leaf->path, true, detail, dlen);
	if (!err) {
		err = sb_cgroup_open(leaf->path, NULL, O_RDONLY | O_DIRECTORY, &leaf->dir_fd,
				     detail, dlen);
		if (!err && !sb_clone3_works())
			err = sb_cgroup_open(leaf->path, "cgroup.procs", O_WRONLY, &leaf->procs_fd,
					     detail, dlen);
		if (!err)
			leaf_open_files(leaf);
		if (err)
			sb_cgroup_leaf_remove(leaf, 0);
	}
	if (err)
		leaf->path[0] = '\0';
	return err;
}

void sb_cgroup_leaf_kill(const struct sb_leaf *leaf)
{
	if (!leaf->path[0])
		return;
	if (leaf->kill_fd >= 0)
		(void)!pwrite(leaf->kill_fd, "1", 1, 0); /* gone already: nothing to kill */
	else
		cgroup_kill(leaf->path, 0); /* no cgroup.kill: the freezer's way */
}

int sb_cgroup_leaf_settle(const struct sb_leaf *leaf, int timeout_ms)
{
	if (!leaf->path[0])
		return -ENOENT;
	return cgroup_kill_held(leaf->path, leaf->kill_fd, leaf->events_fd, timeout_ms);
}

int sb_cgroup_leaf_remove(struct sb_leaf *leaf, int timeout_ms)
{
	int err = 0;

	sb_cgroup_leaf_close(leaf);
	if (!leaf->path[0])
		return 0;
	/* Removed at once when it is empty, as it mostly is by now (the
	 * run's end killed it and waited): the kernel refuses to remove a
	 * cgroup with a task in it (EBUSY), and only then is it killed. This
	 * spares two opens and their passes on every test's path. */
	if (rmdir(leaf->path) && errno != ENOENT) {
		err = errno == EBUSY ? cgroup_kill(leaf->path, timeout_ms) : -errno;
		if (!err && rmdir(leaf->path) && errno != ENOENT)
			err = -errno;
	}
	if (!err)
		leaf->path[0] = '\0';
	return err;
}

int sb_cgroup_own_procs(const struct sb_cgroup *cg, pid_t *pid)
{
	char path[PATH_MAX], buf[4096], *p = buf, *end;
	int n = 0, fd;
	ssize_t len;
	long v;

	/* One read() (not stdio's fstat and buffer): a sandbox put back has
	 * its init alone in it, one short line. More pids than fit are
	 * counted as many as fit, which is still "more than one". */
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg->v2);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return -errno;
	buf[len] = '\0';
	for (;;) {
		v = strtol(p, &end, 10);
		if (end == p)
			break;
		if (n++ == 0)
			*pid = (pid_t)v;
		p = end;
	}
	return n;
}

/* A memory cgroup charges in batches of up to 64 pages: its usage can stop
 * short of its limit by that much when a charge fails. */
#define CHARGE_SLACK (64 * (uint64_t)sysconf(_SC_PAGESIZE))

/* Where each kept file is, by where its controller is used. */
struct stat_file {
	enum sb_ctrl ctrl;
	const char *v2, *v1; /* NULL: none there */
	int flags;
};

static const struct stat_file stat_files[SB_STAT__COUNT] = {
	[SB_STAT_MEM_EVENTS] = { SB_CTRL_MEMORY, "memory.events", "memory.oom_control", O_RDONLY },
	[SB_STAT_MEM_PEAK] = { SB_CTRL_MEMORY, "memory.peak", "memory.max_usage_in_bytes", O_RDWR },
	[SB_STAT_MEMSW_PEAK] = { SB_CTRL_MEMORY, NULL, "memory.memsw.max_usage_in_bytes", O_RDWR },
	[SB_STAT_PIDS_EVENTS] = { SB_CTRL_PIDS, "pids.events", "pids.events", O_RDONLY },
	[SB_STAT_CPU_STAT] = { SB_CTRL_CPU, "cpu.stat", "cpu.stat", O_RDONLY },
};

void sb_cgroup_stat_open(struct sb_cgroup *cg)
{
	char path[PATH_MAX];

	for (int i = 0; i < SB_STAT__COUNT; i++) {
		const struct stat_file *f = &stat_files[i];
		enum sb_ctrl_where where = cg->where[f->ctrl];
		const char *dir = where == SB_WHERE_V2 ? cg->v2 : cg->v1[f->ctrl];
		const char *file = where == SB_WHERE_V2 ? f->v2 : f->v1;

		cg->stat_fd[i] = -1;
		if ((where != SB_WHERE_V2 && where != SB_WHERE_V1) || !file ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
			continue;
		/* Missing (a kernel without the counter): read as 0, as before. */
		cg->stat_fd[i] = open(path, f->flags | O_CLOEXEC);
	}
}

void sb_cgroup_stat_close(struct sb_cgroup *cg)
{
	for (int i = 0; i < SB_STAT__COUNT; i++)
		fs_close(&cg->stat_fd[i]);
}

/* A counter of a kept flat-keyed file; 0 when the file or the key is
 * missing (a kernel without that counter). */
static uint64_t kept_keyed(const struct sb_cgroup *cg, enum sb_stat i, const char *key)
{
	uint64_t v;

	return cg->stat_fd[i] >= 0 && fs_pread_keyed(cg->stat_fd[i], key, &v) == 1 ? v : 0;
}

/* A cgroup v1 file that holds one counter, such as memory.failcnt, read
 * through fd (pread) or opened by path (fd -1); 0 when it is missing or
 * unreadable. */
static uint64_t read_counter(int fd, const char *dir, const char *file)
{
	char path[PATH_MAX], buf[32];
	int own = -1;
	ssize_t n;

	if (fd < 0) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
			return 0;
		fd = own = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 0;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (own >= 0)
		close(own);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

uint64_t sb_cgroup_oom_kills(const struct sb_cgroup *cg)
{
	return kept_keyed(cg, SB_STAT_MEM_EVENTS, "oom_kill");
}

uint64_t sb_cgroup_mem_limit_mark(const struct sb_cgroup *cg)
{
	switch (cg->where[SB_CTRL_MEMORY]) {
	case SB_WHERE_V2:
		return kept_keyed(cg, SB_STAT_MEM_EVENTS, "oom");
	case SB_WHERE_V1: /* the high-water marks start again from the usage */
		for (int i = SB_STAT_MEM_PEAK; i <= SB_STAT_MEMSW_PEAK; i++)
			if (cg->stat_fd[i] >= 0 && pwrite(cg->stat_fd[i], "0", 1, 0) != 1)
				sg_debug("sandbox %s: %s not reset: %s", cg->v1[SB_CTRL_MEMORY],
					 stat_files[i].v1, strerror(errno));
		return 0;
	default:
		return 0;
	}
}

bool sb_cgroup_mem_limit_reached(const struct sb_cgroup *cg, uint64_t oom_base)
{
	const char *mem = cg->v1[SB_CTRL_MEMORY];
	uint64_t limit, peak, peak_sw;

	switch (cg->where[SB_CTRL_MEMORY]) {
	case SB_WHERE_V2: /* the limit reached and an allocation about to fail */
		return kept_keyed(cg, SB_STAT_MEM_EVENTS, "oom") > oom_base;
	case SB_WHERE_V1:
		/* v1 keeps no such event (and its failcnt stays 0 on recent
		 * kernels): the usage's high-water mark at the limit, or
		 * memory + swap's at its own (the same value, charged first
		 * where swap is accounted), within one charge batch. */
		limit = read_counter(-1, mem, "memory.limit_in_bytes");
		peak = read_counter(cg->stat_fd[SB_STAT_MEM_PEAK], mem,
				    "memory.max_usage_in_bytes");
		peak_sw = read_counter(cg->stat_fd[SB_STAT_MEMSW_PEAK], mem,
				       "memory.memsw.max_usage_in_bytes");
		return limit && (peak >= limit - CHARGE_SLACK || peak_sw >= limit - CHARGE_SLACK);
	default:
		return true; /* no memory controller: nothing to tell them apart */
	}
}

uint64_t sb_cgroup_cpu_throttled_us(const struct sb_cgroup *cg)
{
	switch (cg->where[SB_CTRL_CPU]) {
	case SB_WHERE_V2:
		return kept_keyed(cg, SB_STAT_CPU_STAT, "throttled_usec");
	case SB_WHERE_V1: /* nanoseconds there */
		return kept_keyed(cg, SB_STAT_CPU_STAT, "throttled_time") / 1000;
	default:
		return 0;
	}
}

uint64_t sb_cgroup_pids_max_hits(const struct sb_cgroup *cg)
{
	return kept_keyed(cg, SB_STAT_PIDS_EVENTS, "max");
}

int sb_cgroup_mem_peak_open(const struct sb_cgroup *cg)
{
	bool v2 = cg->where[SB_CTRL_MEMORY] == SB_WHERE_V2;
	int fd;

	if (cg->stat_fd[SB_STAT_MEM_PEAK] < 0)
		return -1;
	/* A copy of the kept one, for the caller to close: the same open
	 * file, so on v2 the reset below is the kept file's. */
	fd = fcntl(cg->stat_fd[SB_STAT_MEM_PEAK], F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* v1: writing 0 resets the sandbox's maximum (this executor is the
	 * only one that reads it). v2: an older kernel refuses the write, and
	 * the peak since the sandbox began stands. */
	if ((v2 ? write(fd, "reset\n", 6) : write(fd, "0\n", 2)) < 0)
		sg_debug("sandbox %s: no per-run reset of its memory peak (%s): the sandbox's "
			 "peak stands",
			 v2 ? cg->v2 : cg->v1[SB_CTRL_MEMORY], strerror(errno));
	return fd;
}

bool sb_cgroup_mem_peak_close(int fd, uint64_t *bytes)
{
	char buf[32];
	ssize_t n;

	if (fd < 0)
		return false;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return sscanf(buf, "%" SCNu64, bytes) == 1;
}
