/* Joining the node's mount and cgroup namespaces (see serve_hostns.h). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "serve_hostns.h"

/* Keep `dir` reachable after the mount namespace changes: an O_PATH
 * descriptor, named by a /proc/self/fd path in out. */
static int keep_dir(const char *dir, char *out, size_t len, char *err, size_t err_len)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		snprintf(err, err_len, "%s: %s", dir, strerror(e));
		return -e;
	}
	snprintf(out, len, "/proc/self/fd/%d", fd);
	return 0;
}

static int join(int pid, const char *ns, int type, char *err, size_t err_len)
{
	char path[64];
	int fd, e = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, type))
		e = errno;
	if (fd >= 0)
		close(fd);
	if (e)
		snprintf(err, err_len,
			 "cannot join the %s namespace of pid %d (%s): %s (the pod needs hostPID, "
			 "CAP_SYS_ADMIN and CAP_SYS_CHROOT; see deploy/README.md)",
			 ns, pid, path, strerror(e));
	return -e;
}

int serve_enter_host_namespaces(int pid, struct serve_config *cfg, char *policy_buf,
				char *tokens_buf, size_t len, char *err, size_t err_len)
{
	int ret = 0;

	if (cfg->policy_dir)
		ret = keep_dir(cfg->policy_dir, policy_buf, len, err, err_len);
	if (!ret && cfg->tokens_dir)
		ret = keep_dir(cfg->tokens_dir, tokens_buf, len, err, err_len);
	if (!ret)
		ret = join(pid, "cgroup", CLONE_NEWCGROUP, err, err_len);
	if (!ret)
		ret = join(pid, "mnt", CLONE_NEWNS, err, err_len);
	if (ret)
		return ret;
	/* setns(CLONE_NEWNS) puts root and cwd at the namespace's root. */
	if (chdir("/")) {
		snprintf(err, err_len, "chdir / in the node's mount namespace: %s",
			 strerror(errno));
		return -errno;
	}
	if (cfg->policy_dir)
		cfg->policy_dir = policy_buf;
	if (cfg->tokens_dir)
		cfg->tokens_dir = tokens_buf;
	return 0;
}
