/* sandguard explain: the life of one batch, from the outcome journal and
 * the event stream, as one timeline ending in a verdict on-call can paste
 * back to the tenant (src/telemetry/timeline.h builds it; this prints it). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli_opts.h"
#include "commands.h"
#include "policy/policy.h"
#include "telemetry/journal.h"
#include "telemetry/timeline.h"

#define DEFAULT_EVENTS_FILE "/run/sandguard/events.jsonl"

struct opts {
	struct timeline_query q;
	const char *state_dir;
	const char *events;
	const char *policy_dir;
	const char *session;
	bool json;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard explain BATCH_ID | --sandbox S | --run R [BATCH_ID] | --session S\n"
		"                         [--tenant T] [--state-dir DIR] [--events PATH]\n"
		"                         [--policy-dir DIR] [--json]\n"
		"\n"
		"The life of one batch as one timeline: each attempt with its sandbox, uid slot\n"
		"and limits; every exec with its argv; every deny, trip or kill with the policy\n"
		"line that decided it; the cause booked and why; and a one-line verdict.\n"
		"  BATCH_ID         the batch (the trainer's batch_id, or a request id)\n"
		"  --sandbox S      the batch that ran in sandbox S (a result's \"sandboxes\")\n"
		"  --run R          every batch of run R, one line each (with BATCH_ID: that one)\n"
		"  --session S      an environment's session, step by step, and how it ended\n"
		"  --tenant T       only tenant T's batches\n"
		"  --state-dir DIR  the outcome journal is DIR/journal (default\n"
		"                   $SANDGUARD_STATE_DIR, else /var/lib/sandguard)\n"
		"  --events PATH    the agent's event stream (default " DEFAULT_EVENTS_FILE "),\n"
		"                   its rotated files PATH.1, PATH.2, ... too\n"
		"  --policy-dir DIR where to find the policy of a record that names none\n"
		"  --json           the same as one JSON document\n");
}

static const struct cli_command explain_cmd = { "explain", usage, false };

/* Ids are 1..127 bytes of printable ASCII without spaces. */
static bool id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 127)
		return false;
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p > '~')
			return false;
	return true;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_SANDBOX = 1, O_RUN, O_TENANT, O_STATE, O_EVENTS, O_POLICY, O_JSON, O_SESSION };
	static const struct option longopts[] = {
		{ "sandbox", required_argument, NULL, O_SANDBOX },
		{ "run", required_argument, NULL, O_RUN },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "events", required_argument, NULL, O_EVENTS },
		{ "policy-dir", required_argument, NULL, O_POLICY },
		{ "json", no_argument, NULL, O_JSON },
		{ "session", required_argument, NULL, O_SESSION },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->events = DEFAULT_EVENTS_FILE;
	o->policy_dir = policy_dir_default();
	cli_options_begin();
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_SANDBOX:
			o->q.sandbox = optarg;
			break;
		case O_RUN:
			o->q.run_id = optarg;
			break;
		case O_TENANT:
			o->q.tenant = optarg;
			break;
		case O_STATE:
			o->state_dir = optarg;
			break;
		case O_EVENTS:
			o->events = optarg;
			break;
		case O_POLICY:
			o->policy_dir = optarg;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_SESSION:
			o->session = optarg;
			break;
		default:
			return cli_option_common(&explain_cmd, c, argv);
		}
	}
	if (optind < argc)
		o->q.batch_id = argv[optind++];
	if (optind < argc)
		return cli_usage_error(&explain_cmd, "unexpected argument '%s'", argv[optind]);
	if (o->session && (o->q.batch_id || o->q.sandbox || o->q.run_id))
		return cli_usage_error(&explain_cmd, "%s",
				       "--session names one session: give it alone");
	if (o->session && !id_ok(o->session))
		return cli_usage_error(&explain_cmd, "--session '%s': not a session id",
				       o->session);
	if (o->session)
		return 0;
	if (!o->q.batch_id && !o->q.sandbox && !o->q.run_id)
		return cli_usage_error(&explain_cmd, "%s",
				       "which batch? give BATCH_ID, --sandbox S or --run R");
	if (o->q.sandbox && (o->q.batch_id || o->q.run_id))
		return cli_usage_error(&explain_cmd, "%s",
				       "--sandbox names one batch: give it alone");
	if (o->q.tenant && !tenant_name_valid(o->q.tenant))
		return cli_usage_error(&explain_cmd, "--tenant '%s': not a tenant name",
				       o->q.tenant);
	if (o->q.batch_id && !id_ok(o->q.batch_id))
		return cli_usage_error(&explain_cmd,
				       "'%s': a batch id is 1..127 printable characters",
				       o->q.batch_id);
	if (o->q.sandbox && !id_ok(o->q.sandbox))
		return cli_usage_error(&explain_cmd, "--sandbox '%s': not a sandbox id",
				       o->q.sandbox);
	if (o->q.run_id && !id_ok(o->q.run_id))
		return cli_usage_error(&explain_cmd, "--run '%s': not a run id", o->q.run_id);
	if (!*o->events)
		return cli_usage_error(&explain_cmd, "%s", "--events needs a path");
	return 0;
}

