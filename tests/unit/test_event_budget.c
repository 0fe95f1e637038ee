/* The tenants' event budget (src/telemetry/event_log.h): one tenant's
 * flood cannot rotate another tenant's evidence out; its lines over the
 * budget are counted and summarized in an events_dropped line. Files of
 * 1000 bytes, 100-byte lines, a share of 25%: 2 lines per tenant a file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "telemetry/event_log.h"
#include "event_log_files.h"

#define MAX_BYTES 1000
#define KEEP      2
#define FLOOD     10000

/* path suffix's content, "" when it does not exist. Caller frees. */
static char *content(const char *suffix)
{
	char *buf = slurp(suffix);

	return buf ? buf : strdup("");
}

static void write_file(const char *suffix, const char *content)
{
	char p[160];
	FILE *f;

	snprintf(p, sizeof(p), "%s%s", path, suffix);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(content, f);
	fclose(f);
}

/* Whether any retained file holds needle. */
static bool retained(const char *needle)
{
	static const char *const suffixes[] = { "", ".1", ".2" };
	bool found = false;

	for (size_t i = 0; i < 3 && !found; i++) {
		char *all = content(suffixes[i]);
		found = strstr(all, needle) != NULL;
		free(all);
	}
	return found;
}

/* A 99-character line of tenant's (100 bytes with its newline). */
static const char *line100(const char *tenant, int i, char *buf)
{
	int n = snprintf(buf, 100, "{\"tenant\":\"%s\",\"n\":%06d,\"pad\":\"", tenant, i);

	memset(buf + n, 'x', (size_t)(97 - n));
	strcpy(buf + 97, "\"}");
	assert_int_equal(strlen(buf), 99);
	return buf;
}

static struct event_log *open_budget(unsigned share, uint64_t summary_ms)
{
	struct event_log_budget b = { .share_pct = share, .node = "n1", .summary_ms = summary_ms };
	struct event_log *log = event_log_open(path, MAX_BYTES, KEEP);

	assert_non_null(log);
	assert_int_equal(event_log_set_budget(log, &b), 0);
	return log;
}

/* Appends n lines of tenant from number first; returns how many were
 * refused as over budget. */
static int put(struct event_log *log, const char *tenant, int first, int n)
{
	char l[100];
	int refused = 0;

	for (int i = first; i < first + n; i++) {
		int err = event_log_append_tenant(log, tenant, line100(tenant, i, l), 99);
		if (err == -EDQUOT)
			refused++;
		else
			assert_int_equal(err, 0);
	}
	return refused;
}

/* The events_dropped line of tenant in suffix's file (the last one). */
static json_t *summary_of(const char *suffix, const char *tenant)
{
	char *all = content(suffix), *save = NULL;
	json_t *found = NULL;

	for (char *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(l, 0, NULL);
		if (j &&
		    !strcmp(json_string_value(json_object_get(j, "type")) ?: "",
			    "events_dropped") &&
		    !strcmp(json_string_value(json_object_get(j, "tenant")) ?: "", tenant)) {
			json_decref(found);
			found = j;
		} else {
			json_decref(j);
		}
	}
	free(all);
	return found;
}

static json_int_t detail_int(json_t *j, const char *key)
{
	return json_integer_value(json_object_get(json_object_get(j, "detail"), key));
}

struct seen {
	int n;
	char tenant[16];
	uint64_t lines;
};

static void count_dropped(const char *tenant, uint64_t lines, void *ctx)
{
	struct seen *s = ctx;

	snprintf(s->tenant, sizeof(s->tenant), "%s", tenant);
	s->lines = lines;
	s->n++;
}

/* The retained files are full of earlier evidence (old ones and bravo's);
 * alpha floods: the budget must keep all of it. */
static void flood_after_evidence(unsigned share, struct event_log_stats *st, struct seen *seen)
{
	struct event_log *log;

	write_file(".1", "{\"old\":1}\n");
	write_file(".2", "{\"old\":2}\n");
	log = open_budget(share, 3600 * 1000);
	assert_int_equal(put(log, "bravo", 0, 2), 0);
	put(log, "alpha", 0, FLOOD);
	assert_int_equal(event_log_flush(log), 0);
	event_log_get_stats(log, st);
	event_log_foreach_dropped(log, count_dropped, seen);
	event_log_close(log);
}

static void test_flood_keeps_other_tenants_evidence(void **state)
{
	struct event_log_stats st;
	struct seen seen = { 0 };
	char l[100];
	json_t *sum;

	flood_after_evidence(25, &st, &seen);
	/* Alpha filled its 250 bytes of the file (2 lines); the file never
	 * filled, nothing rotated, and everything from before is there. */
	assert_int_equal(st.rotations, 0);
	assert_int_equal(st.budget_dropped, FLOOD - 2);
	assert_true(retained(line100("bravo", 0, l)));
	assert_true(retained(line100("bravo", 1, l)));
	assert_true(retained("{\"old\":1}"));
	assert_true(retained("{\"old\":2}"));
	assert_true(retained(line100("alpha", 1, l)));
	assert_false(retained(line100("alpha", 2, l)));
	/* Counted for alpha alone (the metric's source). */
	assert_int_equal(seen.n, 1);
	assert_string_equal(seen.tenant, "alpha");
	assert_int_equal(seen.lines, FLOOD - 2);
	/* The window's summary, written at close, says how many and why. */
	sum = summary_of("", "alpha");
	assert_non_null(sum);
	assert_string_equal(json_string_value(json_object_get(sum, "node")), "n1");
	assert_string_equal(json_string_value(json_object_get(sum, "action")), "logged");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(sum, "detail"), "reason")),
		"tenant_share");
	assert_int_equal(detail_int(sum, "lines"), FLOOD - 2);
	assert_int_equal(detail_int(sum, "bytes"), (FLOOD - 2) * 100);
	assert_int_equal(detail_int(sum, "budget_bytes"), 250);
	assert_int_equal(detail_int(sum, "file_bytes"), MAX_BYTES);
	json_decref(sum);
	assert_null(summary_of("", "bravo"));
}

