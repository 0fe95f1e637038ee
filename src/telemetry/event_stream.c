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
/* Three missing names in a row end the stream: a rotation in progress
 * leaves one name empty for a moment, and one cut short by a crash leaves
 * another beside it until it rotates off the end. */
#define MAX_GAP 3
/* Listings tried before giving up on names that change under each one. */
#define LIST_TRIES 64

int event_stream_file(char *out, size_t cap, const char *path, unsigned n)
{
	int len = n ? snprintf(out, cap, "%s.%u", path, n) : snprintf(out, cap, "%s", path);

	return len < 0 || (size_t)len >= cap ? -ENAMETOOLONG : 0;
}

static int64_t mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

/* One file as listed: which file (dev, ino), under which name, and when it
 * was last written. */
struct listed {
	dev_t dev;
	ino_t ino;
	unsigned index;
	int64_t mtime_ms;
};

struct listing {
	struct listed *f; /* the live file's index 0 first, the oldest last */
	size_t n, cap;
};

/* The names as they are now. 0, or -errno (a name that cannot be looked
 * at for another reason than its absence, or no memory). */
static int list_once(const char *path, struct listing *l)
{
	char name[PATH_MAX];
	unsigned missing = 0;

	l->n = 0;
	for (unsigned i = 0; i <= MAX_ROTATED && missing < MAX_GAP; i++) {
		struct stat st;
		int ret = event_stream_file(name, sizeof(name), path, i);

		if (ret)
			return ret;
		if (stat(name, &st)) {
			if (errno != ENOENT)
				return -errno;
			missing++;
			continue;
		}
		missing = 0;
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 16;
			struct listed *f = realloc(l->f, cap * sizeof(*f));

			if (!f)
				return -ENOMEM;
			l->f = f;
			l->cap = cap;
		}
		l->f[l->n++] = (struct listed){ st.st_dev, st.st_ino, i, mtime_ms(&st) };
	}
	return 0;
}

static bool same_listing(const struct listing *a, const struct listing *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->f[i].dev != b->f[i].dev || a->f[i].ino != b->f[i].ino ||
		    a->f[i].index != b->f[i].index)
			return false;
	return true;
}

/* Two listings alike in a row: between them no name changed, so they are
 * the files at one instant. A file never comes back to a name it left,
 * so alike listings cannot hide a rename. Into *out (the caller frees
 * out->f). */
static int list_settled(const char *path, struct listing *out)
{
	struct listing prev = { 0 }, cur = { 0 }, t;
	int ret = list_once(path, &prev);

	for (int i = 0; !ret && i < LIST_TRIES; i++) {
		ret = list_once(path, &cur);
		if (!ret && same_listing(&prev, &cur)) {
			*out = cur;
			free(prev.f);
			return 0;
		}
		t = prev;
		prev = cur;
		cur = t;
	}
	free(prev.f);
	free(cur.f);
	return ret ? ret : -EAGAIN;
}

/* The listed file, opened where it is now: each rotation since the
 * listing moved it one name up. A descriptor (its name in name), -ENOENT
 * when it is gone (rotated past the files kept), or -errno. */
static int open_listed(const char *path, const struct listed *e, char *name, size_t cap)
{
	unsigned missing = 0;

	for (unsigned i = e->index; i <= MAX_ROTATED && missing < MAX_GAP; i++) {
		struct stat st;
		int fd, ret = event_stream_file(name, cap, path, i);

		if (ret)
			return ret;
		fd = open(name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT)
				return -errno;
			missing++;
			continue;
		}
		missing = 0;
		if (fstat(fd, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino)
			return fd;
		close(fd);
	}
	return -ENOENT;
}

int event_stream_each(const char *path, int64_t since_ms, event_stream_file_fn fn, void *ctx,
		      unsigned *lost)
{
	struct listing l = { 0 };
	char name[PATH_MAX];
	int ret = list_settled(path, &l);

	if (lost)
		*lost = 0;
	if (!ret && l.n == 0)
		ret = -ENOENT;
	for (size_t i = l.n; !ret && i-- > 0;) {
		const struct listed *e = &l.f[i];
		int fd;

		if (e->index > 0 && e->mtime_ms < since_ms)
			continue;
		fd = open_listed(path, e, name, sizeof(name));
		if (fd == -ENOENT) {
			if (lost)
				(*lost)++;
			continue;
		}
		if (fd < 0) {
			ret = fd;
			break;
		}
		ret = fn(name, fd, e->index == 0, ctx);
		close(fd);
	}
	free(l.f);
	return ret;
}

const char *event_stream_strerror(int err)
{
	return err == -EAGAIN ? "its files were rotated under every listing of them"
			      : strerror(-err);
}

static int reader_start(struct event_reader *r, int fd)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
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

int event_reader_open(struct event_reader *r, const char *path)
{
	return reader_start(r, open(path, O_RDONLY | O_CLOEXEC));
}

int event_reader_open_fd(struct event_reader *r, int fd)
{
	return reader_start(r, fcntl(fd, F_DUPFD_CLOEXEC, 0));
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
