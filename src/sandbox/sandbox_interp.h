/* What a sandbox asks of the interpreter forkserver that may run in it
 * (src/interp/interp.h; docs/warm-interpreters.md), and what
 * the forkserver may read of the sandbox and do in it. sandbox/ is the
 * mechanism (init, cgroups, layers, one run); the forkserver is a client
 * of that mechanism that the sandbox consults at each run through these
 * ops, and never includes. A process that registers none (a unit test,
 * tests/helpers/sandbox_run) runs every sandbox cold.
 *
 * Registered once per process (sandbox_use_interp()), not handed in with
 * each spec as the enforcer is (sandbox_enforcer.h): the enforcer is
 * chosen per request (which agent answers), while the forkserver is a
 * capability of the binary (its bootstrap is linked in), and whether a
 * run uses it is the tenant's policy's `warm` section, which the spec
 * already carries. An interpreter also outlives the spec that started it
 * (it serves later calls of other batches): its ops must be the same for
 * every run of the sandbox, so each sandbox keeps the ops that were
 * registered when it was prepared, and a spec maker cannot forget them.
 * A second registration source would only allow one sandbox's runs to
 * disagree about who owns its interpreter. */
#ifndef SG_SANDBOX_INTERP_H
#define SG_SANDBOX_INTERP_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sandbox;
struct sandbox_spec;
struct sb_leaf;
struct sg_policy;
/* The interpreter's state in one sandbox: the hook's own (opaque here);
 * made by its start, ended by its end. NULL: none ever started. */
struct sb_interp;

/* Each returns as its comment says. detail: why, on an error. An error of
 * start, send_call or prefork leaves the sandbox broken (the sandbox
 * marks it so). */
struct sb_interp_ops {
	/* Whether spec's run in sb goes to an interpreter in it (running, or
	 * to be started for this run). */
	bool (*wanted)(const struct sandbox *sb, const struct sandbox_spec *spec);
	/* Start it for spec unless it runs. 0 or -errno. */
	int (*start)(struct sandbox *sb, const struct sandbox_spec *spec, char *detail,
		     size_t dlen);
	/* Why spec's run in sb is cold when it would have been warm: its text
	 * in `why` (a result's warm_fallback), else "". */
	void (*why_cold)(const struct sandbox *sb, const struct sandbox_spec *spec, char *why,
			 size_t len);
	/* Its channel: what a run polls for the call's end, -1 when no
	 * interpreter runs (the run goes to init). */
	int (*channel)(const struct sb_interp *in);
	/* Hand it one call: fds are the call's stdin, stdout, stderr and
	 * report pipe (the caller closes its copies). 0 or -errno. */
	int (*send_call)(struct sandbox *sb, const struct sandbox_spec *spec, const int fds[4],
			 char *detail, size_t dlen);
	/* The call's end, waiting at most timeout_ms: 1 with its wait
	 * *status, 0 on timeout, -errno when the interpreter is gone. */
	int (*read_done)(struct sandbox *sb, int *status, int timeout_ms);
	/* At the reset, after the call's cgroup is gone: 0 when it may take
	 * another call, else -errno with why it is recycled. */
	int (*check)(struct sandbox *sb, char *detail, size_t dlen);
	/* At the reset, after the next run's cgroup is made: have the next
	 * call's process made ahead. 0 or -errno. */
	int (*prefork)(struct sandbox *sb, char *detail, size_t dlen);
	/* A call ended as only a warm call can: the tenant's calls of that
	 * script run cold for a while. */
	void (*refuse)(const struct sandbox *sb, const char *why);
	/* The sandbox ends: the state goes (the interpreter's processes end
	 * with the sandbox's cgroup). */
	void (*end)(struct sb_interp *in);
};

/* The process's forkserver, for the sandboxes prepared from now on.
 * Call it before any sandbox is prepared (from main()). */
void sandbox_use_interp(const struct sb_interp_ops *ops);

/* ---- what the forkserver reads of a sandbox and does in it ---- */

struct sb_interp *sandbox_interp(const struct sandbox *sb);
void sandbox_interp_set(struct sandbox *sb, struct sb_interp *in);

/* What it was prepared for, its tenant, and how many runs it took (this
 * one included, during a run). */
const struct sg_policy *sandbox_policy(const struct sandbox *sb);
const char *sandbox_tenant(const struct sandbox *sb);
unsigned sandbox_runs(const struct sandbox *sb);
gid_t sandbox_gid(const struct sandbox *sb);

/* Whether it cannot take another run (it is destroyed, not reused). */
bool sandbox_broken(const struct sandbox *sb);

/* Whether its runs relay TCP egress (a relay per run). */
bool sandbox_relays(const struct sandbox *sb);

/* Whether it outlives the request it serves (sandbox_may_keep()), and
 * whether the calling thread prepared it (its init ends with that
 * thread). */
bool sandbox_kept(const struct sandbox *sb);
bool sandbox_prepared_here(const struct sandbox *sb);

/* The next run's cgroup: its path; handed over to *to (the caller owns
 * its fds now, and the sandbox has none until sandbox_leaf_next()); a
 * fresh one made for the next run. 0 or -errno with `detail`. */
const char *sandbox_leaf_path(const struct sandbox *sb);
void sandbox_leaf_take(struct sandbox *sb, struct sb_leaf *to);
int sandbox_leaf_next(struct sandbox *sb, char *detail, size_t dlen);

/* Start spec->argv as the sandbox's main process in its next run's
 * cgroup, with in, out and err as its stdio (taken: closed here), and
 * wait (at most spec->timeout_ms) for its execve; it is left running.
 * 0, or -errno with `detail` (sb is then broken). */
int sandbox_start_main(struct sandbox *sb, const struct sandbox_spec *spec, int in, int out,
		       int err, char *detail, size_t dlen);

/* One message and n (1..8) fds (SCM_RIGHTS) on a unix socket. 0 or
 * -errno. */
int sandbox_send_fds(int sock, const void *buf, size_t len, const int *fds, int n);

/* Whether the kernel's record says the policy's exec rule refused an
 * exec in the sandbox (its last run). */
bool sandbox_exec_refused(const struct sandbox *sb);

#endif
