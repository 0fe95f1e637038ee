/* cgroup helpers shared by the agent and the executor. The cgroup2 mount is
 * found in /proc/self/mountinfo (/sys/fs/cgroup on pure-v2 nodes,
 * /sys/fs/cgroup/unified on hybrid ones), never assumed. The table is read
 * once per process and kept; a kept mount point that is no longer the mount
 * read, or a miss (at most once a second), reads it again. Thread-safe. */
#ifndef SG_CGROUP_H
#define SG_CGROUP_H
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where the cgroup2 hierarchy (or a v1 controller) is mounted. */
int cgroup2_mount(char *buf, size_t len);
int cgroup_v1_mount(const char *controller, char *buf, size_t len);
/* The v1 mounts of `n` controllers in one read of the mount table:
 * mnts[i] is controllers[i]'s, "" when it has none (or its name is NULL). */
int cgroup_v1_mounts(const char *const *controllers, size_t n, char (*mnts)[PATH_MAX]);

/* The sandguard root: $SANDGUARD_CGROUP_ROOT if set, else <cgroup2>/sandguard.
 * Created (0755) if `create`. */
int sandguard_root(char *buf, size_t len, bool create);

/* cgroup id of a cgroup2 directory (its inode number). */
int cgroup_id_of(const char *path, uint64_t *id);

/* Empty a cgroup: cgroup.kill where the kernel has it, else
 * cgroup_kill_by_freezing(). Waits (bounded by timeout_ms) until no
 * process is left. Returns 0 when empty, -ETIMEDOUT, or -errno. */
int cgroup_kill(const char *path, int timeout_ms);
/* The kill without cgroup.kill (kernels before 5.14): freeze the cgroup,
 * SIGKILL each task of it and of its descendants until it is empty, thaw.
 * cgroup_kill() uses it where cgroup.kill is missing. */
int cgroup_kill_by_freezing(const char *path, int timeout_ms);
/* cgroup_kill() through the caller's open cgroup.kill and cgroup.events
 * (either may be -1; with no cgroup.kill, cgroup_kill() by path): a
 * cgroup killed again and again (a run's, at each run's end) spares the
 * opens. The descriptors stay open. */
int cgroup_kill_held(const char *path, int kill_fd, int events_fd, int timeout_ms);
bool cgroup_kill_supported(const char *path);
bool cgroup_is_empty(const char *path);
int cgroup_count_procs(const char *path, const char *file /* "cgroup.procs" or "cgroup.threads" */);
int cgroup_move(const char *path, pid_t pid);

/* Write a string to <dir>/<file>. */
int write_file(const char *dir, const char *file, const char *value);

#endif
