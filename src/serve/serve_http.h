/* The HTTP side of `sandguard serve` (serve_http.c): libmicrohttpd on one
 * I/O thread, a worker thread per request whose body is in. */
#ifndef SG_SERVE_HTTP_H
#define SG_SERVE_HTTP_H
#include <stdint.h>

/* Workers beyond max_concurrency + queue: requests being validated and
 * refused, or answered /readyz, while the queue is full. A worker is a
 * thread with a small stack. */
#define SERVE_EXTRA_WORKERS 128

/* A worker's stack. Whatever recurses on a request's data or a run's
 * output on a worker must be bounded to fit it with room to spare: the
 * scratch reset's walk (SB_SCRATCH_RESET_DEPTH levels of ~200 bytes), the
 * call-based judge's parse and compare (PY_JSON_DEPTH_MAX levels of ~80
 * bytes; unit test_py_equal runs them on a stack of this size), jansson's
 * parse, encode and free of a request (SERVE_JSON_DEPTH_MAX levels of
 * ~300 bytes: its encoder and free have no bound of their own). */
#define SG_SERVE_WORKER_STACK (256u << 10)

struct serve;
struct serve_http;

/* Serve s's requests on listen_fd (taken over, closed on failure too).
 * 0 with *out, or -errno with a message logged. */
int serve_http_start(struct serve *s, int listen_fd, struct serve_http **out);

/* Wait for every worker (the caller closed the gate first), give the
 * replies grace_s to go out, then close everything. Safe on NULL. */
void serve_http_stop(struct serve_http *h, unsigned grace_s);

/* Take `bytes` more of the --max-buffered budget the request bodies share
 * (a body's parsed tree, estimated before it is built), or refuse: 0, or
 * -ENOSPC when the budget is spent now (retry later), -E2BIG when it could
 * never hold that much. serve_http_release() gives it back. */
int serve_http_hold(struct serve_http *h, size_t bytes);
void serve_http_release(struct serve_http *h, size_t bytes);

struct serve_http_counts {
	uint32_t connections, workers, in_flight;
	uint64_t header_timeouts;     /* connections shut for a header deadline */
	uint64_t refused_connections; /* answered 503 at the connection cap */
};
void serve_http_counts(struct serve_http *h, struct serve_http_counts *out);

#endif
