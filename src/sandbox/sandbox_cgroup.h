/* A sandbox's cgroups: <root>/<tenant>/<id> on cgroup2 (the sandbox's
 * identity for the agent, and cgroup.kill), plus the same path under the v1
 * pids, memory and cpu hierarchies where those controllers are bound to v1
 * (hybrid nodes). Each limit is applied where its controller is usable:
 * v2 where <root>/cgroup.controllers offers it, else v1, else an rlimit in
 * the child as the last resort (no OOM or fork-limit attribution then).
 *
 * The v1 path mirrors the v2 root's last component: <v1 mount>/sandguard/
 * <tenant>/<id> by default, <v1 mount>/<basename $SANDGUARD_CGROUP_ROOT>/...
 * when that is set.
 *
 * The v1 controller of IO is blkio.
 *
 * pids.max is limits.max_tasks: a hard ceiling where fork() fails with
 * EAGAIN. The agent's fork rule (max_tasks live, max_forks over the
 * sandbox's life) kills and attributes on its own; with both at max_tasks
 * the cgroup guarantees the bound even with no agent running.
 *
 * Joining (docs/sandbox.md, "Starting inside the cgroup"): a process is
 * born in the v2 cgroup by clone3(CLONE_INTO_CGROUP) where the kernel has
 * it; moving a process there (a cgroup.procs write) takes the global
 * cgroup_threadgroup_rwsem for writing, which waits for an RCU grace
 * period. The v1 cgroups are joined by the new process itself writing "0"
 * to each v1 `tasks` file, which moves the calling thread alone and does
 * not take that lock.
 *
 * Each run of a sandbox gets a cgroup of its own below the sandbox's,
 * <v2>/run-<n>, with no controller of its own: the sandbox's limits hold
 * for the sandbox's init and every run, the agent judges them all as the
 * sandbox (it looks at the ancestor at the sandbox's level), and killing
 * a run's cgroup empties the run and nothing else. */
#ifndef SG_SANDBOX_CGROUP_H
#define SG_SANDBOX_CGROUP_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "policy/policy.h"

enum sb_ctrl { SB_CTRL_PIDS, SB_CTRL_MEMORY, SB_CTRL_CPU, SB_CTRL_IO, SB_CTRL__COUNT };

#define SB_IO_MAX_DEVS 8

enum sb_ctrl_where { SB_WHERE_NONE, SB_WHERE_V2, SB_WHERE_V1, SB_WHERE_RLIMIT };

/* The counter files every run reads or resets, kept open for the
 * sandbox's life (sandbox_cgroup_run.c), on v2 or v1 where their
 * controller is: memory.events (v1 memory.oom_control), memory.peak (v1
 * memory.max_usage_in_bytes), v1 memory.memsw.max_usage_in_bytes,
 * pids.events, cpu.stat. */
enum sb_stat {
	SB_STAT_MEM_EVENTS,
	SB_STAT_MEM_PEAK,
	SB_STAT_MEMSW_PEAK,
	SB_STAT_PIDS_EVENTS,
	SB_STAT_CPU_STAT,
	SB_STAT__COUNT
};

struct sb_cgroup {
	char v2[PATH_MAX];                 /* the sandbox's cgroup2 directory */
	char v1[SB_CTRL__COUNT][PATH_MAX]; /* "" where not used */
	enum sb_ctrl_where where[SB_CTRL__COUNT];
	int dir_fd;                   /* the v2 directory: clone3(CLONE_INTO_CGROUP); -1 */
	int procs_fd;                 /* its cgroup.procs, to join by migration; -1 */
	int tasks_fd[SB_CTRL__COUNT]; /* v1 `tasks` files the new process joins; -1 */
	int stat_fd[SB_STAT__COUNT];  /* enum sb_stat's files; -1 where there is none */
	uint64_t id;                  /* cgroup2 id */
	char root[PATH_MAX];          /* the sandguard cgroup2 root it is under */
};

