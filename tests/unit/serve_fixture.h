/* Shared by the HTTP server's unit tests: a private temporary tree for the
 * executor's state, log and run directories, no agent, a server without
 * sockets, and a count of what was booked. */
#ifndef SG_TEST_SERVE_FIXTURE_H
#define SG_TEST_SERVE_FIXTURE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "journal_lines.h"
#include "serve/serve_internal.h"

/* mkdtemp `tmp` (a "/tmp/...-XXXXXX" template), point the executor at
 * tmp/state, tmp/log, tmp/run and a socket no agent listens on, and make
 * tmp/policies (into `policies`). */
static void serve_fixture_dirs(char *tmp, char *policies, size_t len)
{
	static const char *const subs[] = { "state", "log", "run", "no-agent.sock" };
	static const char *const vars[] = { "SANDGUARD_STATE_DIR", "SANDGUARD_LOG_DIR",
					    "SANDGUARD_RUN_DIR", "SANDGUARD_AGENT_SOCK" };
	char dir[256];

	assert_non_null(mkdtemp(tmp));
	for (int i = 0; i < 4; i++) {
		snprintf(dir, sizeof(dir), "%s/%s", tmp, subs[i]);
		setenv(vars[i], dir, 1);
	}
	snprintf(policies, len, "%s/policies", tmp);
	assert_int_equal(mkdir(policies, 0755), 0);
}

/* A server without sockets over `policies`, python only, caps 4/4/4,
 * sandboxes run by `run` (a fake). */
static void serve_fixture_server(struct serve *srv, const char *policies, sandbox_runner run)
{
	char err[512];

	memset(srv, 0, sizeof(*srv));
	snprintf(srv->policy_dir, sizeof(srv->policy_dir), "%s", policies);
	srv->cfg = (struct serve_config){ .policy_dir = srv->policy_dir,
					  .max_body = 1 << 20,
					  .max_concurrency = 4,
					  .queue = 4,
					  .tenant_queue = 4,
					  .max_tests = 100,
					  .run = run };
	assert_int_equal(serve_langs_init(&srv->langs, "python", err, sizeof(err)), 0);
	snprintf(srv->host, sizeof(srv->host), "node-1");
	srv->gate = gate_new(4, 4, 4);
}

/* dir/name with `text`, chmod `mode`. */
static void fixture_write(const char *dir, const char *name, const char *text, mode_t mode)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* Every booking is one record of the outcome journal. */
static size_t bookings(void)
{
	return journal_count();
}

#endif
