/* The subcommands of build/sandguard; each lives in src/cli/cmd_<name>.c. */
#ifndef SG_COMMANDS_H
#define SG_COMMANDS_H
#include <stdbool.h>

/* Exit codes shared by every subcommand. */
#define SG_EXIT_OK       0
#define SG_EXIT_TENANT   1 /* failed by a tenant cause / check failed */
#define SG_EXIT_PLATFORM 2
#define SG_EXIT_USAGE    64

int cmd_agent(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_executor(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_session(int argc, char **argv);
/* explain --session S (cmd_explain_session.c): the session's steps from
 * the journal, each with the events of its runs, and how it ended. */
int explain_session(const char *session, const char *tenant, const char *journal_dir,
		    const char *events, bool json);
int cmd_health(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_tenant(int argc, char **argv);
int cmd_artifact(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
