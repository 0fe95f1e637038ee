/* What the subcommands' option parsing shares: the usage error (one line
 * "sandguard NAME: what", then where to read more, exit code 64) and
 * getopt_long's answers that mean the same for every command (--help, an
 * option without its value, an unknown option). */
#ifndef SG_CLI_OPTS_H
#define SG_CLI_OPTS_H
#include <stdbool.h>
#include <stdio.h>

struct cli_command {
	const char *name;       /* "events": its messages start "sandguard events: " */
	void (*usage)(FILE *f); /* the --help text */
	/* After an error, the whole usage on stderr (a command whose verbs
	 * each take other arguments) instead of "(see 'sandguard NAME --help')". */
	bool full_usage_on_error;
};

/* Say what is wrong with the command line; returns SG_EXIT_USAGE. */
int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Before a getopt_long loop: parse from the first argument again (a
 * process may parse twice), and let cli_option_common() speak for
 * getopt rather than getopt itself (the optstring starts with ':'). */
void cli_options_begin(void);

/* The answer to what getopt_long returned, for what no command handles
 * itself: 'h' prints the usage on stdout and returns -1 (the command
 * exits 0); ':' (an option without its value) and anything else (an
 * unknown option) are usage errors. */
int cli_option_common(const struct cli_command *cmd, int c, char **argv);

#endif
