/* The executor's side of the channel to the node agent (a Unix socket,
 * default /run/sandguard/agent.sock). Every call is optional: with no agent
 * the executor still runs on its own layers, and a telemetry outage never
 * fails a batch. Outcomes do not travel here: they are booked in the
 * journal (telemetry/journal.h), which the agent folds.
 *
 * The connection survives what a loaded node does to it: each request
 * carries an id the agent echoes, so a late reply to an earlier call (one
 * that timed out) is recognized and skipped, never taken for the next
 * call's; a reply of any size is read whole; and a connection the agent
 * closed (a restart) is opened again and the request sent once more.
 * Failures are warnings. */
#ifndef SG_AGENT_CLIENT_H
#define SG_AGENT_CLIENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SG_AGENT_SOCK      "/run/sandguard/agent.sock"
#define SG_AGENT_REPLY_MAX (64u << 20) /* a longer reply is refused */

struct agent_conn;

/* NULL when no agent answers at `sock_path` (NULL = $SANDGUARD_AGENT_SOCK or
 * the default). */
struct agent_conn *agent_connect(const char *sock_path);
void agent_close(struct agent_conn *c);

/* Register a sandbox cgroup before any tenant code runs in it and wait
 * (bounded by timeout_ms) until the agent enforces policy on it.
 * Returns 0, or -errno: the caller decides (require_agent) whether that is
 * fatal; -EXDEV (the agent resolves policy paths in another root
 * filesystem than this executor's) is a platform error in every case. */
int agent_register(struct agent_conn *c, const char *tenant, const char *sandbox,
		   const char *run_id, const char *batch_id, uint64_t cgroup_id,
		   const char *scratch, int timeout_ms);

/* Ask the agent to compile a tenant's own policy file into a policy slot
 * now (an executor found it missing from the pins). 0, or -errno with
 * `why` saying what the agent answered. */
int agent_compile(struct agent_conn *c, const char *tenant, int timeout_ms, char *why, size_t len);

/* After a successful agent_register(): whether the agent refuses
 * disallowed opens itself, before they happen (BPF LSM mode). In fallback
 * mode it only detects them after the fact, so the executor keeps its own
 * preventive read restriction (Landlock). */
bool agent_files_preventive(const struct agent_conn *c);

/* Whether the agent killed the sandbox, and for which rule (enum sg_rule).
 * Waits up to timeout_ms for a kill notice in flight. Returns 1 killed,
 * 0 not killed, -errno on a broken channel. */
int agent_kill_verdict(struct agent_conn *c, uint64_t cgroup_id, int *rule, int timeout_ms);

/* The agent's status document (JSON text, caller frees), for the CLI. */
int agent_status(struct agent_conn *c, char **json_text);

/* Any read-only query ({"op": op}), its reply as JSON text (caller frees):
 * "status", "ledger". 0, -ECOMM (no answer), -EPROTO (refused) or -ENOMEM. */
int agent_query(struct agent_conn *c, const char *op, int timeout_ms, char **json_text);

/* Unregister (the sandbox is gone). */
int agent_unregister(struct agent_conn *c, uint64_t cgroup_id);

#endif
