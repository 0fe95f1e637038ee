/* Verifier mode for a compiled language: the program is built once, in a
 * sandbox of its own, and every test then runs the built program in a
 * sandbox of its own, as a Python program's tests do (exec_verify.c). The
 * caller (serve's /v1/verify, `sandguard exec --tests --language`) says
 * how to build and how to run: the languages live in src/serve/serve_lang.c.
 *
 * The compile is one of the request's runs: admitted with the request's
 * first slot, booked (mode "verify", no test, non-final) like a test's
 * run, its platform errors retried within the policy's attempt budget, a
 * timeout on a node without room confirmed (exec_confirm.c). A compile
 * that fails for the program's own reason (the compiler exits non-zero,
 * times out, crashes, or leaves a program larger than the output cap) is
 * the request's one verdict: reward 0, booked once as the request's
 * final, with the compiler's message as the result's stderr and in its
 * detail; no test runs. The built program reaches each test's scratch
 * read-only (mode 0555, or 0444 for a jar) and the test's sandbox may map
 * it executable (allow_exec_in_scratch), as /run_code's run step: the
 * agent's exec rule still refuses an exec of it, so the run command goes
 * through the dynamic loader. */
#ifndef SG_VERIFY_COMPILE_H
#define SG_VERIFY_COMPILE_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "exec.h"

struct exec_build {
	char *const *compile;             /* the compiler's argv */
	const struct sandbox_file *files; /* the source and what the compiler needs */
	size_t n_files;
	const char *artifact;   /* what the compile leaves in the scratch */
	unsigned artifact_mode; /* in each test's scratch: 0555, or 0444 (a jar) */
	uint64_t timeout_ms;    /* the compile's deadline; 0: the run's */
};

/* What the result says of the compile ("compile" in exec_result_json). */
struct verify_compile_result {
	enum sg_cause cause; /* ok: built */
	bool timed_out;
	bool has_return_code;
	int return_code;
	uint64_t wall_ms;
	uint32_t attempts;
	size_t program_bytes;
};

/* Compile ctx->build in the request's first slot. 0 with *program set
 * (malloc'd data, res->compile filled); 1 when the request's verdict is
 * decided already (a compile error: res->cause ok, reward 0; or a
 * platform error: res->cause platform_error), with res->detail and
 * res->err set; -ENOMEM. Its bookings go to `group` (exec_booking.group). */
int verify_compile(const struct exec_ctx *ctx, const char *batch_id, struct sandbox_file *program,
		   struct exec_result *res, struct journal_group *group);

/* {"status": "ok"|"error"|"timeout"|"platform_error", "return_code",
 *  "wall_ms", "attempts", "program_bytes"} */
json_t *verify_compile_json(const struct verify_compile_result *c);

#endif
