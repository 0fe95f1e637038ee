/* sandguard top: one live table per tenant. With an agent, its ledger as it
 * is now (the "ledger" query); without one (or with --ledger / --state-dir),
 * the checkpoint and the outcome journal folded here, read-only: nothing on
 * disk is changed, not even a corrupt checkpoint. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "control/agent_client.h"
#include "commands.h"
#include "top_run.h"
#include "telemetry/event_json.h"
#include "telemetry/journal.h"
#include "telemetry/ledger.h"
#include "telemetry/outcome_fold.h"
#include "lib/log.h"
#include "telemetry/outcome.h"
#include "lib/rule_names.h"

struct top_ctx {
	json_t *active;   /* tenant -> its active sandboxes, from the agent's status */
	json_t *sessions; /* tenant -> its live sessions, likewise */
	json_t *rows;     /* --json output */
	bool as_json;
};

/* The status's tenants by name, looked up once per row: a fleet has
 * thousands, and a search of the list per row would be quadratic. */
static json_t *active_by_tenant(json_t *status, const char *key)
{
	json_t *m = json_object(), *v;
	size_t i;

	json_array_foreach(json_object_get(status, "tenants"), i, v)
	{
		const char *name = json_string_value(json_object_get(v, "tenant"));
		if (m && name)
			json_object_set(m, name, json_object_get(v, key));
	}
	return m;
}

static uint64_t sum(const uint64_t *v, int n)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		s += v[i];
	return s;
}

static long long active_of(json_t *active, const char *tenant)
{
	return json_integer_value(json_object_get(active, tenant));
}

static void row(const struct ledger_tenant *t, void *p)
{
	struct top_ctx *ctx = p;
	uint64_t kills = 0;
	char viol[64] = "";

	for (int r = 0; r < SG_RULE__COUNT; r++)
		kills += t->kills[r];
	if (ctx->as_json) {
		json_t *failures = json_object(), *k = json_object(), *verdicts = json_object();
		for (int c = 1; c < SG_CAUSE__COUNT; c++) {
			json_object_set_new(failures, cause_name(c), json_integer(t->failures[c]));
			if (t->verdicts[c])
				json_object_set_new(verdicts, cause_name(c),
						    json_integer(t->verdicts[c]));
		}
		json_t *steps = json_object(), *ended = json_object();

		for (int r = 0; r < SG_RULE__COUNT; r++)
			json_object_set_new(k, rule_name(r), json_integer(t->kills[r]));
		for (int c = 0; c < SG_CAUSE__COUNT; c++) {
			if (t->session_steps[c])
				json_object_set_new(steps, cause_name(c),
						    json_integer(t->session_steps[c]));
			if (t->sessions_ended[c])
				json_object_set_new(ended, cause_name(c),
						    json_integer(t->sessions_ended[c]));
		}
		json_array_append_new(
			ctx->rows,
			json_pack(
				"{s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:I, s:I, s:I, s:o, s:I, s:I}",
				"tenant", t->name, "active_sandboxes",
				(json_int_t)active_of(ctx->active, t->name), "attempts",
				(json_int_t)t->attempts, "batches_ok", (json_int_t)t->batches_ok,
				"batches_failed", (json_int_t)t->batches_failed, "failures",
				failures, "verdicts", verdicts, "platform_faults",
				(json_int_t)t->failures_by_class[SG_CLASS_PLATFORM],
				"tenant_faults",
				(json_int_t)t->failures_by_class[SG_CLASS_TENANT_CODE],
				"verdict_failures",
				(json_int_t)t->failures_by_class[SG_CLASS_VERDICT], "kills", k,
				"degenerate", (json_int_t)t->degenerate, "invalid",
				(json_int_t)t->invalid));
		json_object_set_new(json_array_get(ctx->rows, json_array_size(ctx->rows) - 1),
				    "sessions",
				    json_pack("{s:I, s:o, s:o}", "active",
					      (json_int_t)active_of(ctx->sessions, t->name),
					      "steps", steps, "ended", ended));
		return;
	}
	for (int r = 0, n = 0; r < SG_RULE__COUNT; r++)
		if (t->violations[r])
			n += snprintf(viol + n, sizeof(viol) - n, "%s%s:%llu", n ? "," : "",
				      rule_name(r), (unsigned long long)t->violations[r]);
	printf("%-16s %6lld %4lld %6llu %6llu %6llu | %5llu %5llu %5llu %5llu %5llu %-18s %5llu %5llu | %5llu | %8llu | %5llu\n",
	       t->name, active_of(ctx->active, t->name), active_of(ctx->sessions, t->name),
	       (unsigned long long)sum(t->session_steps, SG_CAUSE__COUNT),
	       (unsigned long long)t->batches_ok, (unsigned long long)t->batches_failed,
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_TIMEOUT],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_BAD_OUTPUT],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_CRASH],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_OOM],
	       (unsigned long long)t->failures[SG_CAUSE_TENANT_POLICY_VIOLATION],
	       viol[0] ? viol : "-", (unsigned long long)t->failures[SG_CAUSE_TENANT_PAUSED],
	       (unsigned long long)t->failures[SG_CAUSE_PLATFORM_ERROR],
	       (unsigned long long)t->failures_by_class[SG_CLASS_VERDICT],
	       (unsigned long long)kills, (unsigned long long)t->degenerate);
}

