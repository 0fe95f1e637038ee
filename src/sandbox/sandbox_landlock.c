/* Landlock rulesets for sandboxes (see src/sandbox/sandbox_landlock.h).
 * The uapi header of the build host may predate the ABI of the running
 * kernel (Debian 12 ships ABI 2), so the few definitions used here are
 * spelled out from the kernel's stable uapi. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "lib/log.h"
#include "sandbox_landlock.h"
#include "sandbox_scratch.h"

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule       445
#define __NR_landlock_restrict_self  446
#endif

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct ll_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH      1
#define LL_RULE_NET_PORT          2

#define FS_EXECUTE    (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE  (1ULL << 2)
#define FS_READ_DIR   (1ULL << 3)
#define FS_MAKE_CHAR  (1ULL << 6)
#define FS_MAKE_BLOCK (1ULL << 11)
#define FS_ABI1_ALL   ((1ULL << 13) - 1) /* EXECUTE .. MAKE_SYM */
#define FS_REFER      (1ULL << 13)       /* ABI 2 */
#define FS_TRUNCATE   (1ULL << 14)       /* ABI 3 */
#define FS_IOCTL_DEV  (1ULL << 15)       /* ABI 5 */
/* The rights that apply to a file (the others need a directory). */
#define FS_FILE_RIGHTS (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)

#define NET_BIND_TCP    (1ULL << 0)
#define NET_CONNECT_TCP (1ULL << 1)

#define SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define SCOPE_SIGNAL        (1ULL << 1)

int landlock_abi(void)
{
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);

	return abi < 0 ? 0 : (int)abi;
}

static uint64_t fs_rights_for_abi(int abi)
{
	uint64_t r = FS_ABI1_ALL;

	if (abi >= 2)
		r |= FS_REFER;
	if (abi >= 3)
		r |= FS_TRUNCATE;
	if (abi >= 5)
		r |= FS_IOCTL_DEV;
	return r;
}

int landlock_allow_fd(int ruleset, int fd, uint64_t rights)
{
	struct ll_path_beneath_attr attr = { 0 };
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		rights &= FS_FILE_RIGHTS;
	attr.allowed_access = rights;
	attr.parent_fd = fd;
	if (attr.allowed_access &&
	    syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &attr, 0))
		return -errno;
	return 0;
}

/* Allow `rights` beneath `path` (masked to file rights for a file).
 * A path that does not exist on this node is skipped: a read-only
 * allowlist names what may be read, not what must exist. */
