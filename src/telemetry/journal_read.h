/* Reading the outcome journal in order, one complete record line at a
 * time, from a position on (see journal.h). Read-only: a reader never
 * changes a file. Lines still being written (no newline yet) wait for the
 * next call; a segment's unterminated last line, once a later segment
 * exists, is torn (its executor died mid-write) and comes back as a line
 * the caller will find bad.
 *
 * Gaps: when the segment a position names was deleted by rotation before
 * it was read, the reader moves on to the oldest one left and counts the
 * segments skipped in `gap_segments` (the caller says so). */
#ifndef SG_JOURNAL_READ_H
#define SG_JOURNAL_READ_H
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "journal.h"

#define JOURNAL_LINE_MAX (1u << 20) /* a longer "line" is skipped as bad */

struct journal_cursor {
	char dir[PATH_MAX];
	struct journal_pos pos; /* the next byte to read */
	int fd;                 /* segment pos.segment, or -1 */
	char *buf;              /* buf[head..len): pos.segment's bytes from pos.offset on */
	size_t head, len, cap;
	uint64_t gap_segments; /* segments gone before they were read */
	uint64_t oversized;    /* lines over JOURNAL_LINE_MAX, skipped */
};

/* Start reading `dir` at `from` ({0, 0}: the oldest segment's start). */
void journal_cursor_init(struct journal_cursor *c, const char *dir, const struct journal_pos *from);
void journal_cursor_close(struct journal_cursor *c);

/* The next complete line: 1 with *line (NUL-terminated in place of its
 * newline, valid until the next call) of *len bytes starting at *at; 0 when
 * there is none yet; -errno on a read error (the cursor stays put). */
int journal_next(struct journal_cursor *c, char **line, size_t *len, struct journal_pos *at);

/* The oldest segment number present (0 if none). */
uint64_t journal_oldest(const char *dir);

#endif