/* Where the counts came from, and what the reader should know about them. */
struct view {
	struct ledger *l;
	json_t *status; /* the agent's, or NULL when it is down */
	bool from_agent;
	char checkpoint[PATH_MAX], journal[PATH_MAX];
	json_t *notes; /* strings */
};

static void note(struct view *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct view *v, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(v->notes, json_string(buf));
}

/* The agent's own view: its ledger now, and its status for ACTIVE. */
static int agent_view(struct agent_conn *c, struct view *v)
{
	struct ledger_checkpoint cp;
	struct ledger_load_report rep = { 0 };
	char *text = NULL;
	json_t *root;
	int err = agent_query(c, "ledger", 10000, &text);

	root = err ? NULL : json_loads(text, 0, NULL);
	free(text);
	err = root ? ledger_from_json(v->l, json_object_get(root, "ledger"), &cp, &rep) : -ECOMM;
	json_decref(root);
	if (!err && rep.n_dropped)
		note(v, "the agent's ledger had %zu unreadable rows: %s", rep.n_dropped, rep.why);
	ledger_load_report_free(&rep);
	v->from_agent = !err;
	return err;
}

/* Without an agent: the checkpoint (never changed: read-only) and the
 * journal after its position, folded here. */
static int journal_view(const char *checkpoint, struct view *v)
{
	struct ledger_checkpoint cp = { 0 };
	struct ledger_load_report rep;
	struct outcome_fold f;
	struct journal_pos from = { 0, 0 };
	char *slash;
	int err, n;

	snprintf(v->checkpoint, sizeof(v->checkpoint), "%s", checkpoint);
	snprintf(v->journal, sizeof(v->journal), "%s", checkpoint);
	slash = strrchr(v->journal, '/');
	snprintf(slash ? slash + 1 : v->journal,
		 sizeof(v->journal) - (slash ? (size_t)(slash + 1 - v->journal) : 0), "%s",
		 JOURNAL_SUBDIR);
	err = ledger_load(v->l, checkpoint, LEDGER_LOAD_READ_ONLY, &cp, &rep);
	if (err == 0 && cp.has_position)
		from = cp.pos;
	if (err == 0 && rep.n_dropped)
		note(v,
		     "checkpoint %s: %zu tenants' rows are unreadable (%s): their outcomes are "
		     "counted from the retained journal only",
		     checkpoint, rep.n_dropped, rep.why);
	else if (err == -ENOMEM)
		return err;
	else if (err && err != -ENOENT)
		note(v,
		     "checkpoint %s: %s: counts folded from the retained journal only "
		     "(the file was left as it is)",
		     checkpoint, err == -EBADMSG ? rep.why : strerror(-err));
	err = fold_init(&f, v->journal, v->l, &from);
	if (!err && (n = fold_prime(&f, rep.dropped, rep.n_dropped)) < 0)
		err = n;
	while (!err && (n = fold_run(&f, 65536)) > 0)
		;
	if (!err && n < 0)
		err = n;
	if (!err && (f.stats.bad || f.stats.gap_segments))
		note(v, "journal %s: %llu bad records skipped, %llu segments missing", v->journal,
		     (unsigned long long)f.stats.bad, (unsigned long long)f.stats.gap_segments);
	fold_free(&f);
	ledger_load_report_free(&rep);
	if (err)
		fprintf(stderr, "sandguard top: cannot fold the journal %s: %s\n", v->journal,
			strerror(-err));
	return err;
}

static void print_json(struct view *v)
{
	struct top_ctx ctx = { .as_json = true,
			       .active = active_by_tenant(v->status, "active_sandboxes"),
			       .sessions = active_by_tenant(v->status, "active_sessions"),
			       .rows = json_array() };
	json_t *doc;

	ledger_foreach(v->l, row, &ctx);
	json_decref(ctx.active);
	json_decref(ctx.sessions);
	doc = json_pack("{s:s, s:b, s:o, s:o, s:O, s:o}", "source",
			v->from_agent ? "agent" : "journal", "agent_running", v->status != NULL,
			"checkpoint", v->from_agent ? json_null() : json_string(v->checkpoint),
			"journal", v->from_agent ? json_null() : json_string(v->journal), "notes",
			v->notes, "tenants", ctx.rows);
	json_dumpf(doc, stdout, JSON_INDENT(2));
	printf("\n");
	json_decref(doc);
}

