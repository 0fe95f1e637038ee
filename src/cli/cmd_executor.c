/* sandguard executor: the long-lived executor `sandguard exec` hands its
 * runs to (src/executor/executor_server.h), with a pool of sandboxes prepared ahead
 * of demand (src/pool/pool.h). Runs until SIGINT or SIGTERM, then
 * stops taking runs, finishes those under way and tears every sandbox
 * down; SIGHUP retires the prepared sandboxes (the node's policies may have
 * changed). Prints "executor listening on PATH" once it is. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli_opts.h"
#include "commands.h"
#include "exec/exec.h"
#include "interp/interp.h"
#include "lib/log.h"
#include "sandbox/sandbox_forker.h"
#include "control/agent_shared.h"
#include "pool/pool.h"
#include "executor/executor_server.h"

struct executor_opts {
	unsigned long long pool_max, idle_s, max_clients;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard executor [--pool-max N] [--idle-s S] [--max-clients N]\n"
		"\n"
		"A long-lived executor: `sandguard exec` hands it its run over the local socket\n"
		"<run>/executor.sock (root only; $SANDGUARD_RUN_DIR or /run/sandguard) when the\n"
		"two share their SANDGUARD_* environment, and its sandboxes come prepared from a\n"
		"pool that follows each tenant's demand (docs/sandbox.md, \"The warm pool\").\n"
		"\n"
		"  --pool-max N     prepared sandboxes kept, all tenants (default: 4 per CPU, 4..64)\n"
		"  --idle-s S       a tenant's prepared sandboxes go after S s unused (default 60)\n"
		"  --max-clients N  runs at once; more run cold (default 4096)\n"
		"\n"
		"SIGTERM, SIGINT: stop (runs under way finish); SIGHUP: retire the prepared\n"
		"sandboxes.\n");
}

static const struct cli_command command = { .name = "executor", .usage = usage };

static int count(const char *flag, const char *v, unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || !*out || *out > max)
		return cli_usage_error(&command, "%s must be an integer in 1..%llu, got '%s'", flag,
				       max, v);
	return 0;
}

/* 0 to go on, -1 after --help, or an exit code. */
static int parse_args(int argc, char **argv, struct executor_opts *o)
{
	static const struct option longopts[] = { { "pool-max", required_argument, NULL, 'p' },
						  { "idle-s", required_argument, NULL, 'i' },
						  { "max-clients", required_argument, NULL, 'c' },
						  { "help", no_argument, NULL, 'h' },
						  { 0 } };
	int c, ret = 0;

	cli_options_begin();
	while (!ret && (c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (c == 'p')
			ret = count("--pool-max", optarg, 256, &o->pool_max);
		else if (c == 'i')
			ret = count("--idle-s", optarg, 86400, &o->idle_s);
		else if (c == 'c')
			ret = count("--max-clients", optarg, 65536, &o->max_clients);
		else
			return cli_option_common(&command, c, argv);
	}
	if (!ret && optind < argc)
		return cli_usage_error(&command, "unexpected argument '%s'", argv[optind]);
	return ret;
}

int cmd_executor(int argc, char **argv)
{
	struct executor_opts o = { 0 };
	struct agent_shared agent;
	struct pool *pool = NULL;
	struct executor_server *server = NULL;
	struct pool_stats st;
	char detail[256];
	sigset_t sigs;
	int sig = 0, ret, reaped;

	ret = parse_args(argc, argv, &o);
	if (ret)
		return ret < 0 ? SG_EXIT_OK : ret;
	/* Every thread inherits this mask: the signals reach sigwait() below
	 * only (sandboxes reset theirs). */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The inits' forker, from this thread (it lives as long as the
	 * executor: the inits' parent-death signal follows it) and before
	 * any other thread or pool exists: a small process to fork
	 * (src/sandbox/sandbox_forker.h). Without it, the pool clones them. */
	if (sb_forker_start(detail, sizeof(detail)))
		sg_warn("executor: %s: the pool clones the inits itself", detail);
	agent_shared_init(&agent);
	/* What a killed executor left, before anything new. */
	reaped = exec_reap_orphans(agent_shared_get(&agent));
	if (reaped > 0)
		sg_info("executor: reclaimed %d orphaned records", reaped);
	ret = pool_start(&(struct pool_opts){ .agent = &agent,
					      .max_ready = (unsigned)o.pool_max,
					      .idle_ms = o.idle_s * 1000 },
			 &pool, detail, sizeof(detail));
	if (!ret)
		ret = executor_server_start(
			&(struct executor_server_opts){ .pool = pool,
							.agent = &agent,
							.max_clients = (unsigned)o.max_clients },
			&server, detail, sizeof(detail));
	if (ret) {
		sg_error("executor: %s", detail);
		pool_stop(pool);
		agent_shared_close(&agent);
		sb_forker_stop();
		return SG_EXIT_PLATFORM;
	}
	printf("executor listening on %s\n", executor_server_path(server));
	fflush(stdout);
	for (;;) {
		while (sigwait(&sigs, &sig) == EINTR)
			;
		if (sig != SIGHUP)
			break;
		sg_info("executor: SIGHUP: retiring the prepared sandboxes");
		pool_drain(pool);
	}
	sg_info("executor: %s: stopping", strsignal(sig));
	executor_server_stop(server);
	pool_stats(pool, &st);
	pool_stop(pool);
	agent_shared_close(&agent);
	sb_forker_stop();
	sg_info("executor: stopped; %llu runs had a prepared sandbox, %llu one made for them; "
		"%llu ran cold because their warm interpreter could not start",
		(unsigned long long)st.taken_ready, (unsigned long long)st.taken_fresh,
		(unsigned long long)interp_fallbacks());
	return SG_EXIT_OK;
}
