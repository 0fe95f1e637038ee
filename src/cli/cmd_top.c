/* sandguard top: one live table per tenant, from the agent's ledger (its
 * persisted state file, rewritten every second) and its status. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "control/agent_client.h"
#include "commands.h"
#include "telemetry/event_json.h"
#include "telemetry/ledger.h"
#include "lib/log.h"
#include "telemetry/outcome.h"
#include "lib/rule_names.h"

struct top_ctx {
	json_t *status; /* the agent's, or NULL when it is down */
	json_t *rows;   /* --json output */
	bool as_json;
};

static long long active_of(json_t *status, const char *tenant)
{
	json_t *v;
	size_t i;

	json_array_foreach(
		json_object_get(status, "tenants"), i,
		v) if (!strcmp(json_string_value(json_object_get(v, "tenant")) ?: "",
			       tenant)) return json_integer_value(json_object_get(v,
										  "active_sandboxes"));
	return 0;
}

static void row(const struct ledger_tenant *t, void *p)
{
	struct top_ctx *ctx = p;
	uint64_t kills = 0;
	char viol[64] = "";

	for (int r = 0; r < SG_RULE__COUNT; r++)
		kills += t->kills[r];
	if (ctx->as_json) {
		json_t *failures = json_object(), *k = json_object();
		for (int c = 1; c < SG_CAUSE__COUNT; c++)
			json_object_set_new(failures, cause_name(c), json_integer(t->failures[c]));
		for (int r = 0; r < SG_RULE__COUNT; r++)
			json_object_set_new(k, rule_name(r), json_integer(t->kills[r]));
		json_array_append_new(
			ctx->rows, json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:I, s:o, s:I, s:I}",
					     "tenant", t->name, "active_sandboxes",
					     (json_int_t)active_of(ctx->status, t->name),
					     "batches_ok", (json_int_t)t->batches_ok,
					     "batches_failed", (json_int_t)t->batches_failed,
					     "failures", failures, "platform_faults",
					     (json_int_t)t->failures_by_class[SG_CLASS_PLATFORM],
					     "tenant_faults",
					     (json_int_t)t->failures_by_class[SG_CLASS_TENANT_CODE],
					     "kills", k, "degenerate", (json_int_t)t->degenerate,
					     "invalid", (json_int_t)t->invalid));
		return;
	}
	for (int r = 0, n = 0; r < SG_RULE__COUNT; r++)
		if (t->violations[r])
			n += snprintf(viol + n, sizeof(viol) - n, "%s%s:%llu", n ? "," : "",
				      rule_name(r), (unsigned long long)t->violations[r]);
	printf("%-16s %6lld %6llu %6llu | %5llu %5llu %5llu %5llu %5llu %-18s %5llu %5llu | %8llu | %5llu\n",
	       t->name, active_of(ctx->status, t->name), (unsigned long long)t->batches_ok,
	       (unsigned long long)t->batches_failed,
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_TIMEOUT],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_BAD_OUTPUT],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_CRASH],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_OOM],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_POLICY_VIOLATION],
	       viol[0] ? viol : "-", (unsigned long long)t->failures[SG_CAUSE_TENANT_PAUSED],
	       (unsigned long long)t->failures[SG_CAUSE_PLATFORM_ERROR], (unsigned long long)kills,
	       (unsigned long long)t->degenerate);
}

static int show(const char *sock, const char *state_file, bool as_json)
{
	struct top_ctx ctx = { .as_json = as_json };
	struct agent_conn *c = agent_connect(sock);
	struct ledger *l = ledger_new();
	char *text = NULL, path[4096];
	int err;

	if (c && agent_status(c, &text) == 0)
		ctx.status = json_loads(text, 0, NULL);
	agent_close(c);
	free(text);
	snprintf(path, sizeof(path), "%s",
		 state_file   ? state_file
		 : ctx.status ? json_string_value(json_object_get(ctx.status, "ledger")) ?: ""
			      : "/var/lib/sandguard/ledger.json");
	err = l ? ledger_load(l, path) : -1;
	if (err) {
		fprintf(stderr, "sandguard top: cannot read the ledger %s\n", path);
		ledger_free(l);
		json_decref(ctx.status);
		return SG_EXIT_PLATFORM;
	}
	if (as_json) {
		ctx.rows = json_array();
		ledger_foreach(l, row, &ctx);
		json_t *doc = json_pack("{s:b, s:s, s:o}", "agent_running", ctx.status != NULL,
					"ledger", path, "tenants", ctx.rows);
		json_dumpf(doc, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(doc);
	} else {
		printf("sandguard top: %s, ledger %s\n",
		       ctx.status ? "agent running" : "AGENT NOT RUNNING", path);
		printf("%-16s %6s %6s %6s | %5s %5s %5s %5s %5s %-18s %5s %5s | %8s | %5s\n",
		       "TENANT", "ACTIVE", "OK", "FAILED", "TIME", "BADOUT", "CRASH", "OOM", "VIOL",
		       "VIOL BY RULE", "PAUSE", "PLATF", "KILLS", "CONST");
		if (ledger_tenant_count(l) == 0)
			printf("(no batches or events booked yet)\n");
		ledger_foreach(l, row, &ctx);
	}
	ledger_free(l);
	json_decref(ctx.status);
	return SG_EXIT_OK;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = { { "once", no_argument, NULL, '1' },
					      { "json", no_argument, NULL, 'j' },
					      { "interval", required_argument, NULL, 'i' },
					      { "socket", required_argument, NULL, 's' },
					      { "ledger", required_argument, NULL, 'l' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	const char *sock = NULL, *ledger = NULL;
	bool once = false, as_json = false;
	int interval = 2, opt, rc;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case '1':
			once = true;
			break;
		case 'j':
			as_json = once = true;
			break;
		case 'i':
			interval = atoi(optarg);
			break;
		case 's':
			sock = optarg;
			break;
		case 'l':
			ledger = optarg;
			break;
		case 'h':
			printf("usage: sandguard top [--once] [--json] [--interval S] [--socket PATH] [--ledger FILE]\n"
			       "Per tenant: active sandboxes, batches ok/failed, failures by cause (timeout,\n"
			       "bad output, crash, oom, policy violation by rule, paused, platform), kills and\n"
			       "degenerate (constant) batches.\n");
			return SG_EXIT_OK;
		default:
			return SG_EXIT_USAGE;
		}
	}
	sg_log_set_level(SG_LOG_WARN); /* a table, not the ledger's load notes */
	if (interval < 1) {
		fprintf(stderr, "sandguard top: --interval must be at least 1 second\n");
		return SG_EXIT_USAGE;
	}
	for (;;) {
		if (!once)
			printf("\033[H\033[2J");
		rc = show(sock, ledger, as_json);
		if (once || rc)
			return rc;
		fflush(stdout);
		sleep(interval);
	}
}
