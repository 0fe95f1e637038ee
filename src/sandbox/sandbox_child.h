/* The sandbox's processes, from the executor's clone() to the tenant's
 * execve, on plans the parent prepared:
 *
 *   executor --clone3(CLONE_NEWPID, into the sandbox's cgroup)--> init
 *        (PID 1, sandbox_init.c): joins the v1 cgroups, enters new mount,
 *        UTS, IPC and network namespaces, sets up the network and the
 *        minimal root, says READY on its control socket, and waits.
 *   executor --START (argv, rlimits; stdio, report pipe, the run's
 *        cgroup)--> init --clone3(into the run's cgroup)--> relay
 *        (sandbox_relay.c; only with an egress allowlist) and main
 *        (sb_child_exec() below): the tenant's command. init reaps every
 *        orphan and, when main exits, says DONE with main's wait status;
 *        the executor then empties the run's cgroup. init takes a fresh
 *        IPC namespace for the next run and waits for its START.
 *   executor closes the control socket, or init dies: the PID namespace
 *        ends, and everything in it.
 *
 * The first run's main is forked ahead of its START (sandbox_child.c),
 * where the first run's cgroup is ready when init starts and init needs
 * no relay: right after READY, init forks it into that cgroup; it does
 * every step that does not depend on the run (setsid, signals, identity,
 * chdir, no_new_privs, Landlock, seccomp), holds nothing but its own end
 * of a run channel from the executor, and waits there for the START
 * (argv, rlimits; stdio, report pipe), on whose report pipe a failed
 * step is reported as main's would be. init reaps it as the run's main.
 * The executor's close of the channel without a START ends it; so does
 * init's end. Later runs (a verifier's tests) start from init's START as
 * above: no such process waits beside a running one.
 *
 * Only async-signal-safe calls (the executor may be multithreaded, and
 * the processes are made by raw clone()): no malloc, no stdio. A failure
 * of init's setup is a FAILED report on the control socket, a failure of
 * main's (or the relay's) a report on the run's report pipe; either
 * process then exits 127, and the parent books a platform error, never a
 * tenant crash. */
#ifndef SG_SANDBOX_CHILD_H
#define SG_SANDBOX_CHILD_H
#include <stdbool.h>
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
	SB_STEP_CAPABILITIES,
	SB_STEP_START,
};

enum sb_report_type {
	SB_REPORT_FAILED = 1, /* a setup step failed: step, err, op */
	SB_REPORT_READY,      /* init: set up, waiting for a START */
	SB_REPORT_DONE,       /* init: the run's main ended: main_ran, wait_status */
	SB_REPORT_EXEC,       /* main: its execve is next (the run's report pipe) */
};

/* One message on init's control socket, or on a run's report pipe: there
 * EXEC, main's word just before its execve, then the pipe's EOF at the
 * execve means the tenant runs; or FAILED. An EOF without EXEC means main
 * ended before the tenant's code could run: not the tenant's doing. */
struct sb_child_report {
	int type;
	int step; /* enum sb_child_step */
	int err;  /* errno */
	int op;   /* SB_STEP_ROOT: the index of the root operation that failed */
	int main_ran;
	int wait_status; /* main's, as from waitpid() */
};

#define SB_MAX_RLIMITS 6

struct sb_rlimit {
	int resource;
	struct rlimit lim;
};

/* What a run's processes (main, and the relay) get. The sandbox's part is
 * prepared with it; init fills in the run's part from its START. */
struct sb_child_plan {
	int stdio[3];        /* the run's pipes */
	int report_fd;       /* the run's report pipe (close-on-exec write end) */
	int cgroup_procs_fd; /* the run's cgroup.procs, to move into; -1: born there */
	uid_t uid;
	gid_t gid;
	const char *scratch;
	int landlock_fd;                  /* -1: no Landlock on this kernel */
	const struct sb_seccomp *seccomp; /* NULL: no filter for this arch */
	const struct sb_net_plan *net;    /* the relay's allowlist; NULL: no relay */
	int n_rlimits;
	struct sb_rlimit rlimits[SB_MAX_RLIMITS];
	char *const *argv;
	char *const *envp;
	const char *exec_paths[2]; /* argv[0] resolved against PATH=/usr/bin:/bin */
	int n_exec_paths;
};

