/* The journal fold (see outcome_fold.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "journal_record.h"
#include "lib/log.h"
#include "outcome_fold.h"

#define BAD_LINES_LOGGED 20 /* then only counted: a flood must not flood the log */

int fold_init(struct outcome_fold *f, const char *journal_dir, struct ledger *ledger,
	      const struct journal_pos *from)
{
	memset(f, 0, sizeof(*f));
	f->ledger = ledger;
	f->ids = outcome_ids_new();
	if (!f->ids)
		return -ENOMEM;
	journal_cursor_init(&f->cur, journal_dir, from);
	return 0;
}

void fold_free(struct outcome_fold *f)
{
	journal_cursor_close(&f->cur);
	outcome_ids_free(f->ids);
	f->ids = NULL;
}

struct journal_pos fold_position(const struct outcome_fold *f)
{
	return f->cur.pos;
}

static bool before(const struct journal_pos *a, const struct journal_pos *b)
{
	return a->segment < b->segment || (a->segment == b->segment && a->offset < b->offset);
}

static void note_bad(struct outcome_fold *f, const struct journal_pos *at, const char *why)
{
	if (f->stats.bad++ < BAD_LINES_LOGGED)
		sg_warn("journal: %s: segment %" PRIu64 " offset %" PRIu64
			": not a valid record (%s): skipped",
			f->cur.dir, at->segment, at->offset, why);
}

/* A new segment: the ids of the ones deleted since leave the set. */
static void track_segment(struct outcome_fold *f, uint64_t segment)
{
	uint64_t oldest;

	if (segment == f->segment)
		return;
	f->segment = segment;
	oldest = journal_oldest(f->cur.dir);
	if (oldest)
		outcome_ids_forget_before(f->ids, oldest);
}

static bool in_list(const char *name, char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			return true;
	return false;
}

int fold_prime(struct outcome_fold *f, char *const *reset, size_t n_reset)
{
	struct journal_cursor c;
	struct journal_pos at, upto = f->cur.pos;
	struct sg_outcome o;
	char id[SG_ID_BUF], why[160], *line;
	size_t len;
	int ret, n = 0;

	if (upto.segment == 0)
		return 0; /* folding from the start: nothing before it */
	journal_cursor_init(&c, f->cur.dir, &(struct journal_pos){ 0, 0 });
	while ((ret = journal_next(&c, &line, &len, &at)) > 0 && before(&at, &upto)) {
		n++;
		if (!n_reset && !journal_record_id(line, len, id, sizeof(id))) {
			ret = outcome_ids_add(f->ids, id, at.segment);
		} else if (journal_record_decode(line, len, &o, why, sizeof(why))) {
			continue; /* counted when it was folded */
		} else {
			ret = outcome_ids_add(f->ids, o.id, at.segment);
			if (ret > 0 && in_list(o.tenant, reset, n_reset))
				ledger_book_outcome(f->ledger, &o);
		}
		if (ret < 0)
			break;
	}
	f->stats.gap_segments += c.gap_segments;
	journal_cursor_close(&c);
	return ret < 0 ? ret : n;
}

int fold_run(struct outcome_fold *f, size_t max)
{
	struct journal_pos at;
	struct sg_outcome o;
	char why[160], *line;
	size_t len, n = 0;
	uint64_t gaps = f->cur.gap_segments;
	int ret = 0;

	while (n < max && (ret = journal_next(&f->cur, &line, &len, &at)) > 0) {
		n++;
		track_segment(f, at.segment);
		if (journal_record_decode(line, len, &o, why, sizeof(why))) {
			note_bad(f, &at, why);
			continue;
		}
		ret = outcome_ids_add(f->ids, o.id, at.segment);
		if (ret < 0)
			break;
		if (ret == 0) {
			f->stats.duplicates++;
			continue;
		}
		if (ledger_book_outcome(f->ledger, &o)) {
			note_bad(f, &at, "refused by the ledger");
			continue;
		}
		f->stats.booked++;
		if (f->observe)
			f->observe(f->observe_ctx, &o);
	}
	f->stats.gap_segments += f->cur.gap_segments - gaps;
	return ret < 0 ? ret : (int)n;
}
