/* Starting inside the cgroups (clone3 CLONE_INTO_CGROUP, the v1 `tasks`
 * join) and each run's own cgroup below the sandbox's (see
 * src/sandbox/sandbox_cgroup.h). */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
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

int sb_cgroup_leaf_make(const struct sb_cgroup *cg, unsigned n, struct sb_leaf *leaf, char *detail,
			size_t dlen)
{
	int err;

	leaf->dir_fd = leaf->procs_fd = -1;
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
		if (err)
			sb_cgroup_leaf_remove(leaf, 0);
	}
	if (err)
		leaf->path[0] = '\0';
	return err;
}

void sb_cgroup_leaf_kill(const struct sb_leaf *leaf)
{
	if (leaf->path[0] && write_file(leaf->path, "cgroup.kill", "1") == -ENOENT)
		cgroup_kill(leaf->path, 0); /* no cgroup.kill: the freezer's way */
}

int sb_cgroup_leaf_remove(struct sb_leaf *leaf, int timeout_ms)
{
	int err = 0;

	fs_close(&leaf->dir_fd);
	fs_close(&leaf->procs_fd);
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
