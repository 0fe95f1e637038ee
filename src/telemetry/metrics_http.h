/* The agent's HTTP endpoint for Prometheus and Kubernetes probes, served by
 * libmicrohttpd on its own thread (internal polling, at most
 * METRICS_HTTP_MAX_CONNECTIONS clients at once, idle clients dropped after
 * METRICS_HTTP_TIMEOUT_S).
 *
 *   GET /metrics   200, the registry in the text format, Content-Type
 *                  "text/plain; version=0.0.4; charset=utf-8"
 *   GET /healthz   200 "ok": liveness, the process answers
 *   GET /readyz    200 "ok", or 503 "not ready: <reason>" from the caller's
 *                  readiness callback (404 when none was given)
 *   other paths    404
 *   other methods  405 with "Allow: GET, HEAD" (HEAD is a GET without body)
 *
 * The address is numeric, host and port both required: "127.0.0.1:9464",
 * "0.0.0.0:9464", "[::1]:9464", "[::]:9464". Port 0 picks a free port (see
 * metrics_http_port()). Names such as "localhost" are refused rather than
 * resolved, so what is bound is exactly what was written.
 */
#ifndef SG_METRICS_HTTP_H
#define SG_METRICS_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "metrics.h"

#define METRICS_HTTP_MAX_CONNECTIONS 16
#define METRICS_HTTP_TIMEOUT_S       10

struct metrics_http;

/* Readiness: return true when ready, else false with a one-line reason in
 * `reason` (e.g. "egress programs not attached"). Runs on the HTTP thread,
 * so it must do its own locking. */
typedef bool (*metrics_ready_fn)(void *ctx, char *reason, size_t len);

/* Bind, listen and start serving `reg`. `ready` may be NULL. Returns 0 and
 * *out, or a negative errno (-EINVAL bad address, -EADDRINUSE, -EACCES, ...)
 * with a message logged. */
int metrics_http_start(const char *addr_port, struct metrics_registry *reg, metrics_ready_fn ready,
		       void *ready_ctx, struct metrics_http **out);

/* The bound port (useful after binding port 0). */
uint16_t metrics_http_port(const struct metrics_http *h);

/* Stop serving, close the socket, free h. Safe on NULL. */
void metrics_http_stop(struct metrics_http *h);

#endif
