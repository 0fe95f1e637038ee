/* The agent's events file: JSON lines, rotated by size (path -> path.1 ->
 * ... -> path.<keep>, the oldest dropped). "-" is standard output, never
 * rotated; nor is anything but a regular file (/dev/null, a FIFO, a
 * symlink to either: written to, never renamed). Lines are appended to a buffer and written in batches, one
 * write(2) of whole lines per batch (a reader tailing the file sees whole
 * lines); a batch never crosses a rotation. A line that cannot be written
 * is counted and reported, never dropped silently. Safe to call from
 * several threads.
 *
 * Tenant budget (event_log_set_budget): rotation deletes the oldest file,
 * so without a bound one tenant's flood would rotate every other tenant's
 * evidence out. With a budget, each tenant may write at most share_pct% of
 * max_bytes into each file (the window: from one rotation to the next);
 * its further lines in that window are not written but counted, and one
 * events_dropped line per tenant says how many (at the rotation that ends
 * the window, summary_ms after its first dropped line, or at close). One
 * exception: while the file the next rotation deletes holds no other
 * tenant's lines (there is no such file yet, or it is all this tenant's),
 * a tenant over its budget still writes, since rotating it deletes nobody
 * else's evidence: a node with one busy tenant keeps that tenant's newest
 * lines. Lines with no tenant are never budgeted. Only a rotated regular
 * file has a budget: stdout, a FIFO, /dev/null and max_bytes 0 evict
 * nothing. */
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
	uint64_t budget_dropped;  /* lines of tenants over their budget, not written */
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

/* Write the batch now (and the summaries that are due). Returns 0 or -errno; the lines of a batch that
 * could not be written are counted in stats.failures, and the first
 * failure of a run is logged. */
int event_log_flush(struct event_log *log);

/* Append one line and write it with the batch before it, now; a newline
 * is added if it lacks one. Returns 0 or -errno (a line with a newline
 * inside: -EINVAL). */
int event_log_write(struct event_log *log, const char *line);

/* The same, for a line of `tenant` (NULL: no tenant, never budgeted).
 * Returns -EDQUOT when the tenant is over its budget: the line is not
 * written, and is counted (stats.budget_dropped, the tenant's count) and
 * reported by its window's events_dropped line. */
int event_log_append_tenant(struct event_log *log, const char *tenant, const char *line,
			    size_t len);

struct event_log_budget {
	unsigned share_pct;  /* of max_bytes, per tenant and file: 1..99 (0, >= 100: none) */
	const char *node;    /* the summary lines' node (copied); NULL = null */
	uint64_t summary_ms; /* a window's summary at most this long after its first drop */
};

/* Set (or, with share_pct 0 or >= 100, remove) the tenant budget. Files
 * that exist already count as other tenants' evidence. Returns 0, or
 * -ENOMEM (logged). */
int event_log_set_budget(struct event_log *log, const struct event_log_budget *b);

/* Each tenant that had lines dropped, with its count since open. */
typedef void (*event_log_dropped_fn)(const char *tenant, uint64_t lines, void *ctx);
void event_log_foreach_dropped(struct event_log *log, event_log_dropped_fn fn, void *ctx);

void event_log_get_stats(struct event_log *log, struct event_log_stats *st);

/* Writes the batch and closes; NULL is fine. */
void event_log_close(struct event_log *log);

#endif
