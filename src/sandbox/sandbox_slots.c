/* Sandbox uid slots (see src/sandbox/sandbox_slots.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/detail.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "sandbox_scratch.h"
#include "sandbox_slots.h"

int sb_uid_base(uid_t *base)
{
	const char *env = getenv("SANDGUARD_UID_BASE");
	unsigned long v;
	char *end;

	if (!env || !*env) {
		*base = SB_UID_BASE_DEFAULT;
		return 0;
	}
	errno = 0;
	v = strtoul(env, &end, 10);
	/* Below 1000 live system accounts; (uid_t)-1 means "no change". */
	if (errno || *end || v < 1000 || v + SB_SLOTS > 0xfffffffeUL)
		return -EINVAL;
	*base = (uid_t)v;
	return 0;
}

/* Lock <dir>/<uid>.lock without waiting: 0 held, -EWOULDBLOCK taken. */
static int try_lock(uid_t uid, int *fd_out)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%u.lock", SB_SLOT_DIR, (unsigned)uid);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int err = -errno;
		close(fd);
		return err;
	}
	*fd_out = fd;
	return 0;
}

/* Whether the uid names a user or the gid (= uid) a group. The _r
 * variants: sandboxes may start from several threads at once. */
int sb_slot_check(const struct sb_slot *slot, char *detail, size_t dlen)
{
	struct passwd pw, *user = NULL;
	struct group gr, *group = NULL;
	char buf[16384];

	if ((getpwuid_r(slot->uid, &pw, buf, sizeof(buf), &user) == 0 && user) ||
	    (getgrgid_r(slot->gid, &gr, buf, sizeof(buf), &group) == 0 && group)) {
		sg_warn("sandbox slot uid/gid %u belongs to an existing user or group; skipping it",
			(unsigned)slot->uid);
		snprintf(detail, dlen,
			 "sandbox slot uid/gid %u belongs to an existing user or group",
			 (unsigned)slot->uid);
		return -EUSERS;
	}
	return 0;
}

/* A free slot now, or -EBUSY. */
static int take_free(struct sb_slot *slot, char *detail, size_t dlen)
{
	unsigned start = 0;
	uid_t base;
	int err;

	slot->lock_fd = -1;
	if (sb_uid_base(&base)) {
		snprintf(detail, dlen, "SANDGUARD_UID_BASE must be an integer >= 1000");
		return -EINVAL;
	}
	err = fs_mkdir_p(SB_SLOT_DIR, 0700);
	if (err) {
		snprintf(detail, dlen, "cannot create %s: %s", SB_SLOT_DIR, strerror(-err));
		return err;
	}
	/* A random starting point spreads concurrent executors over the
	 * range instead of all contending for the first lock file. */
	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (unsigned)getpid();
	for (unsigned i = 0; i < SB_SLOTS; i++) {
		uid_t uid = base + (start + i) % SB_SLOTS;
		int fd;

		err = try_lock(uid, &fd);
		if (err == -EWOULDBLOCK)
			continue;
		if (err) {
			snprintf(detail, dlen, "cannot lock slot %u in %s: %s", (unsigned)uid,
				 SB_SLOT_DIR, strerror(-err));
			return err;
		}
		slot->lock_fd = fd;
		slot->uid = uid;
		slot->gid = (gid_t)uid;
		return 0;
	}
	snprintf(detail, dlen, "all %d sandbox slots (uids %u..%u) are in use", SB_SLOTS,
		 (unsigned)base, (unsigned)(base + SB_SLOTS - 1));
	return -EBUSY;
}

int sb_slot_acquire(struct sb_slot *slot, uint64_t wait_ms, char *detail, size_t dlen)
{
	uint64_t start = clock_ms(CLOCK_MONOTONIC), now = start, pause_ms = 5;
	int err;

	/* Slots free up as runs end: a node whose every uid is taken for a
	 * moment makes a run wait, as admission's lines do, rather than fail
	 * it as a platform error. */
	while ((err = take_free(slot, detail, dlen)) == -EBUSY && now - start < wait_ms) {
		uint64_t left = wait_ms - (now - start);

		uint64_t ms = pause_ms < left ? pause_ms : left;

		nanosleep(&(struct timespec){ .tv_sec = (time_t)(ms / 1000),
					      .tv_nsec = (long)(ms % 1000) * 1000000 },
			  NULL);
		pause_ms = pause_ms < 100 ? pause_ms * 2 : 100;
		now = clock_ms(CLOCK_MONOTONIC);
	}
	if (err == -EBUSY && wait_ms)
		detail_append(detail, dlen, ", still after %llu ms", (unsigned long long)wait_ms);
	return err;
}

void sb_slot_release(struct sb_slot *slot)
{
	if (slot->lock_fd >= 0)
		close(slot->lock_fd); /* closing drops the flock */
	slot->lock_fd = -1;
}
