/* One run in a prepared sandbox, shared by sandbox_exec.c (the run and
 * its watch), sandbox_start.c (its start, and init's DONE) and
 * sandbox_outcome.c (verdict and outputs). Not an API: see
 * src/sandbox/sandbox.h. */
#ifndef SG_SANDBOX_RUN_H
#define SG_SANDBOX_RUN_H
#include <stdbool.h>
#include <stdint.h>
#include "sandbox.h"
#include "sandbox_child.h"
#include "sandbox_io.h"

/* Everything one run holds. */
struct run {
	struct sandbox *sb;
	const struct sandbox_spec *spec;
	struct sandbox_result *res;
	uint64_t timeout_ms;
	int in[2], out[2], err[2], report[2];
	struct sb_child_report done; /* init's DONE */
	bool done_read;
	/* init (or the warm interpreter) hung up before main's execve was
	 * seen: the report pipe alone says whether the tenant's code ran. */
	bool ctl_gone;
	/* Main's own execve was refused by the tenant's exec rule (LSM mode):
	 * the run goes on to its end, and is the tenant's (sb_run_decide()). */
	bool exec_refused;
	/* A run of the tenant's command (sandbox_exec()), not a warm
	 * interpreter's start, whose refusal is the start's failure. */
	bool tenant_command;
	/* The errno of main's execve of a command that is the tenant's own
	 * choice (spec->command_is_tenants) and cannot be executed; 0. The
	 * run goes on to its end as an exit with 127 or 126. */
	int exec_failed;
};

/* res->detail set; returns err. */
int sb_run_fail(struct run *r, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The run's START, with its fds, to the sandbox's init (or, the first
 * run, to its main forked ahead); the run's ends of the fds are closed
 * whatever happens. 0, or -errno with res->detail (the sandbox broken when
 * the START could not be sent). */
int sb_run_send_start(struct run *r);

/* A warm call: the run's fds to the sandbox's warm interpreter, which
 * forks the call's process (sandbox_interp.h). 0, or -errno with detail. */
int sb_run_send_call(struct run *r);

/* Until main's execve (or its failure to start), at most until deadline
 * (CLOCK_MONOTONIC ms), reading init's messages meanwhile. 0 when the
 * tenant's code started (or its exec was refused by the tenant's own exec
 * rule: r->exec_refused), else -errno with res->detail. */
int sb_run_wait_exec(struct run *r, uint64_t deadline);

/* Main ended, or is being killed: init's (or the warm interpreter's) DONE
 * into r->done, waiting at most wait_ms. Init's, when `owe`, is not waited
 * for at all: sandbox_reset() reads it before another run. A DONE that
 * does not come leaves the sandbox broken. */
void sb_run_read_done(struct run *r, int wait_ms, bool owe);

/* What ended the run (res->end, exit code, signal, rule). Returns 0, or a
 * platform error: -ECHILD when nothing explains an init (or warm
 * interpreter) that died without a word, -ENOMEM when an OOM killer not
 * of the sandbox's own limit killed in it. pump_end: enum sb_pump_end. */
int sb_run_decide(struct run *r, int pump_end);

/* stdout, stderr and the fetched files into the result; 0 or -ENOMEM. */
int sb_run_take_outputs(struct run *r, struct sb_pump *pump);
void sb_run_free_outputs(struct sandbox_result *res);

#endif
