/* Paused tenants and the per-tenant concurrency cap (see tenant_state.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/ticket_queue.h"
#include "policy/policy.h"
#include "tenant_state.h"

int tenant_state_dir(char *buf, size_t len)
{
	return fs_env_dir("SANDGUARD_STATE_DIR", SG_STATE_DIR_DEFAULT, buf, len);
}

int tenant_run_dir(char *buf, size_t len)
{
	return fs_run_dir(buf, len);
}

/* <state>/paused, and <state>/paused/<tenant> when tenant is non-NULL. */
static int paused_path(const char *tenant, char *buf, size_t len)
{
	char state[PATH_MAX];
	int ret = tenant_state_dir(state, sizeof(state));

	if (ret)
		return ret;
	if (tenant && !tenant_name_valid(tenant))
		return -EINVAL;
	if ((size_t)snprintf(buf, len, "%s/paused%s%s", state, tenant ? "/" : "",
			     tenant ? tenant : "") >= len)
		return -ENAMETOOLONG;
	return 0;
}

int tenant_pause(const char *tenant, const char *reason)
{
	char dir[PATH_MAX], path[PATH_MAX], when[32];
	time_t now = time(NULL);
	struct tm tm;
	json_t *doc;
	char *text;
	int ret;

	if ((ret = paused_path(NULL, dir, sizeof(dir))) ||
	    (ret = paused_path(tenant, path, sizeof(path))))
		return ret;
	if ((ret = fs_mkdir_p(dir, 0755)))
		return ret;
	if (!access(path, F_OK))
		return 0; /* already paused: keep the first reason */
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	doc = json_pack("{s:s, s:s, s:s}", "tenant", tenant, "paused_at", when, "reason",
			reason ? reason : "");
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text)
		return -ENOMEM;
	ret = fs_write_atomic(path, text, strlen(text), 0644);
	free(text);
	return ret;
}

int tenant_resume(const char *tenant)
{
	char path[PATH_MAX];
	int ret = paused_path(tenant, path, sizeof(path));

	if (ret)
		return ret;
	return unlink(path) ? -errno : 0;
}

static int read_info(const char *path, char *info, size_t info_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (info && info_len) {
		n = read(fd, info, info_len - 1);
		info[n > 0 ? n : 0] = '\0';
	}
	close(fd);
	return 0;
}