/* The sandbox's init, prepared by the parent before the clone. */
struct sb_init_plan {
	const struct sb_cgroup *cg;
	bool migrate;      /* born outside the v2 cgroup (a relay's listeners): move in */
	bool clone3;       /* start runs inside their cgroup (else they move in) */
	int ctl;           /* init's end of the control socket (SOCK_SEQPACKET) */
	int sigfd;         /* a signalfd for SIGCHLD */
	int unshare_flags; /* CLONE_NEW* */
	/* Bring the namespace's own loopback up (the policy allows
	 * listeners): only ever with CLONE_NEWNET in unshare_flags. */
	bool loopback;
	const char *hostname;
	const struct sb_root_plan *root;
	uint64_t proc_read; /* Landlock read rights on the sandbox's /proc paths */
	int pre_chan;       /* the first run's channel (SOCK_SEQPACKET); -1: no pre-fork */
	int pre_cgroup;     /* the first run's cgroup (a directory fd, for clone3) */
	struct sb_child_plan child;
};

/* The executor's word on the first run's channel, before its START: the
 * slot's uid and gid name no account (sb_slot_check()). The pre-forked
 * main takes that identity only after it. */
#define SB_SLOT_CLEARED_MAGIC 0x53475243u

/* A run, from the executor to init. The run's fds travel with it
 * (SCM_RIGHTS), in the order of enum sb_start_fd. */
#define SB_START_MAGIC   0x53475231u
#define SB_START_STRINGS (64 * 1024)
#define SB_START_ARGS    1024

enum sb_start_fd {
	SB_FD_STDIN,
	SB_FD_STDOUT,
	SB_FD_STDERR,
	SB_FD_REPORT,
	SB_FD_CGROUP,
	SB_START_FDS
};

struct sb_start {
	uint32_t magic;
	int n_rlimits;
	struct sb_rlimit rlimits[SB_MAX_RLIMITS];
	uint32_t argc;
	uint32_t n_exec_paths;
	uint32_t len; /* bytes used in strings: argv, then the exec paths, NUL-ended */
	char strings[SB_START_STRINGS];
};

/* fork() without glibc's handlers: `flags` | SIGCHLD, the caller's stack
 * copied. Returns what fork() returns. */
pid_t sb_clone(unsigned long flags);

/* init, in the child of the executor's clone. */
_Noreturn void sb_init_run(const struct sb_init_plan *p);

/* main: from init's clone to the tenant's execve. */
_Noreturn void sb_child_exec(const struct sb_child_plan *p);

/* main's steps that depend on the sandbox only: setsid, signals, identity,
 * parent-death signal, chdir, no_new_privs, Landlock, seccomp. 0, or
 * -errno with *step the one that failed. */
int sb_child_confine(const struct sb_child_plan *p, int *step);

/* main's steps that depend on the run, after sb_child_confine(): stdio,
 * rlimits, execve. */
_Noreturn void sb_child_start(const struct sb_child_plan *p);

/* In init, after READY (p->pre_chan >= 0): fork the first run's main
 * into its cgroup, to wait there for its START. Its pid, or -errno. */
pid_t sb_prerun_fork(const struct sb_init_plan *p);

/* A START off the socket: its fds (SCM_RIGHTS, in the order of enum
 * sb_start_fd) moved above stdio. 0, -ESHUTDOWN at EOF, -EPROTO, -errno. */
int sb_start_receive(int sock, struct sb_start *m, int fds[SB_START_FDS]);

/* argv and the exec paths out of a START's strings, and the rest of the
 * run's plan into *run. 0 or -EPROTO. */
int sb_start_decode(const struct sb_start *m, const int fds[SB_START_FDS], char **argv,
		    struct sb_child_plan *run);

/* A run that cannot start says why on its report pipe, as main would. */
void sb_start_refuse(int report_fd, int step, int err);

/* Close every fd but those in keep[] (negative entries ignored; at most
 * SB_KEEP_MAX). Shared by init and the relay. */
#define SB_KEEP_MAX (SB_NET_MAX_LISTENERS + 8)
void sb_close_all_but(const int *keep, int n);

/* Shared by relay and main: report a failed step on the report pipe and
 * exit 127. */
_Noreturn void sb_child_fail(const struct sb_child_plan *p, int step, int err, int op);

/* Shared by relay and main, first thing: into the run's cgroup where
 * clone3() could not start them there. 0 or -errno. */
int sb_child_join_run(const struct sb_child_plan *p);

/* Shared by relay and main: become the slot uid/gid with no groups. */
int sb_child_drop_identity(uid_t uid, gid_t gid);

/* Every signal to its default, none blocked. */
int sb_child_reset_signals(void);

const char *sb_child_step_name(int step);

#endif
