/* Warm interpreters (docs/sandbox.md, "Warm interpreters"; the policy's
 * "warm"): a sandbox whose main process is a forkserver parent, the
 * tenant's interpreter with the policy's preloaded modules imported
 * (src/sandbox/warm_bootstrap.py). It is started through init like any
 * run (slot uid, Landlock, seccomp, rlimits, in the sandbox's cgroups and
 * namespaces) and lives in its own cgroup, <v2>/run-1. Each call is a
 * fresh child of it: the executor makes the call's cgroup <v2>/run-<n>
 * and scratch directory <scratch>/call-<n>, and sends the parent a CALL
 * with the call's argv and fds; the child joins that cgroup first thing,
 * takes a Landlock domain of its own (writes beneath its scratch only,
 * signals and abstract sockets scoped) and runs the script as __main__.
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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sandbox_cgroup.h"

#define SB_WARM_MSG_MAGIC  0x5347574Du
#define SB_WARM_CALL_MAGIC 0x53475743u
#define SB_WARM_CALL_MAX   (64 * 1024) /* strings of one CALL */

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
 * order: the call's cgroup.procs, stdin, stdout, stderr, report pipe. */
struct sb_warm_call {
	uint32_t magic;
	uint32_t argc;
	uint32_t len;
};

struct sb_warm {
	int sock;            /* our end of the parent's channel; -1: no parent */
	struct sb_leaf home; /* the parent's cgroup */
	char script[PATH_MAX];
	pid_t pid;           /* the parent's host pid (for its RSS) */
	uint64_t started_ms; /* CLOCK_MONOTONIC */
	uint64_t base_rss_kb;
	unsigned calls;
	bool keep; /* sandbox_may_keep(): it may be warm */
};

struct sandbox;
struct sandbox_spec;

void sb_warm_init(struct sb_warm *w);

/* Whether spec's run goes to a warm interpreter in sb: the policy asks for
 * one, the command is `<interpreter> SCRIPT.py [ARG...]` (no interpreter
 * options), batch mode, no files in or out, no egress relay, Landlock ABI
 * >= 6, and sb may be kept (sandbox_may_keep()) and is fresh, or its
 * parent runs this script. */
bool sb_warm_wanted(const struct sandbox *sb, const struct sandbox_spec *spec);

/* Start the parent in sb (fresh: its leaf is run-1) unless it runs, and
 * make the first call's cgroup. 0, or -errno with `detail` (sb is then
 * broken: a platform error). */
int sb_warm_start(struct sandbox *sb, const struct sandbox_spec *spec, char *detail, size_t dlen);

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

/* The parent's channel closed (it exits) and its cgroup's fds. */
void sb_warm_close(struct sandbox *sb);

#endif
