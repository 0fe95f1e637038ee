/* `sandguard exec` itself: its arguments, its input, the run and the one
 * JSON result, with its exit code. The command line runs it cold (in its
 * own process); a long-lived executor runs it warm, for a client that
 * handed it its arguments, working directory and stdin (warm_server.h).
 * The same code both ways: the same checks, usage errors, result and
 * exit codes. */
#ifndef SG_WARM_COMMAND_H
#define SG_WARM_COMMAND_H
#include <stdio.h>
#include "exec/exec.h"

struct warm_io {
	FILE *out;                /* the result (stdout) */
	FILE *err;                /* usage errors (stderr); log lines go where sg_log_to() says */
	int in_fd;                /* what "--batch -" and "--tests -" read */
	const char *path;         /* "cold" or "warm", said in the result */
	struct agent_conn *agent; /* NULL: connect to the agent here */
	const struct exec_sandboxes *sandboxes; /* NULL: prepared here, destroyed after the
						   result is out */
	bool reap_elsewhere; /* a long-lived executor reaps orphans on its own thread */
	int caller_fd;       /* a warm client's connection (exec_ctx.caller_fd); 0: none */
};

/* `exec --tests FILE --language L --code FILE`: how L's code is built
 * and run. The languages are src/serve's, above this component: the
 * command line sets them (warm_exec_set_languages()). plan() sets
 * ctx->argv and ctx->build, and *hold for release(); or returns -errno
 * with `err` (unknown or missing language, refused by the policy). */
struct warm_languages {
	int (*plan)(const char *language, const char *code, size_t len, const struct sg_policy *p,
		    const char *tenant, struct exec_ctx *ctx, void **hold, char *err,
		    size_t err_len);
	void (*release)(void *hold);
};
void warm_exec_set_languages(const struct warm_languages *l);

/* Run `sandguard exec` with argv[0] = "exec". Returns the exit code: 0 ok,
 * 1 a tenant cause, 2 a platform error, 64 usage. */
int warm_exec_command(int argc, char **argv, const struct warm_io *io);

#endif
