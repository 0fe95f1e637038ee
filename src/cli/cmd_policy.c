/* sandguard policy check FILE...: validate policy files the way the agent
 * will load them, reporting the first problem of each as file:line:col. */
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "policy/policy.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: sandguard policy check FILE...\n"
		   "\n"
		   "Validates tenant policy files (see docs/policy.md). A file named\n"
		   "<tenant>.json must be tenant <tenant>'s policy. Prints 'FILE: ok' for\n"
		   "each valid file, and 'FILE:LINE:COL: problem' on stderr for the first\n"
		   "problem of each invalid one. Exits 0 when all are valid, 1 otherwise.\n");
}

static int check(int nfiles, char **files)
{
	int bad = 0;

	for (int i = 0; i < nfiles; i++) {
		struct sg_policy p;
		struct sg_policy_error err;
		char line[sizeof(err.file) + sizeof(err.msg) + 32];

		if (policy_load_file(files[i], &p, &err) == 0) {
			printf("%s: ok\n", files[i]);
			continue;
		}
		policy_error_format(&err, line, sizeof(line));
		fprintf(stderr, "%s\n", line);
		bad++;
	}
	fflush(stdout);
	return bad ? SG_EXIT_TENANT : SG_EXIT_OK;
}

int cmd_policy(int argc, char **argv)
{
	if (argc >= 2 &&
	    (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
		usage(stdout);
		return SG_EXIT_OK;
	}
	if (argc < 2 || strcmp(argv[1], "check")) {
		if (argc >= 2)
			fprintf(stderr, "sandguard policy: unknown subcommand '%s'\n", argv[1]);
		usage(stderr);
		return SG_EXIT_USAGE;
	}
	int first = 2;
	if (argc > first && (!strcmp(argv[first], "--help") || !strcmp(argv[first], "-h"))) {
		usage(stdout);
		return SG_EXIT_OK;
	}
	if (argc > first && !strcmp(argv[first], "--"))
		first++;
	else if (argc > first && argv[first][0] == '-' && argv[first][1]) {
		fprintf(stderr, "sandguard policy check: unknown option '%s'\n", argv[first]);
		usage(stderr);
		return SG_EXIT_USAGE;
	}
	if (argc <= first) {
		fprintf(stderr, "sandguard policy check: no files given\n");
		usage(stderr);
		return SG_EXIT_USAGE;
	}
	return check(argc - first, argv + first);
}