/* The same flood with no budget (100%) erases every other line: the
 * flood above is big enough to matter. */
static void test_without_budget_the_flood_evicts(void **state)
{
	struct event_log_stats st;
	struct seen seen = { 0 };
	char l[100];

	flood_after_evidence(100, &st, &seen);
	assert_int_equal(st.budget_dropped, 0);
	assert_int_equal(seen.n, 0);
	assert_false(retained(line100("bravo", 0, l)));
	assert_false(retained("{\"old\":"));
	assert_null(summary_of("", "alpha"));
}

/* A rotation (by other tenants' lines) ends the window: the new file
 * opens with alpha's summary, and alpha has a fresh budget in it. */
static void test_rotation_ends_the_window(void **state)
{
	struct event_log *log;
	struct event_log_stats st;
	const char *others[] = { "c1", "c2", "c3", "c4" };
	char l[100], *live;
	json_t *sum;

	write_file(".1", "{\"old\":1}\n");
	write_file(".2", "{\"old\":2}\n");
	log = open_budget(25, 3600 * 1000);
	assert_int_equal(put(log, "bravo", 0, 2), 0);
	assert_int_equal(put(log, "alpha", 0, 50), 48);
	for (int i = 0; i < 4; i++)
		assert_int_equal(put(log, others[i], 0, 2), 0);
	assert_int_equal(event_log_flush(log), 0);
	live = content("");
	assert_non_null(strstr(live, "\"type\":\"events_dropped\""));
	assert_ptr_equal(strstr(live, "\"tenant\":\"alpha\""), strstr(live, "\"tenant\""));
	free(live);
	sum = summary_of("", "alpha");
	assert_non_null(sum);
	assert_int_equal(detail_int(sum, "lines"), 48);
	json_decref(sum);
	assert_int_equal(put(log, "alpha", 100, 3), 1);
	event_log_get_stats(log, &st);
	event_log_close(log);
	assert_int_equal(st.rotations, 1);
	assert_int_equal(st.budget_dropped, 49);
	/* bravo's lines went to .1 with the rotation: still retained. */
	assert_true(retained(line100("bravo", 1, l)));
	assert_true(retained(line100("alpha", 101, l)));
	assert_false(retained(line100("alpha", 102, l)));
	/* The one dropped line of the new window: its summary at close. */
	sum = summary_of("", "alpha");
	assert_int_equal(detail_int(sum, "lines"), 1);
	json_decref(sum);
}

/* A summary comes summary_ms after the first dropped line even if the
 * file never rotates (0: at every flush), one per period. */
static void test_summary_every_period(void **state)
{
	struct event_log *log;
	json_t *sum;

	write_file(".2", "{\"old\":2}\n");
	log = open_budget(25, 0);
	assert_int_equal(put(log, "alpha", 0, 7), 5);
	assert_int_equal(event_log_flush(log), 0);
	sum = summary_of("", "alpha");
	assert_int_equal(detail_int(sum, "lines"), 5);
	json_decref(sum);
	assert_int_equal(event_log_flush(log), 0); /* nothing new: no line */
	assert_int_equal(put(log, "alpha", 7, 3), 3);
	assert_int_equal(event_log_flush(log), 0);
	sum = summary_of("", "alpha");
	assert_int_equal(detail_int(sum, "lines"), 3);
	json_decref(sum);
	event_log_close(log);
	char *live = content("");
	int n = 0;
	for (char *p = live; (p = strstr(p, "events_dropped")); p++)
		n++;
	free(live);
	assert_int_equal(n, 2);
}

/* A tenant alone on the node keeps writing (rotating its own lines out
 * harms nobody), until the file the next rotation deletes holds another
 * tenant's line: then it is held to its share, and that line survives. */
static void test_lone_tenant_until_another_is_at_stake(void **state)
{
	struct event_log *log = open_budget(25, 3600 * 1000);
	struct event_log_stats st;
	char l[100], *oldest;

	assert_int_equal(put(log, "alpha", 0, 30), 0);
	assert_int_equal(put(log, "bravo", 0, 1), 0);
	/* 9 fill bravo's file, 10 the next (deleting alpha-only files), then
	 * bravo's file is next to go: 2 more, 19 dropped. */
	assert_int_equal(put(log, "alpha", 30, 40), 19);
	event_log_get_stats(log, &st);
	event_log_close(log);
	assert_int_equal(st.rotations, 5);
	assert_int_equal(st.budget_dropped, 19);
	oldest = content(".2");
	assert_non_null(strstr(oldest, line100("bravo", 0, l)));
	free(oldest);
	assert_true(retained(line100("alpha", 50, l)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_flood_keeps_other_tenants_evidence, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_without_budget_the_flood_evicts, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rotation_ends_the_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_summary_every_period, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lone_tenant_until_another_is_at_stake, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
