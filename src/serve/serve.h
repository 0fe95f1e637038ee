/* sandguard serve: the trainer's HTTP API over the executor, on
 * libmicrohttpd (one I/O thread with epoll; a worker thread per request
 * whose body is in).
 *
 *   POST /run_code              SandboxFusion-compatible run of one program
 *   POST /t/<token>/run_code    the same, authenticated by the path (for
 *                               clients such as verl that can only be given
 *                               a URL); /t/<token>/v1/... likewise
 *   POST /v1/score              a reward program over a batch (= sandguard exec --batch)
 *   POST /v1/verify             verifier mode (= sandguard exec --tests)
 *   GET  /healthz               200 while the process serves (liveness)
 *   GET  /readyz                200 when it should get traffic (readiness)
 *
 * Tenants. With --tokens DIR (src/serve/serve_auth.h) every request must
 * carry a tenant's token, in the path or as "Authorization: Bearer"; the
 * token names the tenant, and any other naming (X-Sandguard-Tenant, the
 * body's "tenant") must agree. Without a token, or with an unknown one:
 * 401; a token of another tenant than the one named: 403. Those requests
 * are answered from their headers alone: never run, never booked, and no
 * tenant is created anywhere. Without --tokens the server listens only on
 * loopback and the tenant is whatever the client names (header, the path
 * /tenants/<tenant>/run_code, or the body), "default" when none.
 *
 * Admission: at most max_concurrency requests run at once (all tenants),
 * and at most the tenant policy's limits.concurrency of one tenant. A
 * request beyond a cap waits in a FIFO queue (at most `queue` requests,
 * at most `tenant_queue` of one tenant). A /run_code request waits only as
 * long as it can still finish within what its client waits for it
 * (compile_timeout + run_timeout + 10 s, as verl's client does); past
 * that, or when any cap refuses it, it is answered 504 with Retry-After,
 * the one status verl retries. /v1/... wait up to the policy's
 * queue_timeout_ms and are refused 429 (the tenant's cap) or 503 (the
 * server's). A queued request whose client hung up is dropped.
 *
 * HTTP limits: a connection must deliver its request line and headers
 * within header_timeout_s (counted from accept, or from the previous
 * response on a kept-alive connection) and its body within body_timeout_s
 * of the headers; a connection silent for idle_timeout_s is closed; past
 * max_connections a new connection gets a 503 and is closed. See
 * docs/trainer-integration.md. */
#ifndef SG_SERVE_H
#define SG_SERVE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"
#include "exec/exec_command.h"

#define SERVE_MAX_BODY_DEFAULT     (8u << 20)
#define SERVE_MAX_BUFFERED_DEFAULT (256u << 20)
/* A request body nests at most this deep (serve_route.c, check_shape()). */
#define SERVE_JSON_DEPTH_MAX 64
/* What a parsed body's tree is held at, per value, from --max-buffered. */
#define SERVE_JSON_VALUE_BYTES        256
#define SERVE_QUEUE_DEFAULT           64
#define SERVE_TENANT_QUEUE_DEFAULT    32
#define SERVE_MAX_CONNECTIONS_DEFAULT 4096
#define SERVE_MAX_TESTS_DEFAULT       512
#define SERVE_HEADER_TIMEOUT_S        10
#define SERVE_BODY_TIMEOUT_S          60
#define SERVE_IDLE_TIMEOUT_S          15
#define SERVE_LANGUAGES_DEFAULT       "python"

struct serve_config {
	const char *listen; /* "ADDR:PORT", numeric; port 0 picks one */
	const char *policy_dir;
	const char *tokens_dir;   /* NULL: no authentication (loopback only) */
	size_t max_body;          /* bytes of one request body */
	size_t max_buffered;      /* bytes of request bodies held at once */
	uint32_t max_concurrency; /* requests running at once, all tenants */
	uint32_t queue;           /* requests waiting, all tenants */
	uint32_t tenant_queue;    /* requests waiting, one tenant */
	uint32_t max_connections;
	uint32_t max_tests; /* tests in one /v1/verify request */
	uint32_t header_timeout_s, body_timeout_s, idle_timeout_s;
	const char *languages; /* "python" or "python,cpp,java,..." */
	/* The /run_code build cache (src/serve/run_build_cache.h): MiB per
	 * tenant (0: off), in build_cache_dir (NULL: <state dir>/build-cache). */
	uint64_t build_cache_mb;
	const char *build_cache_dir;
	sandbox_runner run; /* NULL = sandbox_run (tests inject a fake) */
};

struct serve;

/* `sandguard exec --tests --language L --code FILE`: L's build and run
 * steps as /run_code's (serve_verify_lang.c), for exec_command_set_languages(). */
extern const struct exec_languages serve_exec_languages;

/* Set up languages, tokens and admission, bind and start serving. Returns
 * 0 and *out, or a negative errno with a message logged (-EINVAL for a
 * configuration error: bad flags, bad tokens, no tokens on a non-loopback
 * address). */
int serve_start(const struct serve_config *cfg, struct serve **out);
uint16_t serve_port(const struct serve *s);

/* Drain and stop: /readyz turns 503, queued and new requests are refused
 * (504 on /run_code, 503 elsewhere) while the running ones finish (each by
 * its deadline) and their replies go out; then close everything. Safe on
 * NULL. */
void serve_stop(struct serve *s);

#endif
