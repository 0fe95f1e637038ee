/* The executor refuses a pinned artifact (a changed digest, a revoked
 * one, a missing or wrong signature, the scanner's rejection: see
 * src/exec/artifact.h) before anything runs, and books the refusal
 * marked as such. The journal's fold brings the booking here, and the
 * tenant's event stream gets an `artifact_refused` line, as it gets one
 * for each refusal the kernel makes: on-call sees it with `sandguard
 * events --type artifact_refused`, next to the tenant's other refusals.
 * Without the agent there is no event stream; the booking stays, and
 * the agent's fold makes the event when it next runs. */
#include <string.h>
#include "agent.h"
#include "agent_artifact.h"
#include "lib/json_text.h"
#include "telemetry/event_json.h"

void agent_artifact_observe(struct agent *a, const struct sg_outcome *o)
{
	struct event_ctx ev = { .node = a->opts.node,
				.tenant = o->tenant,
				.sandbox = o->sandbox[0] ? o->sandbox : NULL,
				.batch_id = o->batch_id[0] ? o->batch_id : NULL,
				.run_id = o->run_id[0] ? o->run_id : NULL,
				.boot_to_real_ns = a->boot_to_real_ns };
	char line[EVENT_JSON_MAX];
	json_t *detail;

	if (!o->artifact_refused[0])
		return;
	/* what was refused and why; the attempt: 0 before the first run,
	 * else the attempt whose retry a revocation stopped */
	detail = json_pack(
		"{s:o, s:i, s:s}", "why",
		json_string_lossy(o->artifact_refused,
				  strnlen(o->artifact_refused, sizeof(o->artifact_refused))),
		"attempt", (int)o->attempt, "cause", cause_name(o->cause));
	if (detail && event_userspace_json(&ev, o->ts_ms * 1000000ull, SG_EV_ARTIFACT_REFUSED,
					   SG_ACTION_DENIED, -1, detail, line, sizeof(line)) > 0)
		agent_emit_line(a, o->tenant, line);
	json_decref(detail);
}
