/* The rotating events file (see src/telemetry/event_log.h). Each line goes out
 * in one writev(2) on an O_APPEND descriptor, so a reader tailing the file
 * (sandguard events --follow) sees whole lines. */
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

struct event_log {
	pthread_mutex_t lock;
	char *path;
	int fd; /* -1 after a failed reopen: retried per line */
	bool is_stdout;
	uint64_t max_bytes;
	unsigned keep;
	uint64_t size;       /* of the current file */
	bool failing;        /* in a run of failed writes (logged once) */
	bool rotate_failing; /* in a run of failed rotations (logged once) */
	uint64_t lost_in_run;
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
	return 0;
}

struct event_log *event_log_open(const char *path, uint64_t max_bytes, unsigned keep)
{
	struct event_log *log = calloc(1, sizeof(*log));
	int err;

	if (!log || !(log->path = strdup(path))) {
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

static int write_all(int fd, const char *line, size_t len, bool add_newline)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)line, .iov_len = len },
		{ .iov_base = "\n", .iov_len = add_newline ? 1 : 0 },
	};
	int n_iov = 2, first = 0;

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

static int write_locked(struct event_log *log, const char *line, size_t len, bool add_newline)
{
	uint64_t total = len + (add_newline ? 1 : 0);
	int err;

	if (!log->is_stdout && log->fd < 0) {
		err = open_file(log, false);
		if (err)
			return err;
	}
	if (!log->is_stdout && log->max_bytes && log->size > 0 &&
	    log->size + total > log->max_bytes) {
		char why[2 * PATH_MAX + 64];
		err = rotate(log, why, sizeof(why));
		if (err) {
			log->st.rotate_failures++;
			if (!log->rotate_failing)
				sg_error("events: rotation failed: %s", why);
			log->rotate_failing = true;
			if (log->fd < 0)
				return err;
			/* Keep writing to the old file rather than lose events. */
		} else {
			log->st.rotations++;
			log->rotate_failing = false;
		}
	}
	err = write_all(log->fd, line, len, add_newline);
	if (err)
		return err;
	log->size += total;
	log->st.lines++;
	log->st.bytes += total;
	return 0;
}

int event_log_write(struct event_log *log, const char *line)
{
	size_t len = strlen(line);
	bool add_newline = len == 0 || line[len - 1] != '\n';
	int err;

	pthread_mutex_lock(&log->lock);
	if (memchr(line, '\n', add_newline ? len : len - 1)) {
		/* Its producer has a bug; the file is fine. */
		log->st.failures++;
		pthread_mutex_unlock(&log->lock);
		sg_error("events: refused a line with a newline inside (counted as lost)");
		return -EINVAL;
	}
	err = write_locked(log, line, len, add_newline);
	if (err) {
		log->st.failures++;
		log->lost_in_run++;
		if (!log->failing)
			sg_error(
				"events: writing %s failed: %s; counting lost lines until it works again",
				log->is_stdout ? "stdout" : log->path, strerror(-err));
		log->failing = true;
	} else if (log->failing) {
		sg_warn("events: writing %s works again; %llu lines were lost",
			log->is_stdout ? "stdout" : log->path,
			(unsigned long long)log->lost_in_run);
		log->failing = false;
		log->lost_in_run = 0;
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
	if (!log->is_stdout && log->fd >= 0)
		close(log->fd);
	pthread_mutex_destroy(&log->lock);
	free(log->path);
	free(log);
}