int tenant_paused(const char *tenant, char *info, size_t info_len)
{
	char path[PATH_MAX];
	int ret = paused_path(tenant, path, sizeof(path));

	if (ret)
		return ret;
	ret = read_info(path, info, info_len);
	if (ret == -ENOENT)
		return 0;
	return ret ? ret : 1;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int tenant_list_paused(int (*fn)(const char *tenant, const char *info, void *arg), void *arg)
{
	char dir[PATH_MAX], path[PATH_MAX], info[1024];
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int ret = paused_path(NULL, dir, sizeof(dir));

	if (ret)
		return ret;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	/* Only valid tenant names: skips "." and "..", and fs_write_atomic's
	 * temporary files (their names hold dots). */
	while ((de = readdir(d))) {
		if (!tenant_name_valid(de->d_name))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));
			if (!nn) {
				ret = -ENOMEM;
				goto out;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			ret = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (n) /* qsort() must not be given NULL, not even for 0 elements */
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n && !ret; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (read_info(path, info, sizeof(info)))
			continue; /* resumed meanwhile */
		ret = fn(names[i], info, arg);
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return ret;
}

struct slot_pass {
	const char *dir;
	uint32_t cap;
	struct tenant_slot *slot;
};

/* The slots this process holds, by slots directory: a pass skips them
 * without opening their files, as each is flock'd by a descriptor of ours
 * (a try would only fail). Before, a pass opened, tried and closed every
 * slot below the first free one, under the line's lock: three system calls
 * per slot serve holds, 1.5 µs each, for each admission of the tenant. A
 * fork starts with none: its parent's slots are not its to skip (it may
 * close the descriptors it inherited). */
struct own_slots {
	char *dir;
	uint8_t *held; /* by index */
	uint32_t len;
	struct own_slots *next;
};

static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct own_slots *own;
static pid_t own_pid;

/* The dir's entry, made if `make`. Under own_lock. */
static struct own_slots *own_of(const char *dir, bool make)
{
	struct own_slots *o;

	if (own_pid != getpid()) { /* a fork: forget (and leak) the parent's */
		own = NULL;
		own_pid = getpid();
	}
	for (o = own; o; o = o->next)
		if (!strcmp(o->dir, dir))
			return o;
	if (!make || !(o = calloc(1, sizeof(*o))) || !(o->dir = strdup(dir))) {
		free(o);
		return NULL;
	}
	o->next = own;
	own = o;
	return o;
}

/* Which of dir's first `cap` slots are ours, in one look. */
static void own_snapshot(const char *dir, uint32_t cap, uint64_t *bits)
{
	struct own_slots *o;

	memset(bits, 0, (cap + 63) / 64 * sizeof(*bits));
	pthread_mutex_lock(&own_lock);
	o = own_of(dir, false);
	for (uint32_t i = 0; o && i < cap && i < o->len; i++)
		if (o->held[i])
			bits[i / 64] |= 1ULL << (i % 64);
	pthread_mutex_unlock(&own_lock);
}

/* Notes slot i of dir's as held; the entry, for its release to unnote
 * (whatever the run directory's name is by then). Unnoted (out of memory),
 * the slot is only tried again, as before. */
static struct own_slots *own_note(const char *dir, uint32_t i)
{
	struct own_slots *o;

	pthread_mutex_lock(&own_lock);
	o = own_of(dir, true);
	if (o && i >= o->len) {
		uint32_t len = i < 32 ? 64 : 2 * i;
		uint8_t *h = realloc(o->held, len);

		if (h) {
			memset(h + o->len, 0, len - o->len);
			o->held = h;
			o->len = len;
		}
	}
	if (o && i < o->len)
		o->held[i] = 1;
	pthread_mutex_unlock(&own_lock);
	return o && i < o->len ? o : NULL;
}

static void own_unnote(struct own_slots *o, uint32_t i)
{
	pthread_mutex_lock(&own_lock);
	if (o && i < o->len)
		o->held[i] = 0;
	pthread_mutex_unlock(&own_lock);
}

/* One pass over the slot files (a ticket_queue_try_fn): 0 with a slot
 * held, -EBUSY when all are held by someone, or -errno. */
static int try_slots(void *arg)
{
	struct slot_pass *p = arg;
	char path[PATH_MAX];
	uint64_t ours[(SG_CONCURRENCY_MAX + 63) / 64];
	uint32_t cap = p->cap < SG_CONCURRENCY_MAX ? p->cap : SG_CONCURRENCY_MAX;

	own_snapshot(p->dir, cap, ours);
	for (uint32_t i = 0; i < p->cap; i++) {
		int fd;

		if (i < cap && ours[i / 64] & (1ULL << (i % 64)))
			continue;
		snprintf(path, sizeof(path), "%s/slot-%u.lock", p->dir, i);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -errno;
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			p->slot->fd = fd;
			p->slot->index = (int)i;
			p->slot->noted = own_note(p->dir, i);
			return 0;
		}
		int err = errno;
		close(fd);
		if (err != EWOULDBLOCK)
			return -err;
	}
	return -EBUSY;
}

/* <run>/tenants/<tenant> into dir. 0 or -errno. */
static int slots_dir(const char *tenant, char *dir, size_t len)
{
	char run[PATH_MAX];
	int ret = tenant_run_dir(run, sizeof(run));

	if (ret)
		return ret;
	if ((size_t)snprintf(dir, len, "%s/tenants/%s", run, tenant) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int tenant_slot_acquire(const char *tenant, uint32_t cap, uint64_t wait_ms,
			struct tenant_slot *slot)
{
	char dir[PATH_MAX];
	struct slot_pass pass = { .dir = dir, .cap = cap, .slot = slot };
	int ret;

	slot->fd = -1;
	slot->index = -1;
	slot->noted = NULL;
	slot->cpu.fd = -1;
	slot->mem.fd = -1;
	slot->tenant[0] = '\0';
	if (!cap || !tenant_name_valid(tenant))
		return -EINVAL;
	if ((ret = slots_dir(tenant, dir, sizeof(dir))) || (ret = fs_mkdir_p(dir, 0755)))
		return ret;
	/* In arrival order: a newcomer never takes the slot a waiter waits for. */
	ret = ticket_queue_take(dir, wait_ms, try_slots, &pass);
	if (!ret)
		snprintf(slot->tenant, sizeof(slot->tenant), "%s", tenant);
	return ret;
}

void tenant_slot_release(struct tenant_slot *slot)
{
	char dir[PATH_MAX];

	if (slot->fd >= 0) {
		/* Unnoted before the lock goes: a pass meanwhile only finds it
		 * still held, never skips it free. */
		if (slot->index >= 0)
			own_unnote(slot->noted, (uint32_t)slot->index);
		close(slot->fd); /* drops the flock */
		if (!slots_dir(slot->tenant, dir, sizeof(dir)))
			ticket_queue_ring(dir);
	}
	slot->noted = NULL;
	slot->fd = -1;
	slot->index = -1;
	node_cpu_release(&slot->cpu);
	node_cpu_release(&slot->mem);
}
