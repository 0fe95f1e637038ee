/* The rotating events file (see src/telemetry/event_log.h). Lines are
 * gathered in a batch and go out in one write(2) of whole lines on an
 * O_APPEND descriptor, so a reader tailing the file (sandguard events
 * --follow) sees whole lines, and the agent makes one system call per
 * ring-buffer drain instead of one per event. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "event_log.h"
#include "lib/log.h"

/* The batch: big enough that a busy drain makes few writes, small next to
 * the agent's memory budget. */
#define BATCH_BYTES (128 * 1024)

struct event_log {
	pthread_mutex_t lock;
	char *path;
	int fd; /* -1 after a failed reopen: retried per line */
	bool is_stdout;
	bool rotatable; /* a regular file: never rotate a FIFO, a device (/dev/null) */
	uint64_t max_bytes;
	unsigned keep;
	uint64_t size;       /* of the current file */
	bool failing;        /* in a run of failed writes (logged once) */
	bool rotate_failing; /* in a run of failed rotations (logged once) */
	uint64_t lost_in_run;
	char *batch; /* whole lines, each with its newline */
	size_t batch_len;
	uint64_t batch_lines;
	struct event_log_stats st;
};

static int open_file(struct event_log *log, bool truncate)
{
	struct stat sb;
	int fd = open(log->path,
		      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0640);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb)) {
		int err = -errno;
		close(fd);
		return err;
	}
	log->fd = fd;
	log->size = (uint64_t)sb.st_size;
	/* Renaming /dev/null (or a symlink to it) to make room would replace
	 * it with a regular file for the whole node; a FIFO's reader would
	 * lose its writer. Only a regular file has a size worth rotating. */
	log->rotatable = S_ISREG(sb.st_mode);
	return 0;
}

struct event_log *event_log_open(const char *path, uint64_t max_bytes, unsigned keep)
{
	struct event_log *log = calloc(1, sizeof(*log));
	int err;

	if (!log || !(log->path = strdup(path)) || !(log->batch = malloc(BATCH_BYTES))) {
		if (log)
			free(log->path);
		free(log);
		sg_error("events: %s: out of memory", path);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&log->lock, NULL);
	log->max_bytes = max_bytes;
	log->keep = keep;
	if (!strcmp(path, "-")) {
		log->is_stdout = true;
		log->fd = STDOUT_FILENO;
		return log;
	}
	err = open_file(log, false);
	if (err) {
		sg_error("events: cannot open %s: %s", path, strerror(-err));
		event_log_close(log);
		errno = -err;
		return NULL;
	}
	return log;
}

/* path -> path.1 -> ... -> path.<keep>; rename(2) replaces the oldest.
 * Then a fresh path. With keep 0 the file is just truncated. On failure,
 * why says what failed (it is logged once per run of failures). */
static int rotate(struct event_log *log, char *why, size_t why_len)
{
	char from[PATH_MAX], to[PATH_MAX];
	int err;

	for (unsigned i = log->keep; i >= 1; i--) {
		if (i == 1)
			snprintf(from, sizeof(from), "%s", log->path);
		else
			snprintf(from, sizeof(from), "%s.%u", log->path, i - 1);
		snprintf(to, sizeof(to), "%s.%u", log->path, i);
		if (rename(from, to) && errno != ENOENT) {
			snprintf(why, why_len, "renaming %s to %s: %s", from, to, strerror(errno));
			return -errno;
		}
	}
	close(log->fd);
	log->fd = -1;
	err = open_file(log, log->keep == 0);
	if (err)
		snprintf(why, why_len, "reopening %s: %s", log->path, strerror(-err));
	return err;
}

