/* sandguard agent: options, then agent_run(). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent/agent.h"
#include "control/agent_client.h"
#include "agent/bpf_loader.h"
#include "commands.h"
#include "telemetry/journal.h"
#include "lib/log.h"
#include "policy/policy.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard agent [options]\n"
		"  --policy-dir DIR        tenant policies (<tenant>.json, default.json);\n"
		"                          default $SANDGUARD_POLICY_DIR or " SG_POLICY_DIR_DEFAULT
		"\n"
		"  --mode auto|lsm|fallback  file/exec enforcement mode; default auto\n"
		"  --events PATH           event stream, JSON lines; '-' = stdout (default)\n"
		"  --events-max-bytes N    rotate the event file past N bytes (default 64 MiB)\n"
		"  --events-keep N         rotated files kept (default 5)\n"
		"  --events-tenant-share PCT  a tenant's lines fill at most PCT%% of each event\n"
		"                          file; the rest are counted (default 25; 100 = no limit)\n"
		"  --metrics ADDR:PORT     serve Prometheus /metrics (and /readyz)\n"
		"  --socket PATH           control socket; default " SG_AGENT_SOCK "\n"
		"  --state-dir DIR         the ledger's checkpoint and the outcome journal the\n"
		"                          executors write; default $SANDGUARD_STATE_DIR or\n"
		"                          /var/lib/sandguard (it must be the executors' one)\n"
		"  --node NAME             node name in events; default the host name\n"
		"  --ready-file PATH       written once programs are attached and enforcing\n"
		"  --host-root DIR         the node's / as this agent sees it (in a pod: a read-only\n"
		"                          hostPath of /); policy paths are resolved beneath it.\n"
		"                          Executors must see the same root (checked at registration)\n"
		"  --cleanup               remove every pinned program and map, then exit\n"
		"Signals: SIGHUP reloads policies; SIGTERM stops (programs stay pinned).\n");
}

int cmd_agent(int argc, char **argv)
{
	static const struct option opts[] = { { "policy-dir", required_argument, NULL, 'p' },
					      { "mode", required_argument, NULL, 'm' },
					      { "events", required_argument, NULL, 'e' },
					      { "events-max-bytes", required_argument, NULL, 'B' },
					      { "events-keep", required_argument, NULL, 'K' },
					      { "events-tenant-share", required_argument, NULL,
						'T' },
					      { "metrics", required_argument, NULL, 'M' },
					      { "socket", required_argument, NULL, 's' },
					      { "state-dir", required_argument, NULL, 'S' },
					      { "node", required_argument, NULL, 'n' },
					      { "ready-file", required_argument, NULL, 'r' },
					      { "host-root", required_argument, NULL, 'R' },
					      { "cleanup", no_argument, NULL, 'c' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	struct agent_opts o = { .events_max_bytes = 64ull << 20,
				.events_keep = 5,
				.events_tenant_share = 25 };
	unsigned long share;
	char *end;
	int c, rc;

	snprintf(o.policy_dir, sizeof(o.policy_dir), "%s", policy_dir_default());
	snprintf(o.events_path, sizeof(o.events_path), "-");
	snprintf(o.socket_path, sizeof(o.socket_path), "%s",
		 getenv("SANDGUARD_AGENT_SOCK") ? getenv("SANDGUARD_AGENT_SOCK") : SG_AGENT_SOCK);
	journal_state_dir(o.state_dir, sizeof(o.state_dir)); /* the executors' default */
	snprintf(o.host_root, sizeof(o.host_root), "/");
	if (gethostname(o.node, sizeof(o.node)))
		snprintf(o.node, sizeof(o.node), "unknown");
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			snprintf(o.policy_dir, sizeof(o.policy_dir), "%s", optarg);
			break;
		case 'm':
			if (parse_mode_request(optarg, &o.mode)) {
				fprintf(stderr,
					"sandguard agent: --mode must be auto, lsm or fallback\n");
				return SG_EXIT_USAGE;
			}
			break;
		case 'e':
			snprintf(o.events_path, sizeof(o.events_path), "%s", optarg);
			break;
		case 'B':
			o.events_max_bytes = strtoull(optarg, &end, 10);
			if (*end) {
				fprintf(stderr,
					"sandguard agent: --events-max-bytes wants a number\n");
				return SG_EXIT_USAGE;
			}
			break;
		case 'K':
			o.events_keep = atoi(optarg);
			break;
		case 'T':
			share = strtoul(optarg, &end, 10);
			if (*end || !*optarg || share < 1 || share > 100) {
				fprintf(stderr, "sandguard agent: --events-tenant-share wants a "
						"percentage from 1 to 100\n");
				return SG_EXIT_USAGE;
			}
			o.events_tenant_share = (unsigned)share;
			break;
		case 'M':
			snprintf(o.metrics_addr, sizeof(o.metrics_addr), "%s", optarg);
			break;
		case 's':
			snprintf(o.socket_path, sizeof(o.socket_path), "%s", optarg);
			break;
		case 'S':
			snprintf(o.state_dir, sizeof(o.state_dir), "%s", optarg);
			break;
		case 'n':
			snprintf(o.node, sizeof(o.node), "%s", optarg);
			break;
		case 'r':
			snprintf(o.ready_file, sizeof(o.ready_file), "%s", optarg);
			break;
		case 'R':
			snprintf(o.host_root, sizeof(o.host_root), "%s", optarg);
			break;
		case 'c':
			return sg_bpf_cleanup() ? SG_EXIT_PLATFORM : SG_EXIT_OK;
		case 'h':
			usage(stdout);
			return SG_EXIT_OK;
		default:
			usage(stderr);
			return SG_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "sandguard agent: unexpected argument '%s'\n", argv[optind]);
		return SG_EXIT_USAGE;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "sandguard agent: must run as root (CAP_BPF, CAP_SYS_ADMIN)\n");
		return SG_EXIT_PLATFORM;
	}
	rc = agent_run(&o);
	return rc ? SG_EXIT_PLATFORM : SG_EXIT_OK;
}
