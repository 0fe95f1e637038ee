/* sandguard probe: what this kernel supports, and the mode the agent would
 * pick, for a human. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include "lib/cgroup.h"
#include "commands.h"
#include "agent/probe.h"

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = { { "mode", required_argument, NULL, 'm' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	enum sg_mode_request req = SG_REQ_AUTO;
	const struct sg_features *f;
	struct sg_modes modes;
	char root[PATH_MAX], err[512];
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (parse_mode_request(optarg, &req)) {
				fprintf(stderr,
					"sandguard probe: --mode must be auto, lsm or fallback\n");
				return SG_EXIT_USAGE;
			}
			break;
		case 'h':
			printf("usage: sandguard probe [--mode auto|lsm|fallback]\n"
			       "Loads and attaches a small program per feature and prints what this\n"
			       "kernel allows and the mode the agent picks per area.\n");
			return SG_EXIT_OK;
		default:
			return SG_EXIT_USAGE;
		}
	}
	if (sandguard_root(root, sizeof(root), true))
		return SG_EXIT_PLATFORM;
	f = probe_features(root);
	if (choose_modes(f, req, &modes, err, sizeof(err))) {
		print_probe_table(stdout, f, &(struct sg_modes){ 0 });
		fprintf(stderr, "sandguard probe: %s\n", err);
		return SG_EXIT_PLATFORM;
	}
	print_probe_table(stdout, f, &modes);
	if (enforcement_degraded(f, &modes, err, sizeof(err)))
		printf("\nthe agent refuses to start on this kernel: %s\n", err);
	return SG_EXIT_OK;
}
