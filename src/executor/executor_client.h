/* `sandguard exec`'s warm path, the client side: hand the request the CLI
 * parsed to the executor listening on <run>/executor.sock, copy its
 * answer to our stdout and stderr. As little work as the handoff needs:
 * the whole of a warm run's start is this process's. */
#ifndef SG_WARM_CLIENT_H
#define SG_WARM_CLIENT_H
#include "exec/exec_command.h"

/* Returns the command's exit code when an executor ran it, or -1 when
 * none would (no executor, another environment, refused before the run,
 * or ended before it started the run: stdin is then back where the
 * command reads it): then run it cold (exec_command_run()). An executor
 * that ends after it started the run is a platform error (a result saying
 * so, exit 2), never a second run. SANDGUARD_WARM=0 in the environment: -1
 * at once. */
int executor_client_run(const struct exec_request *req, char **envp);

#endif
