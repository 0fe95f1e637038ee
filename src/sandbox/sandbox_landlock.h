/* Landlock for a sandbox, at the best ABI the kernel offers:
 *   - filesystem (ABI 1+): the policy's read_only paths readable and
 *     executable, /dev/null also writable, the scratch read-write without
 *     execute (unless exec in scratch is allowed), everything else denied;
 *   - TCP (ABI 4+): no bind; connect only to the TCP ports of the policy's
 *     egress allowlist. Landlock knows ports, not addresses: the agent's
 *     cgroup hooks check the address. An allow entry with "any port" leaves
 *     TCP connect to the agent alone;
 *   - scoping (ABI 6+): no signals out of the sandbox, and no abstract unix
 *     sockets out of it unless the policy allows unix sockets.
 * What the agent refuses itself is left to it (struct landlock_delegation),
 * so that it can also attribute the attempt: TCP connect whenever it
 * enforces the sandbox (its cgroup hooks are preventive in every mode),
 * read access only when it refuses opens itself (BPF LSM mode, see
 * agent_files_preventive()). In its fallback mode it only detects an open
 * after the fact, so Landlock keeps the read restriction.
 * The ruleset is built in the parent, where it can open the paths, and the
 * child only enforces it. */
#ifndef SG_SANDBOX_LANDLOCK_H
#define SG_SANDBOX_LANDLOCK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/policy.h"

/* The kernel's Landlock ABI version, 0 when Landlock is unavailable. */
int landlock_abi(void);

/* What Landlock leaves to the agent's eBPF programs. */
struct landlock_delegation {
	bool reads; /* FS_READ_FILE / FS_READ_DIR */
	bool tcp_connect;
};

/* Build the sandbox's ruleset. Returns its fd (O_CLOEXEC), -EOPNOTSUPP
 * when the kernel has no Landlock, or -errno with `detail` filled in.
 * The policy's /proc paths are left out (the sandbox has a procfs of its
 * own, whose inodes exist only in the child): *proc_read says which read
 * rights the child grants on them with landlock_allow_fd(). */
int landlock_ruleset_build(const struct sg_policy *p, const char *scratch, bool exec_in_scratch,
			   const struct landlock_delegation *to_agent, uint64_t *proc_read,
			   char *detail, size_t dlen);

/* Allow `rights` (already within the ruleset's handled rights) beneath the
 * file or directory open at fd; file rights only for a file.
 * Async-signal-safe; 0 or -errno. */
int landlock_allow_fd(int ruleset, int fd, uint64_t rights);

/* Child side, after PR_SET_NO_NEW_PRIVS: enforce the ruleset on the
 * calling thread (and its future children). Async-signal-safe; 0 or -errno. */
int landlock_enforce(int ruleset_fd);

#endif
