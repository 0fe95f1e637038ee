/* The local socket between `sandguard exec` and a long-lived executor
 * (`sandguard executor`): <run>/executor.sock,
 * SOCK_STREAM, root-only (mode 0600, and the executor serves root peers
 * only). One request per connection:
 *
 *   client -> executor   struct warm_request, then `len` bytes: the exec
 *                        command's argv (argv[0] = "exec") and the client's
 *                        SANDGUARD_* environment, NUL-ended strings; with
 *                        the head, SCM_RIGHTS: the client's working
 *                        directory (O_PATH) and, when open, its stdin.
 *   executor -> client   struct warm_reply WARM_STARTED just before the
 *                        request leaves its first trace that outlives the
 *                        executor (src/lib/first_trace.h: its in-flight run
 *                        record, or a booking such as an admission
 *                        refusal's), if it ever does; then, when the
 *                        command is done, a struct warm_reply with its exit
 *                        code, then out_len bytes for the client's stdout
 *                        and err_len for its stderr.
 *
 * The executor serves a client whose SANDGUARD_* environment is its own
 * (the same journal, cgroup root, run directory, slots, agent, policies:
 * warm_env_shared()); anything else, and any refusal before the command,
 * is code WARM_NOT_SERVED with the reason in the err bytes, and the client
 * runs cold. So it does when the connection ends before WARM_STARTED: the
 * request may have waited in an admission line or for a sandbox, but no run
 * of it began and nothing of it is booked or owed, so running it here books
 * it once (its stdin is handed over as a copy the client keeps, so it can).
 * After WARM_STARTED it never does: an executor that ends then leaves the
 * run's record (or its booking), and the next executor's reaper books it.
 * Libc only: the client side links nothing else. */
#ifndef SG_WARM_PROTO_H
#define SG_WARM_PROTO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define WARM_SOCKET      "executor.sock"
#define WARM_MAGIC       0x53475745u /* "SGWE" */
#define WARM_MAX_STRINGS (256u * 1024)
#define WARM_NOT_SERVED  (-1)
#define WARM_STARTED     (-2)
/* stdin read to a copy, at most: EXEC_INPUT_MAX and a byte (past which the
 * command refuses it whole anyway) */
#define WARM_MAX_STDIN ((256u << 20) + 1)
#define WARM_ENV_OFF   "SANDGUARD_WARM" /* =0: always cold; never compared */

struct warm_request {
	uint32_t magic;
	uint32_t argc, envc;
	uint32_t has_stdin; /* the second fd is the client's stdin */
	uint32_t len;       /* bytes of strings that follow */
};

struct warm_reply {
	uint32_t magic;
	int32_t code; /* the exit code, WARM_NOT_SERVED or WARM_STARTED */
	uint64_t out_len, err_len;
};

/* <run>/executor.sock ($SANDGUARD_RUN_DIR or /run/sandguard). 0 or -errno. */
int warm_socket_path(char *buf, size_t len);

/* Whether an environment entry ("NAME=value") is one the executor and its
 * client must agree on: every SANDGUARD_* but SANDGUARD_WARM. */
bool warm_env_shared(const char *entry);

/* All of it, or -errno (-EPIPE at EOF). */
int warm_send_all(int fd, const void *buf, size_t len);
int warm_recv_all(int fd, void *buf, size_t len);
/* The n parts in order, in as few sendmsg() calls as the socket takes
 * (one, for an answer that fits its buffer: the client wakes once). The
 * iovecs are consumed. 0 or -errno. */
int warm_send_iov(int fd, struct iovec *iov, int n);

#endif
