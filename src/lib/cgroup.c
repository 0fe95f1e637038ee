/* cgroup helpers shared by the agent and the executor. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "cgroup.h"
#include "log.h"

/* Whether a /proc/self/mountinfo line is a mount of `fstype` with, for v1,
 * the super option `option` (the controller name); *mnt its mount point. */
static bool mount_matches(const char *line, const char *fstype, const char *option,
			  char mnt[PATH_MAX])
{
	/* id parent maj:min root mountpoint opts [optional...] - type source superopts */
	char type[64], superopts[1024], *save = NULL;
	const char *sep = strstr(line, " - ");

	if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
		return false;
	if (sscanf(sep + 3, "%63s %*s %1023s", type, superopts) != 2 || strcmp(type, fstype))
		return false;
	if (!option)
		return true;
	/* strtok_r: the HTTP server's threads look mounts up concurrently */
	for (char *tok = strtok_r(superopts, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, option))
			return true;
	return false;
}

/* Find the mounts in /proc/self/mountinfo of `n` filesystems (fstype, and
 * for v1 a super option each: the controller names) in one read of it:
 * bufs[i] is the i-th's mount point, "" when there is none. 0 or -errno
 * (-ENAMETOOLONG: a mount point longer than len). */
static int find_mounts(const char *fstype, const char *const *options, size_t n,
		       char (*bufs)[PATH_MAX], size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], mnt[PATH_MAX];
	int ret = 0;

	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++)
		bufs[i][0] = '\0';
	while (!ret && fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < n && !ret; i++) {
			if (!mount_matches(line, fstype, options ? options[i] : NULL, mnt))
				continue;
			/* The shortest mount point wins: in a pod that mounts the
			 * node's / at /host, /host/sys/fs/cgroup may be listed
			 * before /sys/fs/cgroup, the mount the pod's own paths
			 * are below. */
			if (bufs[i][0] && strlen(mnt) >= strlen(bufs[i]))
				continue;
			if ((size_t)snprintf(bufs[i], len, "%s", mnt) >= len)
				ret = -ENAMETOOLONG;
		}
	}
	fclose(f);
	return ret;
}

static int find_mount(const char *fstype, const char *option, char *buf, size_t len)
{
	char found[1][PATH_MAX];
	int ret = find_mounts(fstype, option ? &option : NULL, 1, found, sizeof(found[0]));

	if (!ret && !found[0][0])
		ret = -ENOENT;
	if (!ret && (size_t)snprintf(buf, len, "%s", found[0]) >= len)
		ret = -ENAMETOOLONG;
	return ret;
}

int cgroup2_mount(char *buf, size_t len)
{
	return find_mount("cgroup2", NULL, buf, len);
}

int cgroup_v1_mount(const char *controller, char *buf, size_t len)
{
	return find_mount("cgroup", controller, buf, len);
}

int cgroup_v1_mounts(const char *const *controllers, size_t n, char (*mnts)[PATH_MAX])
{
	return find_mounts("cgroup", controllers, n, mnts, PATH_MAX);
}

int sandguard_root(char *buf, size_t len, bool create)
{
	const char *env = getenv("SANDGUARD_CGROUP_ROOT");
	char mnt[PATH_MAX];
	int err;

	if (env && *env) {
		if ((size_t)snprintf(buf, len, "%s", env) >= len)
			return -ENAMETOOLONG;
	} else {
		err = cgroup2_mount(mnt, sizeof(mnt));
		if (err) {
			sg_error("no cgroup2 mount in /proc/self/mountinfo: %s", strerror(-err));
			return err;
		}
		if ((size_t)snprintf(buf, len, "%s/sandguard", mnt) >= len)
			return -ENAMETOOLONG;
	}
	if (create && mkdir(buf, 0755) && errno != EEXIST) {
		err = -errno;
		sg_error("cannot create cgroup %s: %s", buf, strerror(errno));
		return err;
	}
	return 0;
}

int cgroup_id_of(const char *path, uint64_t *id)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	*id = st.st_ino;
	return 0;
}

int write_file(const char *dir, const char *file, const char *value)
{
	char path[PATH_MAX];
	int fd, err = 0;
	size_t n = strlen(value);

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, value, n) != (ssize_t)n)
		err = -errno;
	close(fd);
	return err;
}

int cgroup_move(const char *path, pid_t pid)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d", pid);
	return write_file(path, "cgroup.procs", buf);
}

/* Calls fn for each pid in <path>/<file>; returns how many there were. */
static int for_each_pid(const char *path, const char *file, void (*fn)(pid_t))
{
	char p[PATH_MAX];
	FILE *f;
	int n = 0, pid;

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", path, file) >= sizeof(p))
		return -ENAMETOOLONG;
	f = fopen(p, "re");
	if (!f)
		return -errno;
	while (fscanf(f, "%d", &pid) == 1) {
		/* A task of another pid namespace reads as 0: never kill(0). */
		if (fn && pid > 0)
			fn(pid);
		n++;
	}
	fclose(f);
	return n;
}

int cgroup_count_procs(const char *path, const char *file)
{
	return for_each_pid(path, file, NULL);
}

bool cgroup_is_empty(const char *path)
{
	char p[PATH_MAX], line[128];
	bool empty = false, known = false;
	FILE *f;

	/* cgroup.events "populated 0" covers descendants too. */
	snprintf(p, sizeof(p), "%s/cgroup.events", path);
	f = fopen(p, "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "populated ", 10)) {
				known = true;
				empty = line[10] == '0';
			}
		fclose(f);
	}
	if (known)
		return empty;
	return cgroup_count_procs(path, "cgroup.procs") == 0;
}

