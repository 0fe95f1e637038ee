/* sandguard explain --session S: an environment's session step by step.
 * Its records are the journal's with batch_id S (one per step, and the
 * final); its events are those of its sandbox, each joined to its step
 * by the batch id the step's runs carry ("S/<step>"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "telemetry/timeline_read.h"

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

static void put_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			printf("\\x%02x", *p);
		else
			putchar(*p);
}

/* The step an event belongs to: N of its batch id "S/N", else 0. */
static long step_of(json_t *ev, const char *session)
{
	const char *b = json_string_value(json_object_get(ev, "batch_id"));
	size_t n = strlen(session);

	if (!b || strncmp(b, session, n) || b[n] != '/')
		return 0;
	return strtol(b + n + 1, NULL, 10);
}

static void print_text(const char *session, json_t *records, json_t *events)
{
	json_t *r, *first = json_array_get(records, 0), *final = NULL, *ev;
	size_t i, j;

	printf("session %s  tenant %s  run %s  sandbox %s\n", session, str(first, "tenant"),
	       str(first, "run_id"), str(first, "sandbox"));
	json_array_foreach(records, i, r)
	{
		json_t *step = json_object_get(r, "step");

		if (json_is_true(json_object_get(r, "final")))
			final = r;
		if (!json_is_integer(step))
			continue;
		printf("\nstep %lld  %s  %s", (long long)json_integer_value(step),
		       str(r, "started"), str(r, "cause"));
		if (json_is_string(json_object_get(r, "rule")))
			printf(" (rule %s)", str(r, "rule"));
		printf("  wall %lld ms  cpu %lld ms\n",
		       (long long)json_integer_value(json_object_get(r, "wall_ms")),
		       (long long)json_integer_value(json_object_get(r, "cpu_ms")));
		if (json_is_string(json_object_get(r, "detail"))) {
			printf("    ");
			put_safe(str(r, "detail"));
			putchar('\n');
		}
		json_array_foreach(events, j, ev)
		{
			if (step_of(ev, session) != json_integer_value(step))
				continue;
			printf("    event: ");
			put_safe(str(ev, "summary"));
			putchar('\n');
		}
	}
	if (final) {
		printf("\nended: %s  %s", str(final, "session_end"), str(final, "cause"));
		if (json_is_string(json_object_get(final, "rule")))
			printf(" (rule %s)", str(final, "rule"));
		printf("  class %s\n    ", str(final, "class"));
		put_safe(str(final, "detail"));
		putchar('\n');
	} else {
		printf("\nnot ended yet (no final record)\n");
	}
}

int explain_session(const char *session, const char *tenant, const char *journal_dir,
		    const char *events_file, bool json)
{
	struct record_match rm = { .key = "batch_id", .value = session, .tenant = tenant };
	json_t *records = json_array(), *events = json_array(), *files = json_array();
	const char *sandboxes[1];
	struct scan_stats st = { 0 };
	char err[512];
	int ret = SG_EXIT_OK;

	if (!records || !events || !files) {
		fprintf(stderr, "sandguard explain: out of memory\n");
		return SG_EXIT_PLATFORM;
	}
	if (timeline_read_records(journal_dir, &rm, records, &st, err, sizeof(err))) {
		fprintf(stderr, "sandguard explain: %s\n", err);
		ret = SG_EXIT_PLATFORM;
		goto out;
	}
	if (!json_array_size(records)) {
		fprintf(stderr, "sandguard explain: no session %s in the journal %s\n", session,
			journal_dir);
		ret = SG_EXIT_TENANT;
		goto out;
	}
	sandboxes[0] = str(json_array_get(records, 0), "sandbox");
	if (timeline_read_events(events_file,
				 &(struct event_match){ .sandboxes = sandboxes,
							.n_sandboxes = 1,
							.tenant = tenant,
							.from_ms = 0,
							.to_ms = INT64_MAX },
				 events, files, &st, err, sizeof(err)))
		fprintf(stderr, "sandguard explain: %s: the steps show the journal's side only\n",
			err);
	if (json) {
		json_t *doc = json_pack("{s:s, s:O, s:O}", "session", session, "records", records,
					"events", events);

		json_dumpf(doc, stdout, JSON_INDENT(1));
		putchar('\n');
		json_decref(doc);
	} else {
		print_text(session, records, events);
	}
out:
	json_decref(records);
	json_decref(events);
	json_decref(files);
	return ret;
}