static int allow_path(int ruleset, const char *path, uint64_t rights, uint64_t handled,
		      bool must_exist, char *detail, size_t dlen)
{
	int fd = open(path, O_PATH | O_CLOEXEC), err;

	if (fd < 0) {
		if (errno == ENOENT && !must_exist) {
			sg_debug("landlock: %s does not exist here; not allowed", path);
			return 0;
		}
		snprintf(detail, dlen, "landlock: cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	err = landlock_allow_fd(ruleset, fd, rights & handled);
	if (err)
		snprintf(detail, dlen, "landlock: cannot add a rule for %s: %s", path,
			 strerror(-err));
	close(fd);
	return err;
}

/* TCP connect can be limited to the allowlist's ports only when every TCP
 * allow entry names a port. */
static bool tcp_ports_enforceable(const struct sg_policy *p)
{
	for (int i = 0; i < p->n_egress; i++) {
		const struct sg_egress_allow *e = &p->egress[i];
		if ((e->proto == 0 || e->proto == IPPROTO_TCP) && e->port == 0)
			return false;
	}
	return true;
}

static int allow_tcp_ports(int ruleset, const struct sg_policy *p, char *detail, size_t dlen)
{
	for (int i = 0; i < p->n_egress; i++) {
		const struct sg_egress_allow *e = &p->egress[i];
		struct ll_net_port_attr attr = { .allowed_access = NET_CONNECT_TCP,
						 .port = e->port };

		if (e->proto != 0 && e->proto != IPPROTO_TCP)
			continue;
		if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &attr, 0)) {
			snprintf(detail, dlen, "landlock: cannot allow TCP port %u: %s", e->port,
				 strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* path is /proc or below it. */
static bool on_procfs(const char *path)
{
	return !strncmp(path, "/proc", 5) && (path[5] == '\0' || path[5] == '/');
}

int landlock_ruleset_build(const struct sg_policy *p, const char *scratch, bool exec_in_scratch,
			   const struct landlock_delegation *to_agent, uint64_t *proc_read,
			   char *detail, size_t dlen)
{
	static const char *const private_dirs[] = { "", "/" SB_SCRATCH_TMP, "/" SB_SCRATCH_SHM,
						    "/" SB_SCRATCH_MNT };
	char path[PATH_MAX];
	struct ll_ruleset_attr attr = { 0 };
	uint64_t read_rights = FS_READ_FILE | FS_READ_DIR | FS_EXECUTE;
	uint64_t scratch_rights;
	int abi = landlock_abi(), fd, err = 0;

	if (abi < 1)
		return -EOPNOTSUPP;
	attr.handled_access_fs = fs_rights_for_abi(abi);
	/* What the agent refuses itself, before it happens, is left to it:
	 * it also events the attempt and books it to the tenant, whereas
	 * Landlock refusing first would hide it from the agent and turn a
	 * policy violation into an unexplained error. Reads only when the
	 * agent refuses opens (BPF LSM mode): in fallback mode it learns of
	 * an open after the fact, so Landlock keeps refusing reads (and the
	 * agent attributes the EACCES). TCP connects whenever the agent
	 * enforces: its cgroup hooks refuse them in both modes. Writes,
	 * execs, bind and scoping stay here in every case. */
	if (to_agent->reads)
		attr.handled_access_fs &= ~(FS_READ_FILE | FS_READ_DIR);
	if (abi >= 4) {
		/* No bind, unless the policy allows listeners: then any port
		 * of the sandbox's own network namespace. */
		attr.handled_access_net = p->allow_listen ? 0 : NET_BIND_TCP;
		/* With listeners, connects go to them on the namespace's own
		 * loopback, any port: the namespace routes nothing else but an
		 * allowed network to the relay, which checks each
		 * destination itself. */
		if (!to_agent->tcp_connect && !p->allow_listen && tcp_ports_enforceable(p))
			attr.handled_access_net |= NET_CONNECT_TCP;
	}
	if (abi >= 6) {
		attr.scoped = SCOPE_SIGNAL;
		if (!p->allow_unix)
			attr.scoped |= SCOPE_ABSTRACT_UNIX;
	}
	fd = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (fd < 0) {
		snprintf(detail, dlen, "landlock: cannot create a ruleset (ABI %d): %s", abi,
			 strerror(errno));
		return -errno;
	}
	/* The sandbox has its own procfs: its /proc rules are added in the
	 * child, on its inodes (sb_root_enter()). */
	*proc_read = attr.handled_access_fs & (FS_READ_FILE | FS_READ_DIR);
	for (int i = 0; i < p->n_read_only && !err; i++) {
		uint64_t rights = read_rights;

		if (on_procfs(p->read_only[i]))
			continue;

		/* Writing to /dev/null is harmless and many programs open it
		 * read-write (subprocess.DEVNULL, shell redirections). */
		if (!strcmp(p->read_only[i], "/dev/null"))
			rights |= FS_WRITE_FILE | FS_TRUNCATE;
		err = allow_path(fd, p->read_only[i], rights, attr.handled_access_fs, false, detail,
				 dlen);
	}
	/* The reward-model tier's inference pool (sandbox_root.c binds
	 * them): opened read-write and driven by ioctls, as a GPU is. */
	for (int i = 0; i < p->n_inference_devices && !err; i++)
		err = allow_path(fd, p->inference_devices[i],
				 FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV,
				 attr.handled_access_fs,
				 false, /* missing: sandbox_root.c says so */
				 detail, dlen);
	/* Everything in the scratch but device nodes (and device ioctls);
	 * execute only where compiled languages need it. */
	scratch_rights = attr.handled_access_fs & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_IOCTL_DEV);
	if (!exec_in_scratch)
		scratch_rights &= ~FS_EXECUTE;
	/* The scratch, and its directories that are the sandbox's /tmp,
	 * /dev/shm and /mnt: Landlock meets those bind mounts' roots, not the
	 * scratch's, on its walk up from a file in them. */
	for (size_t i = 0; i < sizeof(private_dirs) / sizeof(private_dirs[0]) && !err; i++) {
		snprintf(path, sizeof(path), "%s%s", scratch, private_dirs[i]);
		err = allow_path(fd, path, scratch_rights, attr.handled_access_fs, true, detail,
				 dlen);
	}
	if (!err && (attr.handled_access_net & NET_CONNECT_TCP))
		err = allow_tcp_ports(fd, p, detail, dlen);
	if (err) {
		close(fd);
		return err;
	}
	sg_debug("landlock: ABI %d, fs 0x%llx, net 0x%llx, scoped 0x%llx", abi,
		 (unsigned long long)attr.handled_access_fs,
		 (unsigned long long)attr.handled_access_net, (unsigned long long)attr.scoped);
	return fd;
}

int landlock_enforce(int ruleset_fd)
{
	if (syscall(__NR_landlock_restrict_self, ruleset_fd, 0))
		return -errno;
	return 0;
}