static int write_all(int fd, struct iovec *iov, int n_iov)
{
	int first = 0;

	while (first < n_iov) {
		ssize_t n = writev(fd, iov + first, n_iov - first);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		/* A short write: go on from where it stopped. */
		while (first < n_iov && (size_t)n >= iov[first].iov_len) {
			n -= (ssize_t)iov[first].iov_len;
			first++;
		}
		if (first < n_iov) {
			iov[first].iov_base = (char *)iov[first].iov_base + n;
			iov[first].iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Rotate when `total` more bytes would take the file past max_bytes. */
static int rotate_if_full(struct event_log *log, uint64_t total)
{
	char why[2 * PATH_MAX + 64];
	int err;

	if (!log->rotatable || !log->max_bytes || log->size == 0 ||
	    log->size + total <= log->max_bytes)
		return 0;
	err = rotate(log, why, sizeof(why));
	if (err) {
		log->st.rotate_failures++;
		if (!log->rotate_failing)
			sg_error("events: rotation failed: %s", why);
		log->rotate_failing = true;
		/* Keep writing to the old file rather than lose events. */
		return log->fd < 0 ? err : 0;
	}
	log->st.rotations++;
	log->rotate_failing = false;
	return 0;
}

/* Write `lines` whole lines (iov, `total` bytes); count them, or count
 * them lost. */
static int write_lines(struct event_log *log, struct iovec *iov, int n_iov, uint64_t total,
		       uint64_t lines)
{
	int err = 0;

	if (!log->is_stdout && log->fd < 0)
		err = open_file(log, false);
	if (!err)
		err = rotate_if_full(log, total);
	if (!err)
		err = write_all(log->fd, iov, n_iov);
	if (!err) {
		log->size += total;
		log->st.lines += lines;
		log->st.bytes += total;
		if (log->failing)
			sg_warn("events: writing %s works again; %llu lines were lost",
				log->is_stdout ? "stdout" : log->path,
				(unsigned long long)log->lost_in_run);
		log->failing = false;
		log->lost_in_run = 0;
		return 0;
	}
	log->st.failures += lines;
	log->lost_in_run += lines;
	if (!log->failing)
		sg_error("events: writing %s failed: %s; counting lost lines until it works again",
			 log->is_stdout ? "stdout" : log->path, strerror(-err));
	log->failing = true;
	return err;
}

static int flush_locked(struct event_log *log)
{
	struct iovec iov = { .iov_base = log->batch, .iov_len = log->batch_len };
	uint64_t lines = log->batch_lines;

	if (!log->batch_len)
		return 0;
	log->batch_len = 0;
	log->batch_lines = 0;
	return write_lines(log, &iov, 1, iov.iov_len, lines);
}

static int append_locked(struct event_log *log, const char *line, size_t len)
{
	size_t total = len + 1;
	int err = 0;

	if (memchr(line, '\n', len)) {
		/* Its producer has a bug; the file is fine. */
		log->st.failures++;
		sg_error("events: refused a line with a newline inside (counted as lost)");
		return -EINVAL;
	}
	/* A batch never crosses a rotation, nor overflows. */
	if (log->batch_len && (log->batch_len + total > BATCH_BYTES ||
			       (log->rotatable && log->max_bytes &&
				log->size + log->batch_len + total > log->max_bytes)))
		err = flush_locked(log);
	if (total > BATCH_BYTES) {
		struct iovec iov[2] = { { .iov_base = (void *)line, .iov_len = len },
					{ .iov_base = "\n", .iov_len = 1 } };
		int werr = write_lines(log, iov, 2, total, 1);
		return err ? err : werr;
	}
	memcpy(log->batch + log->batch_len, line, len);
	log->batch[log->batch_len + len] = '\n';
	log->batch_len += total;
	log->batch_lines++;
	return err;
}

int event_log_append(struct event_log *log, const char *line, size_t len)
{
	int err;

	pthread_mutex_lock(&log->lock);
	err = append_locked(log, line, len);
	pthread_mutex_unlock(&log->lock);
	return err;
}

int event_log_flush(struct event_log *log)
{
	int err;

	pthread_mutex_lock(&log->lock);
	err = flush_locked(log);
	pthread_mutex_unlock(&log->lock);
	return err;
}

int event_log_write(struct event_log *log, const char *line)
{
	size_t len = strlen(line);
	int err;

	if (len && line[len - 1] == '\n')
		len--;
	pthread_mutex_lock(&log->lock);
	err = append_locked(log, line, len);
	if (err != -EINVAL) {
		int ferr = flush_locked(log);
		err = err ? err : ferr;
	}
	pthread_mutex_unlock(&log->lock);
	return err;
}

void event_log_get_stats(struct event_log *log, struct event_log_stats *st)
{
	pthread_mutex_lock(&log->lock);
	*st = log->st;
	pthread_mutex_unlock(&log->lock);
}

void event_log_close(struct event_log *log)
{
	if (!log)
		return;
	if (log->batch)
		flush_locked(log);
	if (!log->is_stdout && log->fd >= 0)
		close(log->fd);
	pthread_mutex_destroy(&log->lock);
	free(log->batch);
	free(log->path);
	free(log);
}
