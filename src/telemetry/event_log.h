/* The agent's events file: JSON lines appended with one write(2) each,
 * rotated by size (path -> path.1 -> ... -> path.<keep>, the oldest
 * dropped). "-" is standard output, never rotated. A line that cannot be
 * written is counted and reported, never dropped silently. Safe to call
 * from several threads. */
#ifndef SG_EVENT_LOG_H
#define SG_EVENT_LOG_H
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

/* Append one line; a newline is added if it lacks one. A line with a
 * newline inside is refused (-EINVAL). Returns 0 or -errno; every failure
 * is counted in stats.failures, and the first of a run is logged. */
int event_log_write(struct event_log *log, const char *line);

void event_log_get_stats(struct event_log *log, struct event_log_stats *st);

/* Flushes nothing (there is no buffer) and closes; NULL is fine. */
void event_log_close(struct event_log *log);

#endif
