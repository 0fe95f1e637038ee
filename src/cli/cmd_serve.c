/* sandguard serve: the trainer's HTTP API (src/serve/serve.h). Runs until
 * SIGINT or SIGTERM, then drains: /readyz turns 503, queued and new
 * requests are refused (504 on /run_code, so that verl retries elsewhere),
 * running ones finish. Prints "listening on http://ADDR:PORT" on stdout
 * once it is. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli_opts.h"
#include "commands.h"
#include "lib/log.h"
#include "sandbox/sandbox_forker.h"
#include "serve/serve.h"
#include "serve/serve_hostns.h"
#include "serve/run_build_cache.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard serve --listen ADDR:PORT [--tokens DIR] [--policy-dir D]\n"
		"                       [--languages LIST] [--max-concurrency N] [--queue N]\n"
		"                       [--tenant-queue N] [--max-connections N] [--max-body BYTES]\n"
		"                       [--max-buffered BYTES] [--max-tests N] [--header-timeout S]\n"
		"                       [--body-timeout S] [--idle-timeout S]\n"
		"                       [--host-namespaces[=PID]]\n"
		"\n"
		"HTTP API for trainers: POST /run_code (SandboxFusion-compatible), /v1/score,\n"
		"/v1/verify, /openrlhf/get_reward (OpenRLHF), /tci/execute (Together, rLLM),\n"
		"each also as /t/<token>/...; GET /healthz, /readyz.\n"
		"\n"
		"  --listen ADDR:PORT     numeric address: 127.0.0.1:8080, [::1]:8080 (port 0: any);\n"
		"                         without --tokens, loopback only\n"
		"  --tokens DIR           one file per tenant, named after it, holding its tokens\n"
		"                         (a Kubernetes Secret); every request must carry one\n"
		"  --policy-dir D         policies (default $SANDGUARD_POLICY_DIR or %s)\n"
		"  --languages LIST       /run_code languages (default %s): python, cpp, java,\n"
		"                         nodejs, go, rust, bash; or all\n"
		"  --max-concurrency N    requests running at once, all tenants (default: 2 per core)\n"
		"  --queue N              requests waiting for a place, all tenants (default %u)\n"
		"  --tenant-queue N       requests waiting, one tenant (default %u)\n"
		"  --max-connections N    open connections; beyond, 503 (default %u)\n"
		"  --max-body BYTES       largest request body (default %u)\n"
		"  --max-buffered BYTES   request bodies held at once (default %u)\n"
		"  --max-tests N          tests in one /v1/verify request (default %u)\n"
		"  --build-cache-mb N     /run_code compiled programs kept per tenant, MiB\n"
		"                         (default %u; 0: off)\n"
		"  --build-cache DIR      where (default $SANDGUARD_STATE_DIR/build-cache)\n"
		"  --header-timeout S     request line and headers due within S s (default %u)\n"
		"  --body-timeout S       body due within S s of the headers (default %u)\n"
		"  --idle-timeout S       a connection silent for S s is closed (default %u)\n"
		"  --host-namespaces[=PID]  join the mount and cgroup namespaces of PID (default\n"
		"                         1, the node's init; the pod needs hostPID): a container\n"
		"                         that runs as a host process (deploy/README.md)\n"
		"\n"
		"See docs/trainer-integration.md.\n",
		SG_POLICY_DIR_DEFAULT, SERVE_LANGUAGES_DEFAULT, SERVE_QUEUE_DEFAULT,
		SERVE_TENANT_QUEUE_DEFAULT, SERVE_MAX_CONNECTIONS_DEFAULT, SERVE_MAX_BODY_DEFAULT,
		SERVE_MAX_BUFFERED_DEFAULT, SERVE_MAX_TESTS_DEFAULT, RUN_BUILD_CACHE_MB_DEFAULT,
		SERVE_HEADER_TIMEOUT_S, SERVE_BODY_TIMEOUT_S, SERVE_IDLE_TIMEOUT_S);
}

static const struct cli_command serve_cmd = { "serve", usage, false };

/* An integer flag in [min, max]. */
static int parse_count(const char *flag, const char *v, unsigned long long min,
		       unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || *out < min || *out > max)
		return cli_usage_error(&serve_cmd, "%s must be an integer in %llu..%llu, got '%s'",
				       flag, min, max, v);
	return 0;
}

