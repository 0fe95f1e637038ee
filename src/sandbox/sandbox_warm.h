/* Warm interpreters (docs/sandbox.md, "Warm interpreters"; the policy's
 * "warm"): a sandbox whose main process is a forkserver parent, the
 * tenant's interpreter with the policy's preloaded modules imported
 * (src/sandbox/warm_bootstrap.py). It is started through init like any
 * run (slot uid, Landlock, seccomp, rlimits, in the sandbox's cgroups and
 * namespaces) and lives in its own cgroup, <v2>/run-1. Each call is a
 * fresh child of it: the executor makes the call's cgroup <v2>/run-<n>
 * ahead of the call (at the reset after the previous one), and sends the
 * parent a PREP with that cgroup's cgroup.procs: the parent forks the
 * call's child at once, which joins that cgroup first thing, copies the
 * parent's writable memory (so the call does not pay for copy-on-write
 * faults) and waits, before it has any of the call's data. The CALL then
 * brings the call's argv and fds, which the parent hands to the waiting
 * child: it takes a Landlock domain of its own (writes beneath its
 * scratch only, signals and abstract sockets scoped) and runs the script
 * as __main__.
 * The parent's only channel is a SOCK_SEQPACKET socket, its fd 0; it sends
 * READY once, FAILED if its start failed, and DONE with each child's wait
 * status. The executor takes nothing else from it.
 *
 * Between calls the sandbox is reset as for a verifier's next test (the
 * call's cgroup emptied and removed, the scratch put back, the agent's
 * counters started over), and the parent is checked: still alive, alone
 * in its cgroup, not grown past max_growth_mb, under max_calls and
 * max_age_s. Otherwise the sandbox is destroyed, and the parent with it. */
#ifndef SG_SANDBOX_WARM_H
#define SG_SANDBOX_WARM_H
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sandbox_cgroup.h"

#define SB_WARM_MSG_MAGIC  0x5347574Du
#define SB_WARM_CALL_MAGIC 0x53475743u
#define SB_WARM_PREP_MAGIC 0x53475750u
#define SB_WARM_CALL_MAX   (64 * 1024) /* strings of one CALL */
#define SB_WARM_PREP_MAX   256         /* memory ranges in one PREP */

enum sb_warm_msg_type { SB_WARM_READY = 1, SB_WARM_FAILED, SB_WARM_DONE };

/* From the parent (fixed size: one datagram each). */
struct sb_warm_msg {
	uint32_t magic;
	uint32_t type;  /* enum sb_warm_msg_type */
	int32_t status; /* DONE: the child's wait status */
	uint32_t unused;
	char text[240]; /* FAILED: why, not NUL-terminated when full */
};

/* To the parent, followed by `len` bytes of NUL-ended strings: the call's
 * scratch directory, then argv (the script and its arguments). Its fds, in
 * order: stdin, stdout, stderr, report pipe. */
struct sb_warm_call {
	uint32_t magic;
	uint32_t argc;
	uint32_t len;
};

/* To the parent, with one fd: the next call's cgroup.procs (opened by
 * root: the child may write to it, not open it). The ranges are the
 * parent's private writable mappings (from its /proc/<pid>/maps, which
 * the sandbox may not read): the waiting child pre-faults them. */
struct sb_warm_range {
	uint64_t start;
	uint64_t len; /* | SB_WARM_RANGE_SHARED: the child makes it private */
};
/* A writable shared mapping of the parent (a preload's mmap.mmap(-1, n)):
 * the same memory in every call's child, unless each child replaces it
 * with a private copy before any tenant code runs. */
#define SB_WARM_RANGE_SHARED (1ull << 63)

struct sb_warm_prep {
	uint32_t magic;
	uint32_t n; /* ranges that follow */
	struct sb_warm_range range[SB_WARM_PREP_MAX];
};

