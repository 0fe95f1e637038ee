/* The subcommands' shared option handling (see src/cli/cli_opts.h). */
#include <getopt.h>
#include <stdarg.h>
#include "cli_opts.h"
#include "commands.h"

int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sandguard %s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (cmd->full_usage_on_error) {
		fputc('\n', stderr);
		cmd->usage(stderr);
	} else {
		fprintf(stderr, "\n(see 'sandguard %s --help')\n", cmd->name);
	}
	return SG_EXIT_USAGE;
}

void cli_options_begin(void)
{
	optind = 0; /* 0, not 1: glibc starts over, whatever a parse before left */
	opterr = 0;
}

int cli_option_common(const struct cli_command *cmd, int c, char **argv)
{
	const char *arg = argv[optind - 1];

	if (c == 'h') {
		cmd->usage(stdout);
		return -1;
	}
	if (c == ':')
		return cli_usage_error(cmd, "option '%s' needs a value", arg);
	/* An unknown short option is named alone (-x): inside a group (-xv)
	 * argv[optind - 1] is not yet its argument. A long one as given. */
	if (optopt > ' ' && optopt < 0x7f && !(arg[0] == '-' && arg[1] == '-')) {
		char opt[3] = { '-', (char)optopt, '\0' };

		return cli_usage_error(cmd, "unknown option '%s'", opt);
	}
	return cli_usage_error(cmd, "unknown option '%s'", arg);
}
