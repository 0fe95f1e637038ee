/* The local socket between `sandguard exec` and a long-lived executor
 * (`sandguard executor`): <run>/executor.sock,
 * SOCK_STREAM, root-only (mode 0600, and the executor serves root peers
 * only). One request per connection:
 *
 *   client -> executor   struct executor_request, then `len` bytes of
 *                        NUL-ended strings: the request's strings that are
 *                        set (`fields`, in executor_request_pack()'s order),
 *                        the command's argc strings, then the client's
 *                        envc SANDGUARD_* environment entries; with the
 *                        head, SCM_RIGHTS: the client's working directory
 *                        (O_PATH) and, when open, its stdin.
 *   executor -> client   struct executor_reply EXECUTOR_STARTED just before the
 *                        request leaves its first trace that outlives the
 *                        executor (src/lib/first_trace.h: its in-flight run
 *                        record, or a booking such as an admission
 *                        refusal's), if it ever does; then, when the
 *                        command is done, a struct executor_reply with its exit
 *                        code, then out_len bytes for the client's stdout
 *                        and err_len for its stderr.
 *
 * What travels is the request the CLI parsed (struct exec_request), not
 * its command line: the command line has one parser (src/cli/cmd_exec.c),
 * and the executor is a transport that runs exec_command_run() on what it
 * was handed. Strings, not JSON: paths and the command's arguments are
 * bytes, which need not be UTF-8.
 *
 * The executor serves a client whose SANDGUARD_* environment is its own
 * (the same journal, cgroup root, run directory, slots, agent, policies:
 * executor_env_shared()); anything else, and any refusal before the command,
 * is code EXECUTOR_NOT_SERVED with the reason in the err bytes, and the client
 * runs cold. So it does when the connection ends before EXECUTOR_STARTED: the
 * request may have waited in an admission line or for a sandbox, but no run
 * of it began and nothing of it is booked or owed, so running it here books
 * it once (its stdin is handed over as a copy the client keeps, so it can).
 * After EXECUTOR_STARTED it never does: an executor that ends then leaves the
 * run's record (or its booking), and the next executor's reaper books it.
 * The client's side is system calls and string copies: the whole of a warm
 * run's start is that process's. */
#ifndef SG_WARM_PROTO_H
#define SG_WARM_PROTO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "exec/exec_command.h"

#define EXECUTOR_SOCKET "executor.sock"
/* "SGW2": the parsed request. Was "SGWE" while the command line itself
 * travelled: either side refuses the other's head, and the client runs
 * cold. */
#define EXECUTOR_MAGIC       0x53475732u
#define EXECUTOR_MAX_STRINGS (256u * 1024)
#define EXECUTOR_NOT_SERVED  (-1)
#define EXECUTOR_STARTED     (-2)
/* stdin read to a copy, at most: EXEC_INPUT_MAX and a byte (past which the
 * command refuses it whole anyway) */
#define EXECUTOR_MAX_STDIN ((256u << 20) + 1)
#define EXECUTOR_ENV_OFF   "SANDGUARD_WARM" /* =0: always cold; never compared */

struct executor_request {
	uint32_t magic;
	uint32_t fields;    /* bit i: the request's string i (executor_proto.c) is sent */
	uint32_t argc;      /* the command's strings (0: --language) */
	uint32_t envc;      /* the client's SANDGUARD_* entries */
	uint32_t has_stdin; /* the second fd is the client's stdin */
	uint32_t len;       /* bytes of strings that follow */
	uint64_t timeout_ms;
	uint32_t grader; /* 0: the policy's; else enum sg_grader + 1 */
	uint32_t zero;   /* 0, as the head has no hole */
};

struct executor_reply {
	uint32_t magic;
	int32_t code; /* the exit code, EXECUTOR_NOT_SERVED or EXECUTOR_STARTED */
	uint64_t out_len, err_len;
};

/* <run>/executor.sock ($SANDGUARD_RUN_DIR or /run/sandguard). 0 or -errno. */
int executor_socket_path(char *buf, size_t len);

/* Whether an environment entry ("NAME=value") is one the executor and its
 * client must agree on: every SANDGUARD_* but SANDGUARD_WARM. */
bool executor_env_shared(const char *entry);

/* The strings that follow the head for request r and the environment
 * envp, *h filled in (has_stdin aside); NULL when they would be past
 * EXECUTOR_MAX_STRINGS or out of memory (then run cold). free() it. */
char *executor_request_pack(const struct exec_request *r, char **envp, struct executor_request *h);

/* The request a head and its strings carry: r's strings point into
 * `strings`, and r->argv (NULL with --language) and *env (the client's
 * environment entries, NULL-ended) into *vec, which is the caller's to
 * free(). 0, -EPROTO (counts past the strings, a string without its NUL,
 * unknown fields, a request exec_request_check() refuses) or -ENOMEM. */
int executor_request_unpack(const struct executor_request *h, char *strings, struct exec_request *r,
			    char ***env, char ***vec);

/* All of it, or -errno (-EPIPE at EOF). */
int executor_send_all(int fd, const void *buf, size_t len);
int executor_recv_all(int fd, void *buf, size_t len);
/* The n parts in order, in as few sendmsg() calls as the socket takes
 * (one, for an answer that fits its buffer: the client wakes once). The
 * iovecs are consumed. 0 or -errno. */
int executor_send_iov(int fd, struct iovec *iov, int n);

#endif
