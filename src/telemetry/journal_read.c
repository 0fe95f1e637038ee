/* Reading the journal (see journal_read.h). The buffer holds the bytes of
 * the current segment from pos.offset on: buf[head..len) are unread; a line
 * handed out stays in the buffer until the next read moves the rest down. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "journal_read.h"
#include "lib/log.h"

#define READ_CHUNK (256u << 10)

uint64_t journal_oldest(const char *dir)
{
	uint64_t *seqs, oldest = 0;
	size_t n;

	if (journal_segments(dir, &seqs, &n) == 0 && n)
		oldest = seqs[0];
	free(seqs);
	return oldest;
}

void journal_cursor_init(struct journal_cursor *c, const char *dir, const struct journal_pos *from)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	c->pos = *from;
	c->fd = -1;
}

void journal_cursor_close(struct journal_cursor *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
	c->head = c->len = c->cap = 0;
}

/* The first segment after `seq` that exists (0 if none); a hole between
 * them is a gap. */
static uint64_t next_segment(struct journal_cursor *c, uint64_t seq)
{
	uint64_t *seqs, next = 0;
	size_t n;

	if (journal_segments(c->dir, &seqs, &n))
		return 0;
	for (size_t i = 0; i < n && !next; i++)
		if (seqs[i] > seq)
			next = seqs[i];
	free(seqs);
	return next;
}

static void move_to(struct journal_cursor *c, uint64_t seq)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->head = c->len = 0;
	c->pos = (struct journal_pos){ seq, 0 };
}

/* Open the segment of c->pos, moving past gaps. 1 open, 0 nothing to read
 * yet, -errno. */
static int open_current(struct journal_cursor *c)
{
	char path[PATH_MAX];
	uint64_t *seqs;
	size_t n;
	int err;

	if (c->fd >= 0)
		return 1;
	if ((err = journal_segments(c->dir, &seqs, &n)))
		return err;
	if (n == 0) {
		free(seqs);
		return 0;
	}
	if (c->pos.segment == 0) {
		c->pos = (struct journal_pos){ seqs[0], 0 };
	} else if (c->pos.segment < seqs[0] || c->pos.segment > seqs[n - 1]) {
		/* Deleted before it was read, or the journal started over
		 * (its newest segment is older than where we were). */
		uint64_t lost = c->pos.segment < seqs[0] ? seqs[0] - c->pos.segment : 1;
		sg_warn("journal: %s: segment %" PRIu64 " is gone; going on from segment %" PRIu64
			" (outcomes in between were never folded)",
			c->dir, c->pos.segment, seqs[0]);
		c->gap_segments += lost;
		c->pos = (struct journal_pos){ seqs[0], 0 };
	}
	free(seqs);
	if ((err = journal_segment_path(c->dir, c->pos.segment, path, sizeof(path))))
		return err;
	c->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (c->fd < 0 && errno == ENOENT) {
		uint64_t next = next_segment(c, c->pos.segment);
		if (!next)
			return 0;
		c->gap_segments += next - c->pos.segment;
		move_to(c, next);
		return open_current(c);
	}
	return c->fd < 0 ? -errno : 1;
}

/* Read what the segment has past the buffered bytes. >0 bytes read, 0 at
 * its end, -errno. The lines handed out before are dropped first. */
static ssize_t fill(struct journal_cursor *c)
{
	ssize_t n;

	if (c->head) { /* only a partial line moves */
		memmove(c->buf, c->buf + c->head, c->len - c->head);
		c->len -= c->head;
		c->head = 0;
	}
	if (!c->buf || c->cap - c->len < READ_CHUNK) {
		size_t cap = c->len + READ_CHUNK + 1;
		char *grown = realloc(c->buf, cap);
		if (!grown)
			return -ENOMEM;
		c->buf = grown;
		c->cap = cap;
	}
	do
		n = pread(c->fd, c->buf + c->len, c->cap - 1 - c->len,
			  (off_t)(c->pos.offset + c->len));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	c->len += n;
	return n;
}

/* Hand out the next n bytes as a line, ended by a newline (skip 1) or by
 * the end of a torn segment (skip 0). It stays valid until the next call. */
static int hand_out(struct journal_cursor *c, size_t n, size_t skip, char **line, size_t *len,
		    struct journal_pos *at)
{
	*line = c->buf + c->head;
	(*line)[n] = '\0';
	*len = n;
	*at = c->pos;
	c->head += n + skip;
	c->pos.offset += n + skip;
	return 1;
}

/* Drop n unread bytes (an oversized line). */
static void skip_bytes(struct journal_cursor *c, size_t n)
{
	c->oversized++;
	c->head += n;
	c->pos.offset += n;
}

int journal_next(struct journal_cursor *c, char **line, size_t *len, struct journal_pos *at)
{
	for (;;) {
		uint64_t next;
		ssize_t got;
		char *nl;
		int ret;

		if ((ret = open_current(c)) <= 0)
			return ret;
		nl = c->buf ? memchr(c->buf + c->head, '\n', c->len - c->head) : NULL;
		if (nl && (size_t)(nl - c->buf - c->head) > JOURNAL_LINE_MAX) {
			skip_bytes(c, (size_t)(nl - c->buf - c->head) + 1);
			continue;
		}
		if (nl)
			return hand_out(c, (size_t)(nl - c->buf - c->head), 1, line, len, at);
		if (c->len - c->head > JOURNAL_LINE_MAX) /* no newline in sight */
			skip_bytes(c, c->len - c->head);
		if ((got = fill(c)) != 0) {
			if (got < 0)
				return (int)got;
			continue;
		}
		/* The end of the segment, for now. It is final once a later
		 * one exists: then read once more, for what was appended
		 * before the rotation, and move on. */
		if (!(next = next_segment(c, c->pos.segment))) {
			/* Nothing of a line still being written is kept
			 * across the wait: it is read again, whole, once its
			 * newline is there. Only complete lines are taken
			 * from the file, so a writer that took back an
			 * unfinished tail (older versions did) cannot splice
			 * it onto the next record. */
			c->len = c->head;
			return 0;
		}
		if ((got = fill(c)) != 0) {
			if (got < 0)
				return (int)got;
			continue;
		}
		if (c->len > c->head) /* a torn last line */
			return hand_out(c, c->len - c->head, 0, line, len, at);
		c->gap_segments += next - c->pos.segment - 1;
		move_to(c, next);
	}
}
