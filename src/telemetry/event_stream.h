/* Reading the agent's event stream: the events file the agent writes
 * (src/telemetry/event_log.h) and the rotated files it keeps, PATH.1
 * (the newest) .. PATH.N (the oldest). The one place outside the writer
 * that knows that scheme: `sandguard events` and `sandguard explain`
 * read through it, and the writer names its files with it. */
#ifndef SG_EVENT_STREAM_H
#define SG_EVENT_STREAM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A line longer than this (newline excluded: 64 KiB - 1) is not an event. */
#define EVENT_STREAM_LINE_CAP (64 * 1024)

/* The name of the stream's file n: path itself for 0, path.n for the
 * rotated ones (1 the newest). 0, or -ENAMETOOLONG (out holds a
 * truncated name). */
int event_stream_file(char *out, size_t cap, const char *path, unsigned n);

/* Call fn for each of the stream's files, oldest first, the live file
 * last, each exactly once while the agent rotates them. The rotated files
 * last written before since_ms are passed over (they hold nothing newer);
 * the live file is always read. fn gets the file's name as it is now, a
 * descriptor open on it (fn neither keeps nor closes it) and whether it
 * was the live file when the files were listed.
 *
 * Why not walk the names: rotation renames every file one name up, so a
 * reader going from PATH.N to PATH meets, after a rotation, the file it
 * has just read again under the next name and never sees the one that
 * moved past it. Here the names are listed twice until two listings
 * agree (no rename came between them: the files at one instant, every
 * one of them once, in order), and each file is then opened by its
 * identity where it is by now (a rotation only moves it to a higher
 * name). A gap of up to two names, which a rotation in progress and a
 * rotation cut short by a crash leave, is bridged; three missing names
 * in a row end the stream.
 *
 * Returns 0; fn's first non-zero answer; -ENOENT when the stream has no
 * file at all; -EAGAIN when the names changed under every listing tried.
 * *lost (may be NULL) counts the listed files deleted (rotated past the
 * files kept) before they could be opened. */
typedef int (*event_stream_file_fn)(const char *name, int fd, bool live, void *ctx);
int event_stream_each(const char *path, int64_t since_ms, event_stream_file_fn fn, void *ctx,
		      unsigned *lost);

/* What event_stream_each()'s -errno means, for a message. */
const char *event_stream_strerror(int err);

/* The lines of one file, by read(2) in chunks, so that a followed file's
 * last, still incomplete line waits for the rest of it. */
struct event_reader {
	int fd;
	char *buf;       /* EVENT_STREAM_LINE_CAP + 1 */
	size_t off, len; /* unread bytes are buf[off..len) */
	bool skipping;   /* inside an over-long line */
	long line_no;    /* of the last line handed out */
};

/* 0, or -errno (the file cannot be opened, or no memory). */
int event_reader_open(struct event_reader *r, const char *path);
/* The same on a descriptor already open (the reader reads a duplicate of
 * it, so the caller still closes fd). */
int event_reader_open_fd(struct event_reader *r, int fd);
void event_reader_close(struct event_reader *r);

/* The next complete line (NUL-terminated, no newline): 1 and *line; 2: an
 * over-long line was skipped (line_no counts it); 0: no complete line yet
 * (the end of the data for now); -errno. */
int event_reader_next(struct event_reader *r, char **line);

/* At the end of a file that is over (not followed): its unterminated last
 * line, 1 and *line, or 0 when there is none. */
int event_reader_tail(struct event_reader *r, char **line);

/* Start again from the file's start, when the file is now shorter than
 * what was read (truncated): true, else false. */
bool event_reader_rewind_if_truncated(struct event_reader *r);

/* Whether path now names another file than the one being read (the
 * writer rotated it): what is left in the old one is still to be read. */
bool event_reader_replaced(const struct event_reader *r, const char *path);

#endif
