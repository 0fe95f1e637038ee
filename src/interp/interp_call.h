/* One call of a sandbox's forkserver parent (interp_call.c); the hook's
 * send_call, read_done and prefork (src/sandbox/sandbox_interp.h say
 * what each returns). */
#ifndef SG_INTERP_CALL_H
#define SG_INTERP_CALL_H
#include <stddef.h>
#include "interp_state.h"

struct sandbox;
struct sandbox_spec;

/* Send the parent a PREP for the sandbox's next run's (fresh) cgroup:
 * the call's child is forked into it now, off the call's path. */
int interp_prefork(struct sandbox *sb, char *detail, size_t dlen);

/* Hand the parent one call: its directory (a verifier's test: the
 * sandbox's scratch), argv and fds. */
int interp_call(struct sandbox *sb, const struct sandbox_spec *spec, const int fds[4], char *detail,
		size_t dlen);

/* The parent's DONE, waiting at most timeout_ms: 1 with *status, 0 on
 * timeout, -EPIPE when the parent is gone (or spoke out of turn). */
int interp_read_done(struct sandbox *sb, int *status, int timeout_ms);

/* One message from the parent, waiting at most timeout_ms: 1, 0 on
 * timeout, -EPIPE on a bad message, -errno. */
int interp_read_msg(const struct sb_interp *w, struct interp_msg *m, int timeout_ms);

/* detail set from fmt; returns err. */
int interp_fail(char *detail, size_t dlen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
