/* The agent's end of the control socket: newline-delimited JSON requests,
 * one JSON reply line per request, in order, from root peers only
 * (SO_PEERCRED). A request's integer "id", when it has one, is echoed in
 * its reply, so that a client can tell a late reply to an earlier request
 * from the one it waits for. The server knows the protocol, not the agent: the agent
 * hands it a table of handlers, one per "op", so the protocol is tested
 * with fake handlers and no agent (tests/unit/test_control.c).
 *
 * The loop that calls control_handle() must never stall on a client:
 * sockets are non-blocking, each client's replies queue in a buffer of
 * its own (a client that does not read stalls only itself, and is dropped
 * when its queue passes CONTROL_OUT_MAX), requests are read only while
 * that client's queue is short, and a full client table evicts the client
 * idle longest instead of refusing the newcomer. */
#ifndef SG_CONTROL_SERVER_H
#define SG_CONTROL_SERVER_H
#include <stddef.h>
#include <jansson.h>

#define CONTROL_LINE_MAX    65536       /* one request line */
#define CONTROL_OUT_MAX     (64u << 20) /* queued replies of one client */
#define CONTROL_MAX_CLIENTS 1024

/* A handler gets the parsed request (borrowed) and returns the reply
 * (owned by the server), NULL for an out-of-memory error reply. */
typedef json_t *(*control_handler)(void *ctx, json_t *req);

struct control_op {
	const char *op;
	control_handler fn;
};

struct control_server;

/* Listen on `path` (mode 0600, its directory created). `ops` must outlive
 * the server. NULL with errno on failure (logged). */
struct control_server *control_open(const char *path, const struct control_op *ops, size_t n_ops,
				    void *ctx);
void control_close(struct control_server *cs);

/* An epoll fd that is readable when a client needs service. */
int control_fd(struct control_server *cs);

/* Serve whatever is ready without blocking. */
void control_handle(struct control_server *cs);

/* {"ok": false, "error": "<msg>"} */
json_t *control_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Clients connected now (tests, status). */
size_t control_clients(const struct control_server *cs);

#endif