/* One run's cgroup, <v2>/run-<n>. */
struct sb_leaf {
	char path[PATH_MAX]; /* "" when none */
	int dir_fd;          /* for clone3(CLONE_INTO_CGROUP); -1 */
	int procs_fd;        /* its cgroup.procs, where clone3 cannot place a process; -1 */
	/* Opened with the leaf (relative to dir_fd), read or written at
	 * every run's end: no walk of the path each time. -1 where the
	 * kernel has no such file (cgroup.kill before 5.14). */
	int cpu_stat_fd, kill_fd, events_fd;
};

/* A leaf with no descriptor yet (all -1); its descriptors closed (the
 * directory stays). */
void sb_cgroup_leaf_init(struct sb_leaf *leaf);
void sb_cgroup_leaf_close(struct sb_leaf *leaf);

/* The sandbox's peak memory over one run. A run's own cgroup has no
 * memory controller, so it is the sandbox's cgroup2 memory.peak, opened
 * at the run's start and reset for this descriptor (a write resets the
 * peak seen through it, Linux 6.12+); on an older kernel it stays the
 * sandbox's peak since it was made, an upper bound for a warm sandbox's
 * later runs. On a hybrid node, the v1 memory.max_usage_in_bytes, reset
 * likewise. The sandbox's init is in it too (a few hundred KiB). -1
 * where no memory controller is used. */
int sb_cgroup_mem_peak_open(const struct sb_cgroup *cg);
/* Read it (and close fd). true with *bytes set, else false. */
bool sb_cgroup_mem_peak_close(int fd, uint64_t *bytes);

/* Create the cgroups and apply the limits: pids, memory, cpu, and the IO
 * limits (io.max on v2, blkio throttling on v1, on the block devices of
 * the policy's read-only paths; only when the policy sets one). Returns 0
 * or -errno with `detail` filled in; on error nothing is left behind. */
int sb_cgroup_create(struct sb_cgroup *cg, const char *tenant, const char *id,
		     const struct sg_policy *p, char *detail, size_t dlen);

/* Every descriptor of cg marked as none (-1): what a sandbox's cgroup
 * holds before sb_cgroup_create(), so that a sandbox that fails before it
 * closes nothing of anyone else's (a zeroed one would close fd 0). */
void sb_cgroup_no_fds(struct sb_cgroup *cg);

/* Open the counter files (enum sb_stat) once the cgroups are made; a
 * missing one reads as 0. The sandbox opens them after
 * sb_cgroup_create() and closes them before sb_cgroup_destroy(). */
void sb_cgroup_stat_open(struct sb_cgroup *cg);
void sb_cgroup_stat_close(struct sb_cgroup *cg);

/* Shared by sandbox_cgroup*.c: mkdir (exclusive: EEXIST is an error) and
 * open of dir/file (file NULL: dir itself), close-on-exec; 0 or -errno
 * with `detail`. */
int sb_cgroup_mkdir(const char *path, bool exclusive, char *detail, size_t dlen);
int sb_cgroup_open(const char *dir, const char *file, int flags, int *fd, char *detail,
		   size_t dlen);

/* The sandguard cgroup2 root new sandboxes go under (for the in-flight
 * record). 0 or -errno. */
int sb_cgroup_root(char *buf, size_t len);

/* What a dead executor left of sandbox <root>/<tenant>/<id>: empty and
 * remove it, and its v1 mirrors. 0 when none of it is left. */
int sb_cgroup_reclaim(const char *root, const char *tenant, const char *id);

/* The whole-disk block devices ("MAJ:MIN") behind the policy's read-only
 * paths; virtual filesystems (major 0) have none. Returns how many. */
int sb_io_devices(const struct sg_policy *p, char devs[][32], int max);

/* Whether clone3() is there to start a process inside a cgroup
 * (CLONE_INTO_CGROUP, Linux 5.7); probed once. */
bool sb_clone3_works(void);

