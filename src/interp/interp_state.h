/* Inside src/interp/: the parent's protocol (see interp.h) and the
 * forkserver's state in one sandbox. */
#ifndef SG_INTERP_STATE_H
#define SG_INTERP_STATE_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "sandbox/sandbox_cgroup.h"

#define INTERP_MSG_MAGIC  0x5347574Du
#define INTERP_CALL_MAGIC 0x53475743u
#define INTERP_PREP_MAGIC 0x53475750u
#define INTERP_CALL_MAX   (64 * 1024) /* strings of one CALL */
#define INTERP_PREP_MAX   256         /* memory ranges in one PREP */

enum interp_msg_type { INTERP_READY = 1, INTERP_FAILED, INTERP_DONE };

/* From the parent (fixed size: one datagram each). */
struct interp_msg {
	uint32_t magic;
	uint32_t type;  /* enum interp_msg_type */
	int32_t status; /* DONE: the child's wait status */
	uint32_t unused;
	char text[240]; /* FAILED: why, not NUL-terminated when full */
};

/* To the parent, followed by `len` bytes of NUL-ended strings: the call's
 * scratch directory, then argv (the script and its arguments). Its fds, in
 * order: stdin, stdout, stderr, report pipe. */
struct interp_call {
	uint32_t magic;
	uint32_t argc;
	uint32_t len;
};

/* To the parent, with one fd: the next call's cgroup.procs (opened by
 * root: the child may write to it, not open it). The ranges are the
 * parent's private writable mappings (from its /proc/<pid>/maps, which
 * the sandbox may not read): the waiting child pre-faults them. */
struct interp_range {
	uint64_t start;
	uint64_t len; /* | INTERP_RANGE_SHARED: the child makes it private */
};
/* A writable shared mapping of the parent (a preload's mmap.mmap(-1, n)):
 * the same memory in every call's child, unless each child replaces it
 * with a private copy before any tenant code runs. */
#define INTERP_RANGE_SHARED (1ull << 63)

struct interp_prep {
	uint32_t magic;
	uint32_t n; /* ranges that follow */
	struct interp_range range[INTERP_PREP_MAX];
};

struct sb_interp {
	int sock;            /* our end of the parent's channel; -1: no parent */
	struct sb_leaf home; /* the parent's cgroup */
	char script[PATH_MAX];
	char interpreter[PATH_MAX]; /* the command's argv[0] it was started as */
	pid_t pid;                  /* the parent's host pid (for its RSS) */
	uint64_t started_ms;        /* CLOCK_MONOTONIC */
	uint64_t base_rss_kb;
	unsigned calls;
	bool refused; /* it said FAILED at its start: its preloads */
	/* A verifier's parent: it preloads nothing, serves any script of the
	 * tenant's verifier tests and only those, each child run as
	 * `python3 SCRIPT` would be (src/interp/interp_bootstrap.py). */
	bool verify;
};

#endif
