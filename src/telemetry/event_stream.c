/* Reading the event stream (see src/telemetry/event_stream.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "event_stream.h"

/* More rotated files than this is not a retention the agent keeps: the
 * scan for the oldest stops there. */
#define MAX_ROTATED 10000

int event_stream_file(char *out, size_t cap, const char *path, unsigned n)
{
	int len = n ? snprintf(out, cap, "%s.%u", path, n) : snprintf(out, cap, "%s", path);

	return len < 0 || (size_t)len >= cap ? -ENAMETOOLONG : 0;
}

static int64_t mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

int event_stream_rotated(const char *path, int64_t since_ms, event_stream_file_fn fn, void *ctx)
{
	char name[PATH_MAX];
	struct stat st;
	unsigned n = 0;

	while (n < MAX_ROTATED && event_stream_file(name, sizeof(name), path, n + 1) == 0 &&
	       stat(name, &st) == 0)
		n++;
	for (unsigned i = n; i >= 1; i--) {
		int ret;

		if (event_stream_file(name, sizeof(name), path, i) || stat(name, &st) ||
		    mtime_ms(&st) < since_ms)
			continue;
		ret = fn(name, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

int event_reader_open(struct event_reader *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0)
		return -errno;
	r->buf = malloc(EVENT_STREAM_LINE_CAP + 1);
	if (!r->buf) {
		close(r->fd);
		r->fd = -1;
		return -ENOMEM;
	}
	return 0;
}

void event_reader_close(struct event_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	free(r->buf);
	r->buf = NULL;
}

int event_reader_next(struct event_reader *r, char **line)
{
	for (;;) {
		char *nl = memchr(r->buf + r->off, '\n', r->len - r->off);
		ssize_t n;

		if (nl) {
			*nl = '\0';
			*line = r->buf + r->off;
			r->off = (size_t)(nl + 1 - r->buf);
			r->line_no++;
			if (r->skipping) {
				r->skipping = false;
				return 2;
			}
			return 1;
		}
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
		if (r->len == EVENT_STREAM_LINE_CAP) {
			r->skipping = true;
			r->len = 0;
		}
		n = read(r->fd, r->buf + r->len, EVENT_STREAM_LINE_CAP - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		r->len += (size_t)n;
	}
}

int event_reader_tail(struct event_reader *r, char **line)
{
	if (r->len <= r->off || r->skipping)
		return 0;
	r->buf[r->len] = '\0';
	*line = r->buf + r->off;
	r->line_no++;
	r->off = r->len = 0;
	return 1;
}

bool event_reader_rewind_if_truncated(struct event_reader *r)
{
	struct stat st;

	if (fstat(r->fd, &st) || st.st_size >= lseek(r->fd, 0, SEEK_CUR))
		return false;
	lseek(r->fd, 0, SEEK_SET);
	r->off = r->len = 0;
	r->skipping = false;
	return true;
}

bool event_reader_replaced(const struct event_reader *r, const char *path)
{
	struct stat cur, now;

	return fstat(r->fd, &cur) == 0 && stat(path, &now) == 0 &&
	       (now.st_ino != cur.st_ino || now.st_dev != cur.st_dev);
}
