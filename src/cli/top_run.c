/* One run's totals from the journal (see src/cli/top_run.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "telemetry/journal.h"
#include "telemetry/journal_read.h"
#include "telemetry/journal_record.h"
#include "telemetry/ledger_cost.h"
#include "top_run.h"

struct run_totals {
	char tenant[SG_TENANT_MAX]; /* the first record's */
	bool several;               /* records of other tenants too */
	unsigned long long batches, attempts, bad;
	struct ledger_cost cost[LEDGER_COST_CLASSES];
	uint64_t mem_peak_bytes;
};

static int fold_run_records(const struct journal *j, const char *run_id, struct run_totals *t)
{
	struct journal_cursor c;
	struct journal_pos from = { 0, 0 }, at;
	struct sg_outcome o;
	char *line, why[128];
	size_t len;
	int n;

	journal_cursor_init(&c, j->dir, &from);
	while ((n = journal_next(&c, &line, &len, &at)) > 0) {
		if (journal_record_decode(line, len, &o, why, sizeof(why))) {
			t->bad++;
			continue;
		}
		if (strcmp(o.run_id, run_id))
			continue;
		/* A run is one tenant's; should two share an id, both are named. */
		if (!t->tenant[0])
			snprintf(t->tenant, sizeof(t->tenant), "%s", o.tenant);
		else if (strcmp(t->tenant, o.tenant))
			t->several = true;
		t->attempts += o.attempt > 0;
		t->batches += o.final;
		ledger_cost_book(t->cost, &o);
		if (o.mem_peak_known && o.mem_peak_bytes > t->mem_peak_bytes)
			t->mem_peak_bytes = o.mem_peak_bytes;
	}
	journal_cursor_close(&c);
	return n;
}

static void print_totals(const char *run_id, const struct run_totals *t, bool as_json)
{
	struct ledger_cost all = { 0 };
	json_t *by_class = json_object();

	for (int k = 0; k < LEDGER_COST_CLASSES; k++) {
		all.runs += t->cost[k].runs;
		all.cpu_us += t->cost[k].cpu_us;
		all.wall_ms += t->cost[k].wall_ms;
		all.mem_byte_seconds += t->cost[k].mem_byte_seconds;
		if (t->cost[k].runs)
			json_object_set_new(by_class, fault_class_name(k),
					    json_real((double)t->cost[k].cpu_us / 1e6));
	}
	if (as_json) {
		json_t *doc = json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:f, s:o, s:f, s:I, s:f}",
					"run_id", run_id, "tenant", t->tenant, "other_tenants",
					t->several, "batches", (json_int_t)t->batches, "attempts",
					(json_int_t)t->attempts, "metered", (json_int_t)all.runs,
					"cpu_seconds", (double)all.cpu_us / 1e6,
					"cpu_seconds_by_class", by_class, "run_seconds",
					(double)all.wall_ms / 1e3, "mem_peak_bytes",
					(json_int_t)t->mem_peak_bytes, "mem_byte_seconds",
					all.mem_byte_seconds);
		json_dumpf(doc, stdout, JSON_INDENT(1));
		putchar('\n');
		json_decref(doc);
		return;
	}
	printf("run %s (tenant %s%s): %llu batches, %llu attempts (%llu metered)\n", run_id,
	       t->tenant, t->several ? " and others" : "", t->batches, t->attempts,
	       (unsigned long long)all.runs);
	printf("  CPU %.3f s, run time %.3f s, peak memory %.1f MiB, memory %.6f GiB-hours\n",
	       (double)all.cpu_us / 1e6, (double)all.wall_ms / 1e3,
	       (double)t->mem_peak_bytes / 1048576.0, all.mem_byte_seconds / 1073741824.0 / 3600.0);
	for (int k = 0; k < LEDGER_COST_CLASSES; k++)
		if (t->cost[k].runs)
			printf("  CPU of %-11s runs: %.3f s\n", fault_class_name(k),
			       (double)t->cost[k].cpu_us / 1e6);
	json_decref(by_class);
}

int top_run(const char *state_dir, const char *run_id, bool as_json)
{
	struct run_totals t = { 0 };
	struct journal j;
	int err;

	if (journal_init(&j, state_dir)) {
		fprintf(stderr, "sandguard top: the state directory's path is too long\n");
		return SG_EXIT_USAGE;
	}
	err = fold_run_records(&j, run_id, &t);
	if (err < 0) {
		fprintf(stderr, "sandguard top: cannot read the journal %s: %s\n", j.dir,
			strerror(-err));
		return SG_EXIT_PLATFORM;
	}
	if (!t.attempts && !t.batches) {
		fprintf(stderr, "sandguard top: the journal %s has no record of run %s\n", j.dir,
			run_id);
		return SG_EXIT_TENANT;
	}
	if (t.bad)
		fprintf(stderr, "sandguard top: %llu bad records skipped\n", t.bad);
	print_totals(run_id, &t, as_json);
	return SG_EXIT_OK;
}