/* clone(flags | SIGCHLD) with the caller's stack copied, like fork(),
 * inside the cgroup open at cgroup_fd (-1: the caller's). Only where
 * sb_clone3_works(). Async-signal-safe; returns what fork() returns. */
pid_t sb_clone_into(unsigned long flags, int cgroup_fd);

/* Child side, before anything else: join the v2 cgroup by migration when
 * `migrate` (it was not born there), then the v1 cgroups. Only
 * async-signal-safe calls; 0 or -errno. */
int sb_cgroup_join_self(const struct sb_cgroup *cg, bool migrate);

/* Parent side once the sandbox's init runs: the join files are its
 * business (the v2 directory fd is kept for the leaves). */
void sb_cgroup_close_join_fds(struct sb_cgroup *cg);

/* Make run n's cgroup below the sandbox's and open it. 0 or -errno with
 * `detail` set. */
int sb_cgroup_leaf_make(const struct sb_cgroup *cg, unsigned n, struct sb_leaf *leaf, char *detail,
			size_t dlen);

/* Kill what is in a run's cgroup and remove it (waits, bounded, for it to
 * empty). 0 when it is gone; -errno when it could not be emptied. */
int sb_cgroup_leaf_remove(struct sb_leaf *leaf, int timeout_ms);

/* Kill what is in a run's cgroup, without waiting. */
void sb_cgroup_leaf_kill(const struct sb_leaf *leaf);

/* Kill what is in a run's cgroup and wait, at most timeout_ms, until it is
 * empty (cgroup_kill() through the leaf's open files). 0 when empty. */
int sb_cgroup_leaf_settle(const struct sb_leaf *leaf, int timeout_ms);

/* Kill every process in the sandbox and wait until it is empty. */
int sb_cgroup_kill(struct sb_cgroup *cg, int timeout_ms);

/* With the agent enforcing max_tasks, pids.max becomes a backstop a little
 * above it (max_tasks + max(8, max_tasks / 4)). */
int sb_cgroup_pids_backstop(struct sb_cgroup *cg, const struct sg_limits *lim);

/* The memory controller's OOM kill count, by any OOM killer (the
 * sandbox's own limit, an ancestor's, the node's); 0 when unknown. */
uint64_t sb_cgroup_oom_kills(const struct sb_cgroup *cg);

/* Whether the sandbox reached its own memory limit (v2: its memory.events
 * oom count past `oom_base`, the count before the run; v1: its usage's
 * high-water mark at the limit). An OOM kill without it was another
 * cgroup's limit or the node's, never this sandbox's contract. */
bool sb_cgroup_mem_limit_reached(const struct sb_cgroup *cg, uint64_t oom_base);

/* Before a reused sandbox's next run: the v2 oom count to pass to
 * sb_cgroup_mem_limit_reached(); v1's high-water marks start again. */
uint64_t sb_cgroup_mem_limit_mark(const struct sb_cgroup *cg);

/* How often a fork was refused at pids.max; 0 when unknown. */
uint64_t sb_cgroup_pids_max_hits(const struct sb_cgroup *cg);

/* The time the sandbox's CPU quota held its tasks back (cpu.stat
 * throttled_usec on v2, throttled_time on v1), in us; 0 without a quota.
 * It grows over the sandbox's life: callers take differences. */
uint64_t sb_cgroup_cpu_throttled_us(const struct sb_cgroup *cg);

/* Give the sandbox the highest CPU weight (a timeout's confirmation run,
 * src/exec/exec_confirm.c). 0, or -errno with `detail`. */
int sb_cgroup_cpu_favour(const struct sb_cgroup *cg, char *detail, size_t dlen);

/* The processes directly in the sandbox's v2 cgroup (not in a run's):
 * how many, and the first of them in *pid. -errno when unreadable. */
int sb_cgroup_own_procs(const struct sb_cgroup *cg, pid_t *pid);

/* Kill what is left and remove every directory, the runs' first. 0 or
 * -errno (logged). */
int sb_cgroup_destroy(struct sb_cgroup *cg);

#endif