bool cgroup_kill_supported(const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/cgroup.kill", path);
	return access(p, W_OK) == 0;
}

static void sigkill_pid(pid_t pid)
{
	kill(pid, SIGKILL);
}

/* SIGKILL every process of the cgroup and of its descendants (children of
 * a sandbox's cgroup are the sandbox). -ENOENT when the cgroup is gone. */
static int kill_tree(const char *path, int depth)
{
	char sub[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int err = for_each_pid(path, "cgroup.procs", sigkill_pid);

	if (err == -ENOENT || depth >= 16)
		return err < 0 ? err : 0;
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    (size_t)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) < sizeof(sub))
			kill_tree(sub, depth + 1);
	closedir(d);
	return 0;
}

/* An open cgroup.events (v2) says "populated 0": 1, "populated 1": 0,
 * unreadable: -1. Reading it also marks its notifications seen: a poll()
 * after it wakes on the next change only, none is lost in between. */
static int events_empty(int fd)
{
	char buf[256];
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) < 0 || (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return -1;
	buf[n] = '\0';
	for (char *line = buf; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (!strncmp(line, "populated ", 10))
			return line[10] == '0';
	return -1;
}

/* Kill (through kill_fd, the cgroup's cgroup.kill, written on every pass;
 * else, -1, SIGKILL to each task) until the cgroup is empty or gone, for
 * at most timeout_ms. ev is its cgroup.events, or -1. Both descriptors are
 * the caller's: they are never closed here. */
static int kill_until_empty(const char *path, int timeout_ms, int kill_fd, int ev)
{
	uint64_t deadline = clock_ms(CLOCK_MONOTONIC) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	int err, early = 0, empty;

	for (;;) {
		/* A fork racing a pass is caught by the next one. */
		err = kill_fd < 0                       ? kill_tree(path, 0)
		      : pwrite(kill_fd, "1", 1, 0) == 1 ? 0
							: -errno;
		if (err == -ENOENT || (err == -ENODEV && kill_fd >= 0))
			break; /* the cgroup is already gone (ENODEV: removed since opened) */
		if (err && kill_fd >= 0) {
			sg_warn("cgroup.kill on %s: %s; killing each task instead", path,
				strerror(-err));
			kill_fd = -1;
			continue;
		}
		empty = ev >= 0 ? events_empty(ev) : -1;
		if (empty == 1 || (empty < 0 && cgroup_is_empty(path))) {
			err = 0;
			break;
		}
		if (clock_ms(CLOCK_MONOTONIC) > deadline) {
			err = -ETIMEDOUT;
			break;
		}
		if (ev < 0) {
			usleep(1000);
			continue;
		}
		/* A change that was not the emptying (the freezer's "frozen"):
		 * a few are fine; more, and the file is not worth polling. */
		if (poll(&(struct pollfd){ .fd = ev, .events = POLLPRI }, 1, 1) > 0 && ++early > 8)
			ev = -1;
	}
	return err == -ENOENT || err == -ENODEV ? 0 : err;
}

/* <path>/<file>, opened; -1 when it cannot be. */
static int open_in(const char *path, const char *file, int flags)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", path, file) >= sizeof(p))
		return -1;
	return open(p, flags | O_CLOEXEC);
}

/* v2: the kernel notifies a poller of cgroup.events when "populated" flips,
 * so the wait between passes ends as soon as the last task is gone instead
 * of at the next 1 ms tick (on the way to a cold `sandguard exec`'s exit).
 * Passes still come at least every 1 ms. */
static int kill_opening_events(const char *path, int timeout_ms, int kill_fd)
{
	int ev = open_in(path, "cgroup.events", O_RDONLY), err;

	err = kill_until_empty(path, timeout_ms, kill_fd, ev);
	if (ev >= 0)
		close(ev);
	return err;
}

int cgroup_kill_held(const char *path, int kill_fd, int events_fd, int timeout_ms)
{
	if (kill_fd < 0)
		return cgroup_kill(path, timeout_ms); /* no cgroup.kill: the freezer's way */
	return kill_until_empty(path, timeout_ms, kill_fd, events_fd);
}

int cgroup_kill_by_freezing(const char *path, int timeout_ms)
{
	/* Frozen, the tasks cannot fork while they are killed one by one;
	 * a frozen task still dies of SIGKILL. Where there is no freezer (a
	 * v1 hierarchy), the passes race the forks and win in the end. */
	bool frozen = write_file(path, "cgroup.freeze", "1") == 0;
	int err = kill_opening_events(path, timeout_ms, -1);

	/* Not empty in time: it stays frozen, its tasks cannot run. */
	if (frozen && !err)
		write_file(path, "cgroup.freeze", "0");
	return err;
}

int cgroup_kill(const char *path, int timeout_ms)
{
	/* Opened once for every pass (it is on each run's path), where
	 * cgroup_kill_supported() would only look for it. */
	int fd = open_in(path, "cgroup.kill", O_WRONLY), err;

	if (fd < 0)
		return cgroup_kill_by_freezing(path, timeout_ms);
	err = kill_opening_events(path, timeout_ms, fd);
	close(fd);
	return err;
}
