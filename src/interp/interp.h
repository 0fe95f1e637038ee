/* The interpreter forkserver (docs/warm-interpreters.md; the
 * policy's "warm"): a sandbox whose main process is a forkserver parent,
 * the tenant's interpreter with the policy's preloaded modules imported
 * (src/interp/interp_bootstrap.py). The sandbox calls it through its hook
 * (src/sandbox/sandbox_interp.h, interp_hook below), and this side uses
 * only the sandbox's public API. It is started through init like any
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
#ifndef SG_INTERP_H
#define SG_INTERP_H
#include <stdbool.h>
#include <stdint.h>
#include "sandbox/sandbox_interp.h"
#include "interp_refusal.h"

struct sandbox;
struct sandbox_spec;

/* The hook the process registers (sandbox_use_interp(), from main()):
 * the sandbox's runs call the functions below through it. */
extern const struct sb_interp_ops interp_hook;

/* Whether spec is a verifier's test (its run would take a verifier's
 * parent). */
bool interp_verify_mode(const struct sandbox_spec *spec);

/* ---- for the pool and the executor (src/pool/, src/executor/, src/exec/) ---- */

/* Whether a warm interpreter for spec's script runs in sb (spec NULL: for
 * any script): a pool resets such a sandbox after its call and keeps it
 * for that script's next call (docs/warm-interpreters.md). */
bool interp_for(const struct sandbox *sb, const struct sandbox_spec *spec);

/* Whether a warm interpreter was started in sb: the tenant's preloaded
 * code ran there (or may have), so nothing a run in sb reports is evidence
 * the tenant could not produce. After a failed run, the caller runs the
 * call again cold, in another sandbox (exec_box_run()). */
bool interp_ran(const struct sandbox *sb);

/* After sandbox_exec() failed: whether it was that sb's warm interpreter
 * could not start (its preloads did not import). The tenant's calls of
 * that script run cold for a while then; the caller runs this call again,
 * cold, in another sandbox. */
bool interp_start_refused(const struct sandbox *sb);

/* A run in sb's warm interpreter ended as only a warm run can, or as
 * the run itself chose to look (a SIGSYS): sb's tenant's calls of that
 * script (for verifier tests: all of them) run cold for a while, the
 * same as after its interpreter failed. */
void interp_refuse(const struct sandbox *sb, const char *why);

/* Whether sb's warm interpreter is past its policy's max_age_s: a pool
 * retires such a sandbox while it waits for a call, not only at the reset
 * after one. */
bool interp_expired(const struct sandbox *sb);

#endif
