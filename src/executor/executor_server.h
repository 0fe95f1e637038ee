/* The long-lived executor's local socket (src/executor/executor_proto.h): each
 * client's request (the `sandguard exec` its CLI parsed) runs here, by
 * exec_command_run() (src/exec/exec_command.h), on a thread of its own, in
 * the client's working directory with the client's stdin, its sandboxes taken
 * from the warm pool; its stdout and stderr go back over the socket. The
 * result is booked (the journal append) before the answer is sent; the
 * sandbox's teardown follows on the pool's thread. */
#ifndef SG_WARM_SERVER_H
#define SG_WARM_SERVER_H
#include <stddef.h>

struct pool;
struct agent_shared;

struct executor_server_opts {
	struct pool *pool;
	struct agent_shared *agent; /* shared by every run */
	unsigned max_clients;       /* at once; beyond, clients run cold. 0: 4096 */
};

struct executor_server;

/* Listen on <run>/executor.sock (refused when another executor listens
 * there; a stale socket is replaced). 0, or -errno with `detail`. */
int executor_server_start(const struct executor_server_opts *o, struct executor_server **out,
			  char *detail, size_t len);

/* The socket's path. */
const char *executor_server_path(const struct executor_server *s);

/* Stop taking clients, wait for the runs under way, remove the socket. */
void executor_server_stop(struct executor_server *s);

#endif
