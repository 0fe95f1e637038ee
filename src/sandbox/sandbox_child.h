/* The forked child's side of a sandbox run: from fork to execve, using only
 * async-signal-safe calls (the executor may be multithreaded), on a plan
 * the parent prepared. Any failure is written to the report pipe as a
 * struct sb_child_report and the child exits 127: the parent books it as a
 * platform error, never as a tenant crash. */
#ifndef SG_SANDBOX_CHILD_H
#define SG_SANDBOX_CHILD_H
#include <sys/resource.h>
#include <sys/types.h>
#include "sandbox_cgroup.h"
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
};

struct sb_child_report {
	int step; /* enum sb_child_step */
	int err;  /* errno */
};

#define SB_MAX_RLIMITS 4

struct sb_child_plan {
	const struct sb_cgroup *cg;
	int stdio[3];  /* child ends of the pipes, all >= 3 */
	int report_fd; /* O_CLOEXEC write end, >= 3 */
	pid_t parent;
	uid_t uid;
	gid_t gid;
	int unshare_flags; /* CLONE_NEW* for unshare(), 0: none */
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

_Noreturn void sb_child_run(const struct sb_child_plan *p);

const char *sb_child_step_name(int step);

#endif