struct sb_warm {
	int sock;            /* our end of the parent's channel; -1: no parent */
	struct sb_leaf home; /* the parent's cgroup */
	char script[PATH_MAX];
	char interpreter[PATH_MAX]; /* the command's argv[0] it was started as */
	pid_t pid;                  /* the parent's host pid (for its RSS) */
	uint64_t started_ms;        /* CLOCK_MONOTONIC */
	uint64_t base_rss_kb;
	unsigned calls;
	bool keep;    /* sandbox_may_keep(): it may be warm */
	bool refused; /* it said FAILED at its start: its preloads */
	/* A verifier's parent: it preloads nothing, serves any script of the
	 * tenant's verifier tests and only those, each child run as
	 * `python3 SCRIPT` would be (src/sandbox/warm_bootstrap.py). */
	bool verify;
	pthread_t owner; /* the thread that prepared the sandbox */
};

struct sandbox;
struct sandbox_spec;

/* A fresh sandbox's: w is zeroed memory (struct sandbox is calloc'ed). */
void sb_warm_init(struct sb_warm *w);

/* Whether spec's run goes to a warm interpreter in sb: the policy asks for
 * one, the command is `<interpreter> SCRIPT.py [ARG...]` (no interpreter
 * options), batch mode (or verifier mode with the policy's warm.verify),
 * no files in or out, no egress relay, Landlock ABI >= 6, and sb may be
 * kept (sandbox_may_keep(); for a verifier's tests, also a sandbox its
 * own thread prepared, which lives as long as the request) and is fresh,
 * or its parent runs this script (a verifier's parent: any verifier
 * test). */
bool sb_warm_wanted(const struct sandbox *sb, const struct sandbox_spec *spec);

/* Start the parent in sb (fresh: its leaf is run-1) unless it runs, make
 * the first call's cgroup and have its child forked (sb_warm_prefork).
 * 0, or -errno with `detail` (sb is then broken: a platform error). */
int sb_warm_start(struct sandbox *sb, const struct sandbox_spec *spec, char *detail, size_t dlen);

/* Send the parent a PREP for sb->leaf, the next call's fresh cgroup: the
 * call's child is forked into it now, off the call's path. 0, or -errno
 * with `detail`. */
int sb_warm_prefork(struct sandbox *sb, char *detail, size_t dlen);

/* Whether spec is a verifier's test (its run would take a verifier's
 * parent). */
bool sb_warm_verify_mode(const struct sandbox_spec *spec);

/* Hand the parent one call: fds are the call's stdin, stdout, stderr and
 * report pipe (the caller closes its copies). 0 or -errno with `detail`. */
int sb_warm_send_call(struct sandbox *sb, const struct sandbox_spec *spec, const int fds[4],
		      char *detail, size_t dlen);

/* The parent's DONE, waiting at most timeout_ms: 1 with *status, 0 on
 * timeout, -EPIPE when the parent is gone (or spoke out of turn). */
int sb_warm_read_done(struct sandbox *sb, int *status, int timeout_ms);

/* Between calls, after the call's cgroup is gone: 0 when the parent may
 * take another call, else -errno with `detail` saying why it is recycled. */
int sb_warm_check(struct sandbox *sb, char *detail, size_t dlen);

/* sandbox_warm_refusal.c: note that sb's parent could not start (why:
 * its FAILED text); for a while, a parent for sb's tenant, script and
 * policy is not started again. */
void sb_warm_refuse(const struct sandbox *sb, const char *why);

/* Whether such a note holds for sb's tenant and policy and `script`; with
 * `why`, its text there, and the call counted as one that fell back. */
bool sb_warm_refused(const struct sandbox *sb, const char *script, char *why, size_t len);

/* Why spec's run in sb is cold when it would be warm but for such a note:
 * its text in `why`, else "". */
void sb_warm_why_cold(const struct sandbox *sb, const struct sandbox_spec *spec, char *why,
		      size_t len);

/* The parent's channel closed (it exits) and its cgroup's fds. */
void sb_warm_close(struct sandbox *sb);

#endif