static void print_table(struct view *v)
{
	struct top_ctx ctx = { .active = active_by_tenant(v->status, "active_sandboxes"),
			       .sessions = active_by_tenant(v->status, "active_sessions") };
	json_t *n;
	size_t i;

	if (v->from_agent)
		printf("sandguard top: agent running (pid %lld): its ledger\n",
		       (long long)json_integer_value(json_object_get(v->status, "pid")));
	else
		printf("sandguard top: %s; counts folded read-only from %s on top of %s\n",
		       v->status ? "agent running" : "AGENT NOT RUNNING", v->journal,
		       v->checkpoint);
	json_array_foreach(v->notes, i, n) printf("note: %s\n", json_string_value(n));
	printf("%-16s %6s %4s %6s %6s %6s | %5s %5s %5s %5s %5s %-18s %5s %5s | %5s | %8s | %5s\n",
	       "TENANT", "ACTIVE", "SESS", "STEPS", "OK", "FAILED", "TIME", "BADOUT", "CRASH",
	       "OOM", "VIOL", "VIOL BY RULE", "PAUSE", "PLATF", "VERD", "KILLS", "CONST");
	if (ledger_tenant_count(v->l) == 0)
		printf("(no batches or events booked yet)\n");
	ledger_foreach(v->l, row, &ctx);
	json_decref(ctx.active);
	json_decref(ctx.sessions);
}

static int show(const char *sock, const char *checkpoint, bool as_json)
{
	struct view v = { .l = ledger_new(), .notes = json_array() };
	struct agent_conn *c = agent_connect(sock);
	char *text = NULL, path[PATH_MAX];
	int err;

	if (c && agent_status(c, &text) == 0)
		v.status = json_loads(text, 0, NULL);
	free(text);
	err = v.l && v.notes ? 0 : -ENOMEM;
	if (!err && !checkpoint && v.status && agent_view(c, &v)) {
		/* An agent that does not answer "ledger": read its files. */
		note(&v, "the agent did not send its ledger: showing its checkpoint and journal");
		ledger_free(v.l);
		v.l = ledger_new(); /* nothing half-read is shown */
		err = v.l ? 0 : -ENOMEM;
	}
	agent_close(c);
	if (!err && !v.from_agent && !checkpoint) {
		/* The agent's state directory when it says, else ours. */
		const char *dir = json_string_value(json_object_get(v.status, "state_dir"));
		if (dir)
			snprintf(path, sizeof(path), "%s/ledger.json", dir);
		else if (!(err = journal_state_dir(path, sizeof(path))))
			strncat(path, "/ledger.json", sizeof(path) - strlen(path) - 1);
		checkpoint = path;
	}
	if (!err && !v.from_agent)
		err = journal_view(checkpoint, &v);
	if (!err && as_json)
		print_json(&v);
	else if (!err)
		print_table(&v);
	ledger_free(v.l);
	json_decref(v.status);
	json_decref(v.notes);
	return err ? SG_EXIT_PLATFORM : SG_EXIT_OK;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = { { "once", no_argument, NULL, '1' },
					      { "json", no_argument, NULL, 'j' },
					      { "interval", required_argument, NULL, 'i' },
					      { "socket", required_argument, NULL, 's' },
					      { "ledger", required_argument, NULL, 'l' },
					      { "state-dir", required_argument, NULL, 'S' },
					      { "run", required_argument, NULL, 'r' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	const char *sock = NULL, *ledger = NULL, *state_dir = NULL, *run_id = NULL;
	char state_file[PATH_MAX];
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
		case 'S':
			snprintf(state_file, sizeof(state_file), "%s/ledger.json", optarg);
			ledger = state_file;
			state_dir = optarg;
			break;
		case 'r':
			run_id = optarg;
			break;
		case 'h':
			printf("usage: sandguard top [--once] [--json] [--interval S] [--socket PATH]\n"
			       "                     [--ledger FILE | --state-dir DIR]\n"
			       "       sandguard top --run R [--json] [--state-dir DIR]\n"
			       "Per tenant: active sandboxes, live sessions (SESS) and their steps, batches\n"
			       "ok/failed, failures by cause (timeout,\n"
			       "bad output, crash, oom, policy violation by rule, paused, platform), failed\n"
			       "runs of model-written programs (VERD: verdicts, nobody's fault), kills and\n"
			       "degenerate (constant) batches.\n"
			       "The agent's ledger when it answers; otherwise (or with --ledger FILE, a\n"
			       "checkpoint, or --state-dir DIR) the checkpoint and the outcome journal next\n"
			       "to it ($SANDGUARD_STATE_DIR, default /var/lib/sandguard), folded read-only.\n"
			       "--run R: one training run's batches, attempts and cost (CPU, run time, peak\n"
			       "memory), from the journal's records.\n");
			return SG_EXIT_OK;
		default:
			return SG_EXIT_USAGE;
		}
	}
	sg_log_set_level(SG_LOG_WARN); /* a table, not the ledger's load notes */
	if (run_id && (!*run_id || strlen(run_id) >= SG_ID_BUF)) {
		fprintf(stderr, "sandguard top: --run '%s': not a run id\n", run_id);
		return SG_EXIT_USAGE;
	}
	if (run_id)
		return top_run(state_dir, run_id, as_json);
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
