/* The outcome journal: the one durable record of every outcome on a node.
 *
 * Where: <state>/journal/, <state> = $SANDGUARD_STATE_DIR (the executors)
 * or the agent's --state-dir, default /var/lib/sandguard; on a node they
 * are the same directory. Files:
 *   outcomes-0000000001.jsonl, outcomes-0000000002.jsonl, ...  segments
 *   .lock                                                       the append lock
 *
 * Appending (executors: `sandguard exec`, `serve`): one JSON line per
 * outcome (telemetry/journal_record.h), under an flock of .lock, in one
 * writev to the newest segment, then fdatasync (a request's records
 * together, journal_group_commit()); only then does the executor return
 * the result. A segment past segment_bytes is closed and
 * the next one started (its directory entry fsync'd); at that moment the
 * segments older than the newest `keep` are deleted. A torn last line (an
 * executor killed in the middle of a write) is ended with a newline by the
 * next append, so it stays one bad line and never swallows a good one.
 * Bytes once written are never rewritten or cut off: the room for a line
 * is taken (fallocate) before it is written, so a full disk refuses the
 * whole line; a write cut short all the same (a filesystem without
 * fallocate, an I/O error) stays as such a torn line. A reader may have
 * read any byte already, so the file only ever grows (issue 32: a
 * cut-off tail rewritten by the next append once spliced two records
 * into one in the agent's fold).
 *
 * Reading (the agent's fold, `sandguard top` without an agent, tests,
 * `sandguard explain`): segments in order, complete lines only
 * (journal_read.h). A segment is never rewritten, so (segment, offset) is
 * a stable position: the agent's checkpoint stores it.
 *
 * Disk: journal_space() says whether the journal's filesystem has at least
 * reserve_bytes free. Executors refuse new runs below it (platform_error
 * naming the path), and the agent's readiness goes red, so that the runs
 * already admitted can still book into the reserve.
 *
 * Tuning (environment, read by executors and the agent alike):
 *   SANDGUARD_JOURNAL_SEGMENT_BYTES  default 4 MiB, at least 4096
 *   SANDGUARD_JOURNAL_KEEP           segments kept, default 16, at least 2
 *   SANDGUARD_JOURNAL_RESERVE_BYTES  default 8 MiB (0 turns the check off)
 * An invalid value is warned about and the default used. */
#ifndef SG_JOURNAL_H
#define SG_JOURNAL_H
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SG_STATE_DIR_ENV              "SANDGUARD_STATE_DIR"
#define SG_STATE_DIR_DEFAULT_PATH     "/var/lib/sandguard"
#define JOURNAL_SUBDIR                "journal"
#define JOURNAL_SEGMENT_BYTES_DEFAULT (4ull << 20)
#define JOURNAL_KEEP_DEFAULT          16u
#define JOURNAL_RESERVE_BYTES_DEFAULT (8ull << 20)

struct journal {
	char dir[PATH_MAX]; /* <state>/journal */
	uint64_t segment_bytes;
	unsigned keep;
	uint64_t reserve_bytes;
};

/* A place in the journal: the byte `offset` of segment number `segment`.
 * {0, 0} is "before the first record of the oldest segment". */
struct journal_pos {
	uint64_t segment;
	uint64_t offset;
};

/* The state directory: $SANDGUARD_STATE_DIR or the default. */
int journal_state_dir(char *buf, size_t len);

/* The journal of `state_dir` (NULL: journal_state_dir()), tuned from the
 * environment. 0 or -ENAMETOOLONG. Touches no file. */
int journal_init(struct journal *j, const char *state_dir);

/* Append one record (`line`, without its newline) durably. On return 0 the
 * line is on disk (fdatasync'd); `at` (may be NULL) is where it starts.
 * -errno otherwise (-ENOSPC for a full disk), and then the line is not a
 * record of the journal: nothing of it was written, or a part that no
 * reader takes for a record (a torn line) (unless fdatasync itself
 * failed: -EIO, the line may stay). */
int journal_append(const struct journal *j, const char *line, size_t len, struct journal_pos *at);

/* Records booked together and made durable together: a request that
 * books several records before its result (a verifier's compile, its
 * tests and its final) appends each with journal_group_append(), which
 * writes it but does not sync it, and journal_group_commit() then
 * fdatasyncs each segment they went to, once, before the result is
 * returned. What is promised does not change: a request's records are on
 * disk before its result is. Until the commit a record is in the page
 * cache: every reader sees it, an executor killed meanwhile leaves it to
 * the kernel's writeback, and only a power loss can take it, with the
 * result it belonged to, which was never returned. The agent syncs what
 * it folded before its checkpoint counts it (journal_sync_segments()).
 * Safe to share between threads. */
#define JOURNAL_GROUP_SEGMENTS 4

struct journal_group {
	pthread_mutex_t lock;
	unsigned n;                           /* segments written, not yet synced */
	uint64_t seq[JOURNAL_GROUP_SEGMENTS]; /* their numbers */
	int fd[JOURNAL_GROUP_SEGMENTS];       /* and a descriptor of each */
	int err;                              /* the first failed sync */
};
#define JOURNAL_GROUP_INIT                        \
	{                                         \
		.lock = PTHREAD_MUTEX_INITIALIZER \
	}

/* journal_append() without the fdatasync: the group's commit does it.
 * The same errors, but for a failed sync, which the commit returns. */
int journal_group_append(const struct journal *j, struct journal_group *g, const char *line,
			 size_t len, struct journal_pos *at);

/* fdatasync every segment the group wrote to since its last commit. 0,
 * or the first sync's -errno (-EIO: the records may or may not be on
 * disk). The group is empty afterwards and can be used again. */
int journal_group_commit(struct journal_group *g);

/* fdatasync segments `from`..`to` of `dir` (from 0: from the first); a
 * segment pruned meanwhile is skipped. The agent calls it before saving a
 * checkpoint, so that the ledger never counts a record that a power loss
 * could still take from the journal. 0 or the first -errno. */
int journal_sync_segments(const char *dir, uint64_t from, uint64_t to);

/* Free bytes on the journal's filesystem (for the superuser's peers: the
 * blocks available to unprivileged writers). Creates the directory if it
 * is missing. 0, or -ENOSPC when below the reserve, or -errno. */
int journal_space(const struct journal *j, uint64_t *free_bytes);

/* One line for a full disk: "<dir> has 1.2 MiB free, below the reserve of
 * 8 MiB". */
void journal_space_describe(const struct journal *j, uint64_t free_bytes, char *buf, size_t len);

/* The segment numbers present, ascending (malloc'd; *n may be 0). */
int journal_segments(const char *dir, uint64_t **seqs, size_t *n);

/* The path of segment `seq`. */
int journal_segment_path(const char *dir, uint64_t seq, char *buf, size_t len);

#endif
