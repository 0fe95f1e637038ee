/* The sandbox's processes, from the executor's clone() to the tenant's
 * execve, on a plan the parent prepared:
 *
 *   executor --clone(CLONE_NEWPID)--> init (PID 1, sandbox_init.c)
 *        joins the cgroups, enters new mount, UTS, IPC and network
 *        namespaces, sets up the network and the minimal root, then
 *        --clone--> relay (sandbox_relay.c; only with an egress allowlist)
 *        --clone--> main (PID 2 or 3, sb_child_exec() below): the tenant's
 *        command; init reaps every orphan and, when main exits, writes
 *        its wait status to the status pipe and exits, which kills
 *        whatever is left in the PID namespace.
 *
 * Only async-signal-safe calls (the executor may be multithreaded, and
 * raw clone() skips glibc's fork handlers): no malloc, no stdio. Any
 * failure is written to the report pipe as a struct sb_child_report and
 * the process exits 127: the parent books it as a platform error, never as
 * a tenant crash. */
#ifndef SG_SANDBOX_CHILD_H
#define SG_SANDBOX_CHILD_H
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include "sandbox_cgroup.h"
#include "sandbox_net.h"
#include "sandbox_root.h"
#include "sandbox_seccomp.h"

enum sb_child_step {
	SB_STEP_CGROUP = 1,
	SB_STEP_UNSHARE,
	SB_STEP_SETSID,
	SB_STEP_STDIO,
	SB_STEP_CLOSE_FDS,
	SB_STEP_SIGNALS,
	SB_STEP_IDENTITY,
	SB_STEP_PDEATHSIG,
	SB_STEP_RLIMIT,
	SB_STEP_CHDIR,
	SB_STEP_NO_NEW_PRIVS,
	SB_STEP_LANDLOCK,
	SB_STEP_SECCOMP,
	SB_STEP_EXEC,
	SB_STEP_HOSTNAME,
	SB_STEP_NETWORK,
	SB_STEP_ROOT,
	SB_STEP_FORK,
};

struct sb_child_report {
	int step; /* enum sb_child_step */
	int err;  /* errno */
	int op;   /* SB_STEP_ROOT: the index of the root operation that failed */
};

/* What init tells the parent when it exits normally. */
struct sb_init_status {
	int main_ran;    /* 1: main was started and reaped */
	int wait_status; /* main's, as from waitpid() */
};

#define SB_MAX_RLIMITS 6

struct sb_child_plan {
	const struct sb_cgroup *cg;
	int stdio[3];  /* child ends of the pipes, all >= 3 */
	int report_fd; /* O_CLOEXEC write end, >= 3 */
	int status_fd; /* O_CLOEXEC write end, >= 3: struct sb_init_status */
	uid_t uid;
	gid_t gid;
	int unshare_flags; /* CLONE_NEW*, for init */
	const char *hostname;
	const struct sb_root_plan *root;
	const struct sb_net_plan *net; /* NULL: no relay, loopback left down */
	uint64_t proc_read;            /* Landlock read rights on the sandbox's /proc paths */
	const char *scratch;
	int landlock_fd;                  /* -1: no Landlock on this kernel */
	const struct sb_seccomp *seccomp; /* NULL: no filter for this arch */
	int n_rlimits;
	struct {
		int resource;
		struct rlimit lim;
	} rlimits[SB_MAX_RLIMITS];
	char *const *argv;
	char *const *envp;
	const char *exec_paths[2]; /* argv[0] resolved against PATH=/usr/bin:/bin */
	int n_exec_paths;
};

/* fork() without glibc's handlers: `flags` | SIGCHLD, the caller's stack
 * copied. Returns what fork() returns. */
pid_t sb_clone(unsigned long flags);

/* init, in the child of sb_clone(CLONE_NEWPID). */
_Noreturn void sb_init_run(const struct sb_child_plan *p);

/* main: from init's clone to the tenant's execve. */
_Noreturn void sb_child_exec(const struct sb_child_plan *p);

/* Shared by init, relay and main: report a failed step and exit 127. */
_Noreturn void sb_child_fail(const struct sb_child_plan *p, int step, int err, int op);

/* Shared by relay and main: become the slot uid/gid with no groups. */
int sb_child_drop_identity(uid_t uid, gid_t gid);

/* Every signal to its default, none blocked. */
int sb_child_reset_signals(void);

const char *sb_child_step_name(int step);

#endif
