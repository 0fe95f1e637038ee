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
#include <pthread.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "cgroup.h"
#include "log.h"

/* The cgroup mounts, read from /proc/self/mountinfo once and kept. A node's
 * cgroup hierarchies are mounted at its boot, while the table grows with
 * every live sandbox's scratch tmpfs (a line each): a read per sandbox (two
 * in serve: the root and the v1 controllers) parsed every line with sscanf,
 * a cost that grew with the sandboxes at once (about a fifth of serve's CPU
 * per /run_code request with 60-180 of them, docs/performance.md). A kept
 * mount point is checked each time it is given out (statx(): still the
 * mount read, by its id; before 5.8, statfs(): still a cgroup filesystem
 * of its kind); one that is not reads the table again, and so does a miss,
 * at most once a second (a mount made since). The table grows as needed.
 * Under `lock`: serve's threads create sandboxes concurrently. */
#define CG_MISS_REREAD_MS 1000

struct cg_mount {
	bool v2;
	uint64_t id; /* mountinfo's first field, statx()'s stx_mnt_id */
	char *point;
	char *superopts; /* v1: the controllers, "rw,cpu,cpuacct" */
};

static struct {
	pthread_mutex_t lock;
	struct cg_mount *m;
	size_t n, cap;
	bool read;
	uint64_t read_ms;
} mounts = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void mounts_clear(void)
{
	for (size_t i = 0; i < mounts.n; i++) {
		free(mounts.m[i].point);
		free(mounts.m[i].superopts);
	}
	mounts.n = 0;
	mounts.read = false;
}

/* One line: "id parent maj:min root mountpoint opts [optional...] - type
 * source superopts". 0 (kept, or not a cgroup mount) or -ENOMEM. */
static int mounts_add(char *line)
{
	char *sep = strstr(line, " - "), *save = NULL, *f, *point = NULL, *type, *superopts;
	struct cg_mount *m;
	uint64_t id;

	if (!sep)
		return 0;
	*sep = '\0';
	f = strtok_r(line, " ", &save);
	id = f ? strtoull(f, NULL, 10) : 0;
	for (int i = 0; f && i < 4; i++)
		point = f = strtok_r(NULL, " ", &save);
	type = strtok_r(sep + 3, " \n", &save);
	superopts = type ? strtok_r(NULL, " \n", &save) : NULL; /* the source */
	superopts = superopts ? strtok_r(NULL, " \n", &save) : NULL;
	if (!point || !type || !superopts || (strcmp(type, "cgroup") && strcmp(type, "cgroup2")))
		return 0;
	if (mounts.n == mounts.cap) {
		size_t cap = mounts.cap ? 2 * mounts.cap : 16;
		struct cg_mount *grown = realloc(mounts.m, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		mounts.m = grown;
		mounts.cap = cap;
	}
	m = &mounts.m[mounts.n];
	m->v2 = !strcmp(type, "cgroup2");
	m->id = id;
	m->point = strdup(point);
	m->superopts = strdup(superopts);
	if (!m->point || !m->superopts) {
		free(m->point);
		free(m->superopts);
		return -ENOMEM;
	}
	mounts.n++;
	return 0;
}

static int mounts_read(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int err = 0;

	mounts_clear();
	if (!f)
		return -errno;
	while (!err && getline(&line, &cap, f) > 0)
		err = mounts_add(line);
	free(line);
	fclose(f);
	mounts.read = !err;
	mounts.read_ms = clock_ms(CLOCK_MONOTONIC);
	if (err)
		mounts_clear();
	return err;
}

static bool has_option(const char *superopts, const char *option)
{
	size_t n = strlen(option);

	for (const char *p = superopts; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, option, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/* The mount of the v2 hierarchy, or of the v1 controller `option` (NULL:
 * none). The shortest mount point wins: in a pod that mounts the node's /
 * at /host, /host/sys/fs/cgroup may be listed before /sys/fs/cgroup, the
 * mount the pod's own paths are below. */
static const struct cg_mount *mounts_best(bool v2, const char *option)
{
	const struct cg_mount *best = NULL;

	if (!v2 && !option)
		return NULL;
	for (size_t i = 0; i < mounts.n; i++) {
		const struct cg_mount *m = &mounts.m[i];

		if (m->v2 != v2 || (!v2 && !has_option(m->superopts, option)))
			continue;
		if (!best || strlen(m->point) < strlen(best->point))
			best = m;
	}
	return best;
}

/* The very mount read: its mount id where the kernel reports one (5.8+),
 * else at least a cgroup filesystem of its kind at that path. */
static bool still_mounted(const struct cg_mount *m)
{
	struct statfs sf;
	struct statx sx;

	if (!statx(AT_FDCWD, m->point, 0, STATX_MNT_ID, &sx) && (sx.stx_mask & STATX_MNT_ID))
		return sx.stx_mnt_id == m->id;
	return !statfs(m->point, &sf) &&
	       sf.f_type == (typeof(sf.f_type))(m->v2 ? CGROUP2_SUPER_MAGIC : CGROUP_SUPER_MAGIC);
}

/* Whether the kept table answers for `options` (v2: the hierarchy). */
static bool mounts_fresh(bool v2, const char *const *options, size_t n)
{
	bool miss_reread = clock_ms(CLOCK_MONOTONIC) - mounts.read_ms >= CG_MISS_REREAD_MS;

	if (!mounts.read)
		return false;
	for (size_t i = 0; i < n; i++) {
		const struct cg_mount *m = mounts_best(v2, v2 ? NULL : options[i]);

		if (m ? !still_mounted(m) : (v2 || options[i]) && miss_reread)
			return false;
	}
	return true;
}

/* bufs[i]: the mount point of the v2 hierarchy (v2, n 1) or of the v1
 * controller options[i], "" when there is none (or its name is NULL). 0 or
 * -errno (-ENAMETOOLONG: a mount point longer than len). */
static int find_mounts(bool v2, const char *const *options, size_t n, char (*bufs)[PATH_MAX],
		       size_t len)
{
	int ret = 0;

	pthread_mutex_lock(&mounts.lock);
	if (!mounts_fresh(v2, options, n))
		ret = mounts_read();
	for (size_t i = 0; i < n; i++) {
		const struct cg_mount *m = ret ? NULL : mounts_best(v2, v2 ? NULL : options[i]);

		bufs[i][0] = '\0';
		if (m && (size_t)snprintf(bufs[i], len, "%s", m->point) >= len)
			ret = -ENAMETOOLONG;
	}
	pthread_mutex_unlock(&mounts.lock);
	return ret;
}

static int find_mount(bool v2, const char *option, char *buf, size_t len)
{
	char found[1][PATH_MAX];
	int ret = find_mounts(v2, &option, 1, found, sizeof(found[0]));

	if (!ret && !found[0][0])
		ret = -ENOENT;
	if (!ret && (size_t)snprintf(buf, len, "%s", found[0]) >= len)
		ret = -ENAMETOOLONG;
	return ret;
}

int cgroup2_mount(char *buf, size_t len)
{
	return find_mount(true, NULL, buf, len);
}

int cgroup_v1_mount(const char *controller, char *buf, size_t len)
{
	return find_mount(false, controller, buf, len);
}

int cgroup_v1_mounts(const char *const *controllers, size_t n, char (*mnts)[PATH_MAX])
{
	return find_mounts(false, controllers, n, mnts, PATH_MAX);
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
