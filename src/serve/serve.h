/* sandguard serve: the trainer's HTTP API over the executor, on
 * libmicrohttpd (one thread per connection, internal polling).
 *
 *   POST /run_code                  SandboxFusion-compatible run of one program
 *   POST /tenants/<tenant>/run_code the same, tenant in the path (for clients
 *                                   such as verl that cannot set a header)
 *   POST /v1/score                  a reward program over a batch (= sandguard exec --batch)
 *   POST /v1/verify                 verifier mode (= sandguard exec --tests)
 *   GET  /healthz                   200 {"status": "ok", "running", "waiting"}
 *
 * The tenant comes from the X-Sandguard-Tenant header, the path, or (native
 * API) the body's "tenant"; when several are given they must agree; with
 * none it is "default". Its policy is read from the policy directory for
 * every request, so a policy change applies to the next request.
 *
 * Admission: at most max_concurrency requests run at once (all tenants),
 * and at most the tenant policy's limits.concurrency of one tenant. A
 * request beyond a cap waits in a FIFO queue (at most `queue` requests,
 * at most `tenant_queue` of one tenant) for up to the policy's
 * queue_timeout_ms (no wait with on_excess "refuse"). Refused: 429 when the
 * tenant's own cap or queue share is what blocked it, 503 when the
 * server's was; both with Retry-After. Bad input (malformed JSON, unknown
 * language or key, bad base64, a body over max_body) is a 4xx with a
 * message and is never booked. See docs/trainer-integration.md. */
#ifndef SG_SERVE_H
#define SG_SERVE_H
#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"

#define SERVE_MAX_BODY_DEFAULT        (8u << 20)
#define SERVE_QUEUE_DEFAULT           64
#define SERVE_TENANT_QUEUE_DEFAULT    32
#define SERVE_MAX_CONNECTIONS_DEFAULT 512
#define SERVE_IDLE_TIMEOUT_S          60 /* a silent client is dropped */
#define SERVE_LANGUAGES_DEFAULT       "python"

struct serve_config {
	const char *listen; /* "ADDR:PORT", numeric; port 0 picks one */
	const char *policy_dir;
	size_t max_body;          /* bytes */
	uint32_t max_concurrency; /* requests running at once, all tenants */
	uint32_t queue;           /* requests waiting, all tenants */
	uint32_t tenant_queue;    /* requests waiting, one tenant */
	uint32_t max_connections;
	const char *languages; /* "python" or "python,cpp" */
	sandbox_runner run;    /* NULL = sandbox_run (tests inject a fake) */
};

struct serve;

/* Set up languages and admission, bind and start serving. Returns 0 and
 * *out, or a negative errno with a message logged. */
int serve_start(const struct serve_config *cfg, struct serve **out);
uint16_t serve_port(const struct serve *s);

/* Stop accepting, answer every queued request 503, wait for the running
 * ones (each ends by its deadline), then free everything. Safe on NULL. */
void serve_stop(struct serve *s);

#endif
