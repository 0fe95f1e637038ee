/* sandguard exec: hands the run to a running executor when there is one
 * (the warm path: src/warm/warm_client.h), else runs it here (cold). Either
 * way the same command (src/warm/warm_command.h) prints one JSON result. */
#include <stdio.h>
#include <unistd.h>
#include "commands.h"
#include "warm/warm_client.h"
#include "warm/warm_command.h"

extern char **environ;

int cmd_exec(int argc, char **argv)
{
	struct warm_io io = { .out = stdout, .err = stderr, .in_fd = STDIN_FILENO, .path = "cold" };
	int code = warm_client_run(argc, argv, environ);

	return code >= 0 ? code : warm_exec_command(argc, argv, &io);
}