/* ---- text ---- */

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static long long num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* "22:51:08.069" of "2026-11-22T22:51:08.069Z". */
static const char *clock_of(const char *ts, char buf[16])
{
	if (!ts || strlen(ts) < 23)
		return "??:??:??.???";
	memcpy(buf, ts + 11, 12);
	buf[12] = '\0';
	return buf;
}

static const char *base_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path ? path : "?";
}

/* A control character from a tenant's argv or path never reaches the
 * terminal as is. */
static void put_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			printf("\\x%02x", *p);
		else
			putchar(*p);
	}
}

/* An id for a table cell: one the executor accepted has no control
 * characters, but the journal is a file, so say so rather than print one. */
static const char *safe_id(const char *id)
{
	for (const char *p = id ? id : ""; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return "(unprintable id)";
	return id ? id : "-";
}

/* "    actions.egress = kill    beta.json:29  "egress": "kill"," (indented
 * further for the entries of a list none of which matched) */
static void print_place(json_t *line, int indent)
{
	json_t *n = json_object_get(line, "line");
	char what[200];

	snprintf(what, sizeof(what), "%s = %s", str(line, "key"), str(line, "value") ?: "?");
	printf("%*s", 19 + indent, "");
	put_safe(what);
	printf("%*s  ", (int)(strlen(what) + indent < 30 ? 30 - strlen(what) - indent : 0), "");
	if (json_is_integer(n))
		printf("%s:%lld  ", base_of(str(line, "file")), (long long)json_integer_value(n));
	else
		printf("%s: not in the file, the default", base_of(str(line, "file")));
	put_safe(str(line, "text"));
	putchar('\n');
}

static void print_finding(json_t *f)
{
	if (!json_is_object(f))
		return;
	if (str(f, "says") && *str(f, "says")) {
		printf("                 ");
		put_safe(str(f, "says"));
		putchar('\n');
	}
	json_t *x;
	size_t i;

	if (json_is_object(json_object_get(f, "entry")))
		print_place(json_object_get(f, "entry"), 0);
	json_array_foreach(json_object_get(f, "listed"), i, x) print_place(x, 2);
	if (json_is_object(json_object_get(f, "action")))
		print_place(json_object_get(f, "action"), 0);
}

static void print_event(json_t *e)
{
	char clk[16], pid[24] = "-";
	const char *action = str(e, "action");
	bool enforcement = action && strcmp(action, "allowed");

	if (json_is_integer(json_object_get(e, "pid")))
		snprintf(pid, sizeof(pid), "%lld", num(e, "pid"));
	printf("  %s  %-15s pid %-7s ", clock_of(str(e, "ts"), clk), str(e, "type"), pid);
	put_safe(str(e, "comm") ?: "-");
	if (json_is_true(json_object_get(e, "sandbox_init")))
		printf(" (sandbox init)");
	printf("  ");
	put_safe(str(e, "summary"));
	if (enforcement)
		printf("  [%s]", action);
	putchar('\n');
	if (enforcement ||
	    json_is_true(json_object_get(json_object_get(e, "detail"), "oom_killed")))
		print_finding(json_object_get(e, "policy"));
}

static void print_limits(json_t *l)
{
	const char *k;
	json_t *v;
	const char *sep = "";

	if (!json_is_object(l)) {
		printf("  limits  not recorded (a record from before sandguard kept them)\n");
		return;
	}
	printf("  limits  ");
	json_object_foreach(l, k, v)
	{
		if (json_is_real(v))
			printf("%s%s %g", sep, k, json_real_value(v));
		else
			printf("%s%s %lld", sep, k, (long long)json_integer_value(v));
		sep = ", ";
	}
	putchar('\n');
}

static void print_attempt(json_t *a)
{
	json_t *e;
	char clk[16];
	bool shown = false;
	size_t i;

	if (!json_is_integer(json_object_get(a, "attempt"))) { /* from its events alone */
		printf("sandbox %s  (no outcome booked)", str(a, "sandbox") ?: "-");
		if (json_is_integer(json_object_get(a, "uid")))
			printf("  uid %lld", num(a, "uid"));
		printf("  first event %s UTC\n", clock_of(str(a, "started"), clk));
	} else if (num(a, "attempt") == 0) {
		printf("admission  (no sandbox ran)\n");
	} else {
		if (json_is_integer(json_object_get(a, "test")))
			printf("test %lld, ", num(a, "test"));
		printf("attempt %lld  sandbox %s", num(a, "attempt"), str(a, "sandbox") ?: "-");
		if (json_is_integer(json_object_get(a, "uid")))
			printf("  uid %lld", num(a, "uid"));
		else
			printf("  uid not recorded");
		printf("  started %s UTC\n", clock_of(str(a, "started"), clk));
		print_limits(json_object_get(a, "limits"));
	}
	json_array_foreach(json_object_get(a, "events"), i, e)
	{
		print_event(e);
		shown |= json_is_object(json_object_get(e, "policy")) && str(e, "action") &&
			 strcmp(str(e, "action"), "allowed");
	}
	if (!str(a, "cause")) {
		printf("  (no outcome record for this sandbox)\n");
		return;
	}
	printf("  %s  %-15s %s", clock_of(str(a, "ended"), clk),
	       num(a, "attempt") ? "ended" : "refused", str(a, "cause"));
	if (str(a, "rule"))
		printf(" (rule %s)", str(a, "rule"));
	if (str(a, "detail")) {
		printf(": ");
		put_safe(str(a, "detail"));
	}
	printf("\n");
	if (str(a, "reason"))
		printf("                 why: %s\n", str(a, "reason"));
	if (!shown) /* the limit or action, unless an event above showed it */
		print_finding(json_object_get(a, "policy"));
	if (str(a, "decision"))
		printf("                 %s\n", str(a, "decision"));
}

/* The batch's canaries (src/exec/canary.h): what its probes showed. The
 * trainer's result says nothing of them. */
static void print_canary(json_t *c)
{
	if (!json_is_object(c))
		return;
	printf("\ncanary   %lld probe%s mixed in, %lld out of range%s", num(c, "probes"),
	       num(c, "probes") == 1 ? "" : "s", num(c, "failed"),
	       json_is_true(json_object_get(c, "nondeterministic")) ? ", NON-DETERMINISTIC" : "");
	if (str(c, "detail")) {
		printf(": ");
		put_safe(str(c, "detail"));
	}
	putchar('\n');
}

static void print_batch(json_t *b, json_t *sources)
{
	json_t *pol = json_object_get(b, "policy"), *a,
	       *files = json_object_get(sources, "events_files");
	size_t i;

	printf("batch ");
	put_safe(str(b, "batch_id"));
	printf(" of tenant %s", str(b, "tenant"));
	if (str(b, "run_id")) {
		printf(", run ");
		put_safe(str(b, "run_id"));
	}
	if (str(b, "mode"))
		printf(" (%s mode, executor pid %lld)\n", str(b, "mode"), num(b, "executor_pid"));
	else
		printf(" (no outcome record: from the agent's events alone)\n");
	if (str(pol, "file"))
		printf("policy   %s%s\n", str(pol, "file"),
		       json_is_true(json_object_get(pol, "changed_after"))
			       ? "  (CHANGED since this batch began: lines shown are today's)"
			       : "");
	if (str(pol, "error"))
		printf("policy   cannot be read: %s\n", str(pol, "error"));
	printf("journal  %s (%lld records searched)\n", str(sources, "journal"),
	       num(sources, "records_searched"));
	if (str(sources, "events_error") && !json_array_size(files)) {
		printf("events   %s: only the journal's side is shown\n",
		       str(sources, "events_error"));
	} else {
		/* The stream's path: the files read are named as they were when
		 * read, and a rotation may have renamed the live one since. */
		printf("events   %s (%zu file%s read)\n", str(sources, "events_file"),
		       json_array_size(files), json_array_size(files) == 1 ? "" : "s");
		/* Files rotated away before they were read: some events missing. */
		if (str(sources, "events_error"))
			printf("events   %s\n", str(sources, "events_error"));
	}
	json_array_foreach(json_object_get(b, "attempts"), i, a)
	{
		putchar('\n');
		print_attempt(a);
	}
	if (json_array_size(json_object_get(b, "other_events"))) {
		printf("\nevents of this batch in no attempt's sandbox\n");
		json_array_foreach(json_object_get(b, "other_events"), i, a) print_event(a);
	}
	print_canary(json_object_get(b, "canary"));
	if (json_is_object(json_object_get(b, "summary"))) {
		json_t *s = json_object_get(b, "summary");
		printf("\nrequest  %s", str(s, "cause"));
		if (str(s, "detail"))
			printf(": %s", str(s, "detail"));
		putchar('\n');
	}
	printf("\nverdict: ");
	put_safe(str(b, "verdict") ?: "-");
	putchar('\n');
}

/* A batch's cost: the sums over its attempts' records (journal
 * "cpu_us", "wall_ms", the largest "mem_peak_bytes"). */
struct cost {
	double cpu_s, wall_s, peak_mib;
	size_t metered;
};

static void add_cost(json_t *attempts, struct cost *c)
{
	json_t *a;
	size_t k;

	json_array_foreach(attempts, k, a)
	{
		json_t *cpu = json_object_get(a, "cpu_us"),
		       *mem = json_object_get(a, "mem_peak_bytes");
		double mib = json_is_integer(mem) ? (double)json_integer_value(mem) / 1048576.0 : 0;

		if (!json_is_integer(cpu))
			continue;
		c->metered++;
		c->cpu_s += (double)json_integer_value(cpu) / 1e6;
		c->wall_s += (double)json_integer_value(json_object_get(a, "wall_ms")) / 1e3;
		if (mib > c->peak_mib)
			c->peak_mib = mib;
	}
}

/* --run alone: one line per batch, with its scores' mean and whether they
 * were all equal (a run whose rewards "went constant" shows where), its
 * CPU seconds, and the run's totals last. */
static void print_run(json_t *doc)
{
	struct cost run = { 0 };
	json_t *b;
	size_t i;

	printf("%-23s  %-20s %-16s %8s  %-24s %8s  %-5s %8s  %s\n", "STARTED (UTC)", "BATCH",
	       "TENANT", "ATTEMPTS", "CAUSE", "MEAN", "CONST", "CPU_S", "SANDBOXES");
	json_array_foreach(json_object_get(doc, "batches"), i, b)
	{
		json_t *a, *first = json_array_get(json_object_get(b, "attempts"), 0);
		const char *st = str(first, "started") ?: str(first, "ended") ?: "?";
		json_t *mean = json_object_get(b, "score_mean");
		char when[32], m[32] = "-";
		struct cost c = { 0 };
		size_t k;

		snprintf(when, sizeof(when), "%.10s %.12s", st, strlen(st) > 11 ? st + 11 : "");
		if (json_is_number(mean))
			snprintf(m, sizeof(m), "%.4g", json_number_value(mean));
		add_cost(json_object_get(b, "attempts"), &c);
		printf("%-23s  %-20s %-16s %8zu  %-24s %8s  %-5s %8.3f ", when,
		       safe_id(str(b, "batch_id")), str(b, "tenant"),
		       json_array_size(json_object_get(b, "attempts")),
		       str(b, "cause") ?: "(not booked)", m,
		       json_is_true(json_object_get(b, "constant")) ? "yes" : "no", c.cpu_s);
		json_array_foreach(json_object_get(b, "attempts"), k, a)
			printf(" %s", str(a, "sandbox") ?: "-");
		putchar('\n');
		run.cpu_s += c.cpu_s;
		run.wall_s += c.wall_s;
		run.metered += c.metered;
		if (c.peak_mib > run.peak_mib)
			run.peak_mib = c.peak_mib;
	}
	printf("cost: %zu metered attempts, %.3f CPU seconds, %.3f run seconds, peak memory "
	       "%.1f MiB\n",
	       run.metered, run.cpu_s, run.wall_s, run.peak_mib);
}

/* A source that could not be read: the timeline shows the rest, and the
 * exit status says it is incomplete. */
static bool incomplete(json_t *doc)
{
	json_t *b;
	json_t *sources = json_object_get(doc, "sources");
	const char *why = str(sources, "events_error");
	size_t i;
	bool bad = why != NULL;

	if (why)
		fprintf(stderr, "sandguard explain: %s: %s\n", why,
			json_array_size(json_object_get(sources, "events_files"))
				? "the timeline may miss some of the agent's events"
				: "the timeline shows the journal's side only");
	json_array_foreach(json_object_get(doc, "batches"), i, b)
	{
		why = str(json_object_get(b, "policy"), "error");
		if (why)
			fprintf(stderr,
				"sandguard explain: batch %s: the policy cannot be read (%s): no "
				"policy lines are shown\n",
				str(b, "batch_id"), why);
		bad |= why != NULL;
	}
	return bad;
}

int cmd_explain(int argc, char **argv)
{
	struct opts o;
	struct journal j;
	struct timeline_sources src;
	json_t *doc = NULL, *b;
	char err[1024];
	size_t i;
	int ret;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret < 0 ? SG_EXIT_OK : ret;
	if (journal_init(&j, o.state_dir)) {
		fprintf(stderr, "sandguard explain: the state directory's path is too long\n");
		return SG_EXIT_USAGE;
	}
	if (o.session)
		return explain_session(o.session, o.q.tenant, j.dir, o.events, o.json);
	src = (struct timeline_sources){ .journal_dir = j.dir,
					 .events_file = o.events,
					 .policy_dir = o.policy_dir };
	ret = timeline_build(&o.q, &src, &doc, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "sandguard explain: %s\n", ret == -ENOMEM ? "out of memory" : err);
		return ret == -ESRCH ? SG_EXIT_TENANT : SG_EXIT_PLATFORM;
	}
	if (o.json) {
		json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
		putchar('\n');
	} else if (o.q.run_id && !o.q.batch_id) {
		print_run(doc);
	} else {
		size_t n = json_array_size(json_object_get(doc, "batches"));
		/* Said first, so that nobody reads the first timeline as the
		 * only one. */
		if (n > 1 && o.q.batch_id)
			printf("%zu batches have the id %s (a trainer's batch ids repeat across runs "
			       "and restarts): each with its own attempts and events, oldest "
			       "first\n\n",
			       n, safe_id(o.q.batch_id));
		json_array_foreach(json_object_get(doc, "batches"), i, b)
		{
			if (i)
				printf("\n----\n\n");
			print_batch(b, json_object_get(doc, "sources"));
		}
	}
	ret = incomplete(doc);
	json_decref(doc);
	if (fflush(stdout))
		return SG_EXIT_PLATFORM;
	return ret ? SG_EXIT_TENANT : SG_EXIT_OK;
}
