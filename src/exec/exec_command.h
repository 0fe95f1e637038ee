/* `sandguard exec`'s body: given its parsed request, read the input, load
 * the tenant's policy, run the batch or the tests and print one JSON
 * result, with its exit code.
 *
 * The command line is parsed once, by the CLI (src/cli/cmd_exec.c), into
 * a struct exec_request. A cold run calls exec_command_run() in the same
 * process; a warm one hands the request to a long-lived executor
 * (src/executor/executor_proto.h carries it as it is), which calls the same
 * function with its own struct exec_io: the same checks, errors, result
 * and exit codes either way. */
#ifndef SG_EXEC_COMMAND_H
#define SG_EXEC_COMMAND_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "exec.h"

#define EXEC_EXIT_USAGE 64  /* the CLI's SG_EXIT_USAGE */
#define EXEC_ID_MAX     127 /* run and batch ids fit a booking untruncated */

/* What the command line asked for. Strings are the caller's; NULL: not
 * given. exec_request_check() says what every request satisfies. */
struct exec_request {
	const char *tenant;     /* [a-z0-9][a-z0-9_-]{0,62} */
	const char *policy_dir; /* NULL: $SANDGUARD_POLICY_DIR or the default */
	const char *batch_path; /* exactly one of batch_path and tests_path; "-": stdin */
	const char *tests_path;
	const char *run_id;   /* 1..EXEC_ID_MAX bytes */
	const char *batch_id; /* tests only; 1..EXEC_ID_MAX bytes; NULL: made up */
	const char *language; /* tests only, with code_path ("-": stdin), and no argv */
	const char *code_path;
	uint64_t timeout_ms; /* 0: the policy's; else at most the policy's */
	bool grader_set;     /* tests only: grader chosen; else the policy's */
	uint8_t grader;      /* enum sg_grader */
	char *const *argv;   /* the command, NULL-ended; NULL with language */
};

/* Where the command's input and output go, and what the process running
 * it lends it. */
struct exec_io {
	FILE *out;                /* the result (stdout) */
	FILE *err;                /* request errors (stderr); log lines go where sg_log_to() says */
	int in_fd;                /* what "-" reads */
	const char *path;         /* "cold" or "warm", said in the result */
	struct agent_conn *agent; /* NULL: connect to the agent here */
	const struct exec_sandboxes *sandboxes; /* NULL: prepared here, destroyed after the
						   result is out */
	bool reap_elsewhere; /* a long-lived executor reaps orphans on its own thread */
	int caller_fd;       /* a warm client's connection (exec_ctx.caller_fd); 0: none */
};

/* `exec --tests FILE --language L --code FILE`: how L's code is built
 * and run. The languages are src/serve's, above this component: the
 * command line sets them (exec_command_set_languages()). plan() sets
 * ctx->argv and ctx->build, and *hold for release(); or returns -errno
 * with `err` (unknown or missing language, refused by the policy). */
struct exec_languages {
	int (*plan)(const char *language, const char *code, size_t len, const struct sg_policy *p,
		    const char *tenant, struct exec_ctx *ctx, void **hold, char *err,
		    size_t err_len);
	void (*release)(void *hold);
};
void exec_command_set_languages(const struct exec_languages *l);

/* Whether r is a request the command runs: what the CLI's parser ensures
 * with its usage errors, checked again for a request that came over a
 * socket (src/executor/executor_proto.c). */
bool exec_request_check(const struct exec_request *r);

/* Whether the request reads the caller's stdin (an input or the code is
 * "-"). */
bool exec_request_reads_stdin(const struct exec_request *r);

/* The caller's error, in the command line's words: "sandguard exec: MSG"
 * and a pointer to --help on f. Returns EXEC_EXIT_USAGE. */
int exec_usage_error(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Run the request. Returns the exit code: 0 ok, 1 a tenant cause, 2 a
 * platform error, 64 the caller's error (unreadable or malformed input,
 * a timeout past the policy's, a language this node cannot build). */
int exec_command_run(const struct exec_request *r, const struct exec_io *io);

#endif
