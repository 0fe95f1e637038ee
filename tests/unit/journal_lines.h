/* For unit tests that check what was booked: every record of the outcome
 * journal of $SANDGUARD_STATE_DIR, in order, as parsed JSON objects. */
#ifndef SG_TEST_JOURNAL_LINES_H
#define SG_TEST_JOURNAL_LINES_H
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include "telemetry/journal.h"
#include "telemetry/journal_read.h"

/* A JSON array of the records (an empty one when there is no journal). */
static inline json_t *journal_lines(void)
{
	struct journal j;
	struct journal_cursor c;
	struct journal_pos at;
	json_t *all = json_array();
	char *line;
	size_t len;

	if (journal_init(&j, NULL))
		abort();
	journal_cursor_init(&c, j.dir, &(struct journal_pos){ 0, 0 });
	while (journal_next(&c, &line, &len, &at) > 0) {
		json_t *rec = json_loadb(line, len, 0, NULL);
		if (!rec) {
			fprintf(stderr, "journal_lines: not JSON: %.*s\n", (int)len, line);
			abort();
		}
		json_array_append_new(all, rec);
	}
	journal_cursor_close(&c);
	return all;
}

static inline size_t journal_count(void)
{
	json_t *all = journal_lines();
	size_t n = json_array_size(all);

	json_decref(all);
	return n;
}

/* Forget every record (the test starts over). */
static inline void journal_clear(void)
{
	struct journal j;
	char cmd[PATH_MAX + 16];

	if (journal_init(&j, NULL))
		abort();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", j.dir);
	if (system(cmd))
		abort();
}

#endif
