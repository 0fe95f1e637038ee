/* The agent's events file: JSON lines, rotated by size (path -> path.1 ->
 * ... -> path.<keep>, the oldest dropped). "-" is standard output, never
 * rotated; nor is anything but a regular file (/dev/null, a FIFO, a
 * symlink to either: written to, never renamed). Lines are appended to a buffer and written in batches, one
 * write(2) of whole lines per batch (a reader tailing the file sees whole
 * lines); a batch never crosses a rotation. A line that cannot be written
 * is counted and reported, never dropped silently. Safe to call from
 * several threads. */
#ifndef SG_EVENT_LOG_H
#define SG_EVENT_LOG_H
#include <stddef.h>
#include <stdint.h>

struct event_log;

struct event_log_stats {
	uint64_t lines;           /* lines written */
	uint64_t bytes;           /* bytes written, newlines included */
	uint64_t failures;        /* lines lost to write errors */
	uint64_t rotations;       /* rotations done */
	uint64_t rotate_failures; /* rotations that failed (writing went on) */
};

/* Open (create, mode 0640, or append to) path. max_bytes 0 = never rotate;
 * keep = rotated files kept (0: the file is truncated instead). Returns
 * NULL with errno set and an error logged. */
struct event_log *event_log_open(const char *path, uint64_t max_bytes, unsigned keep);

/* Append one line (len bytes, no newline: one is added) to the batch;
 * written when the batch is full, or by event_log_flush(). A line with a
 * newline inside is refused (-EINVAL). Returns 0, or -errno when the
 * batch had to be written and that failed (counted as below). */
int event_log_append(struct event_log *log, const char *line, size_t len);

/* Write the batch now. Returns 0 or -errno; the lines of a batch that
 * could not be written are counted in stats.failures, and the first
 * failure of a run is logged. */
int event_log_flush(struct event_log *log);

/* Append one line and write it with the batch before it, now; a newline
 * is added if it lacks one. Returns 0 or -errno (a line with a newline
 * inside: -EINVAL). */
int event_log_write(struct event_log *log, const char *line);

void event_log_get_stats(struct event_log *log, struct event_log_stats *st);

/* Writes the batch and closes; NULL is fine. */
void event_log_close(struct event_log *log);

#endif
