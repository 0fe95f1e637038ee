/* Batch mode's pinned artifacts (see src/exec/artifact.h): checked before
 * the first attempt, run as the checked bytes, and looked up in the
 * revocation list again before each retry. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "artifact.h"
#include "exec_internal.h"
#include "lib/clock.h"
#include "lib/log.h"

bool exec_artifacts_refused(const struct exec_ctx *ctx, const char *batch_id,
			    struct artifact_run *a, struct tenant_slot *slot, uint64_t start_ms,
			    struct exec_result *res)
{
	char why[EXEC_DETAIL_MAX];
	enum sg_cause cause;
	int err = artifact_prepare(ctx->policy, ctx->argv, a, why, sizeof(why));

	if (!err)
		return false;
	artifact_run_free(a);
	tenant_slot_release(slot);
	/* The tenant's to fix (a changed or revoked artifact): never retried,
	 * and no run is started to find out. */
	cause = err == -EPERM ? SG_CAUSE_TENANT_POLICY_VIOLATION : SG_CAUSE_PLATFORM_ERROR;
	if (cause == SG_CAUSE_PLATFORM_ERROR && strncmp(why, "platform error", 14))
		snprintf(res->detail, sizeof(res->detail),
			 "platform error: checking the pinned artifacts: %s", why);
	else
		snprintf(res->detail, sizeof(res->detail), "%s", why);
	sg_info("exec: %s/%s refused before it ran: %s", ctx->tenant, batch_id, res->detail);
	res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start_ms;
	res->cause = exec_book_refusal(ctx, "batch", batch_id, cause, res->wall_ms, res->detail,
				       sizeof(res->detail));
	return true;
}

void exec_artifacts_apply(const struct artifact_run *a, struct sandbox_spec *spec)
{
	if (a->argv)
		spec->argv = a->argv;
	if (a->n_files) {
		spec->files = a->files;
		spec->n_files = a->n_files;
	}
}

bool exec_artifacts_revoked(const struct exec_ctx *ctx, const struct artifact_run *a, char *detail,
			    size_t len)
{
	char why[EXEC_DETAIL_MAX];
	size_t n;

	if (!artifact_recheck(ctx->policy, a, why, sizeof(why)))
		return false;
	n = strlen(detail);
	snprintf(detail + n, len - n, "%sthe retry is refused: %s", n ? "; " : "", why);
	return true;
}
