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

/* Call fn for each rotated file path.N .. path.1, oldest first, that was
 * still written to at or after since_ms (older ones hold nothing newer).
 * A file rotated away meanwhile is passed over: it was older still.
 * Stops at fn's first non-zero answer and returns it; else 0. */
typedef int (*event_stream_file_fn)(const char *path, void *ctx);
int event_stream_rotated(const char *path, int64_t since_ms, event_stream_file_fn fn, void *ctx);

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