/* 0 to go on, -1 after --help, or an exit code. */
static int parse_args(int argc, char **argv, struct serve_config *cfg, int *host_pid)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "policy-dir", required_argument, NULL, 'p' },
		{ "max-body", required_argument, NULL, 'b' },
		{ "max-concurrency", required_argument, NULL, 'c' },
		{ "queue", required_argument, NULL, 'q' },
		{ "tenant-queue", required_argument, NULL, 't' },
		{ "max-connections", required_argument, NULL, 'n' },
		{ "languages", required_argument, NULL, 'L' },
		{ "tokens", required_argument, NULL, 'T' },
		{ "max-buffered", required_argument, NULL, 'B' },
		{ "max-tests", required_argument, NULL, 'm' },
		{ "header-timeout", required_argument, NULL, 'H' },
		{ "body-timeout", required_argument, NULL, 'D' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "host-namespaces", optional_argument, NULL, 'N' },
		{ "build-cache-mb", required_argument, NULL, 'C' },
		{ "build-cache", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long long v;
	int c, ret;

	cli_options_begin();
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		ret = 0;
		switch (c) {
		case 'l':
			cfg->listen = optarg;
			break;
		case 'p':
			cfg->policy_dir = optarg;
			break;
		case 'L':
			cfg->languages = optarg;
			break;
		case 'T':
			cfg->tokens_dir = optarg;
			break;
		case 'B':
			if (!(ret = parse_count("--max-buffered", optarg, 1 << 20, 1ull << 36, &v)))
				cfg->max_buffered = v;
			break;
		case 'm':
			if (!(ret = parse_count("--max-tests", optarg, 1, 100000, &v)))
				cfg->max_tests = v;
			break;
		case 'C':
			if (!(ret = parse_count("--build-cache-mb", optarg, 0, 1u << 20, &v)))
				cfg->build_cache_mb = v;
			break;
		case 'K':
			cfg->build_cache_dir = optarg;
			break;
		case 'H':
			if (!(ret = parse_count("--header-timeout", optarg, 1, 3600, &v)))
				cfg->header_timeout_s = v;
			break;
		case 'D':
			if (!(ret = parse_count("--body-timeout", optarg, 1, 3600, &v)))
				cfg->body_timeout_s = v;
			break;
		case 'I':
			if (!(ret = parse_count("--idle-timeout", optarg, 1, 3600, &v)))
				cfg->idle_timeout_s = v;
			break;
		case 'b':
			if (!(ret = parse_count("--max-body", optarg, 1, 1ull << 30, &v)))
				cfg->max_body = v;
			break;
		case 'c':
			if (!(ret = parse_count("--max-concurrency", optarg, 1, 4096, &v)))
				cfg->max_concurrency = v;
			break;
		case 'q':
			if (!(ret = parse_count("--queue", optarg, 0, 65536, &v)))
				cfg->queue = v;
			break;
		case 't':
			if (!(ret = parse_count("--tenant-queue", optarg, 0, 65536, &v)))
				cfg->tenant_queue = v;
			break;
		case 'n':
			if (!(ret = parse_count("--max-connections", optarg, 1, 65536, &v)))
				cfg->max_connections = v;
			break;
		case 'N':
			*host_pid = SERVE_HOST_PID;
			if (optarg &&
			    !(ret = parse_count("--host-namespaces", optarg, 1, 1 << 22, &v)))
				*host_pid = (int)v;
			break;
		default:
			return cli_option_common(&serve_cmd, c, argv);
		}
		if (ret)
			return ret;
	}
	if (optind < argc)
		return cli_usage_error(&serve_cmd, "unexpected argument '%s'", argv[optind]);
	if (!cfg->listen)
		return cli_usage_error(&serve_cmd, "--listen ADDR:PORT is required");
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	struct serve_config cfg = {
		.max_body = SERVE_MAX_BODY_DEFAULT,
		.max_concurrency = cores > 0 ? 2 * (uint32_t)cores : 2,
		.queue = SERVE_QUEUE_DEFAULT,
		.tenant_queue = SERVE_TENANT_QUEUE_DEFAULT,
		.max_connections = SERVE_MAX_CONNECTIONS_DEFAULT,
		.max_buffered = SERVE_MAX_BUFFERED_DEFAULT,
		.max_tests = SERVE_MAX_TESTS_DEFAULT,
		.header_timeout_s = SERVE_HEADER_TIMEOUT_S,
		.body_timeout_s = SERVE_BODY_TIMEOUT_S,
		.idle_timeout_s = SERVE_IDLE_TIMEOUT_S,
		.languages = SERVE_LANGUAGES_DEFAULT,
		.build_cache_mb = RUN_BUILD_CACHE_MB_DEFAULT,
	};
	static char policy_fd[64], tokens_fd[64];
	const char *policy_shown;
	struct serve *s = NULL;
	int host_pid = 0; /* 0: stay in our own namespaces */
	sigset_t stop;
	char err[512];
	int sig = 0, ret;

	ret = parse_args(argc, argv, &cfg, &host_pid);
	if (ret)
		return ret < 0 ? SG_EXIT_OK : ret;
	if (!cfg.policy_dir)
		cfg.policy_dir = policy_dir_default();
	policy_shown = cfg.policy_dir;
	if (host_pid) {
		ret = serve_enter_host_namespaces(host_pid, &cfg, policy_fd, tokens_fd,
						  sizeof(policy_fd), err, sizeof(err));
		if (ret) {
			fprintf(stderr, "sandguard serve: --host-namespaces: %s\n", err);
			return SG_EXIT_PLATFORM;
		}
	}
	/* Every thread (MHD's, the verifier's) inherits this mask, so the
	 * stop signals reach only sigwait() below; sandboxes reset it. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN); /* a client that hung up is an error return, not a death */

	/* The inits' forker, as the executor's (src/sandbox/sandbox_forker.h):
	 * from this thread, in the namespaces just entered, before serve's
	 * threads and pool. */
	if (sb_forker_start(err, sizeof(err)))
		sg_warn("serve: %s: the pool clones the inits itself", err);
	ret = serve_start(&cfg, &s);
	if (ret) {
		sb_forker_stop();
		return ret == -EINVAL ? SG_EXIT_USAGE : SG_EXIT_PLATFORM;
	}
	/* The address as given, the port as bound (port 0 picks one). */
	printf("listening on http://%.*s:%u (policies %s, languages %s, %s%s)\n",
	       (int)(strrchr(cfg.listen, ':') - cfg.listen), cfg.listen, serve_port(s),
	       policy_shown, cfg.languages, cfg.tokens_dir ? "tokens" : "no tokens",
	       host_pid ? ", the node's namespaces" : "");
	fflush(stdout);
	sg_info("serve: %s, max-concurrency %u, queue %u, tenant-queue %u, max-connections %u, "
		"max-body %zu",
		cfg.listen, cfg.max_concurrency, cfg.queue, cfg.tenant_queue, cfg.max_connections,
		cfg.max_body);
	while (sigwait(&stop, &sig) == EINTR)
		;
	sg_info("serve: %s: draining", strsignal(sig));
	serve_stop(s);
	sb_forker_stop();
	return SG_EXIT_OK;
}
