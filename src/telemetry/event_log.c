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
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "event_json.h"
#include "event_log.h"
#include "event_stream.h"
#include "lib/log.h"

/* The batch: big enough that a busy drain makes few writes, small next to
 * the agent's memory budget. */
#define BATCH_BYTES    (128 * 1024)
#define TENANT_BUCKETS 256
/* The owners array has keep + 1 entries; more files than this is a typo
 * (--events-keep -1), not a retention. */
#define BUDGET_MAX_KEEP 100000

/* One tenant's account (see the budget in event_log.h). */
struct tenant_budget {
	struct tenant_budget *next;  /* in its hash bucket */
	uint64_t bytes;              /* its lines in the current file */
	uint64_t drop_lines;         /* dropped in this window, not reported yet */
	uint64_t drop_bytes;         /* their bytes */
	uint64_t first_drop_mono_ns; /* CLOCK_MONOTONIC of the first of them */
	uint64_t first_drop_real_ns; /* CLOCK_REALTIME of the same */
	uint64_t dropped_total;      /* lines, since open: the metric */
	char name[];
};

/* The owner of a file holding several tenants' lines, lines of no tenant,
 * or lines from before this process (unknown: counted as others'). */
static struct tenant_budget mixed;

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

	/* The tenant budget; owners is NULL without one. */
	uint64_t budget_bytes; /* per tenant and file */
	uint64_t summary_ns;
	char *node;
	struct tenant_budget *tenants[TENANT_BUCKETS];
	/* Whose lines each file holds: [0] the live file, [i] path.i. NULL
	 * for no file (or an empty one), a tenant for its lines alone, or
	 * &mixed. owners[keep] is the file the next rotation deletes. */
	struct tenant_budget **owners;
	unsigned n_pending; /* tenants with drops not reported yet */
	bool table_failing; /* a tenant's account could not be made (logged once) */
};

static int flush_locked(struct event_log *log);
static void window_ended(struct event_log *log);

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
		event_stream_file(from, sizeof(from), log->path, i - 1);
		event_stream_file(to, sizeof(to), log->path, i);
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
	window_ended(log);
	return 0;
}

/* Write `lines` whole lines (iov, `total` bytes); count them, or count
 * them lost. */
static int write_lines(struct event_log *log, struct iovec *iov, int n_iov, uint64_t total,
		       uint64_t lines)
{
	int err = 0;

	/* (append_locked rotated, if the file needed it, before the batch's
	 * first line.) */
	if (!log->is_stdout && log->fd < 0)
		err = open_file(log, false);
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

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Into the batch with no rotation: a summary closes a window, so it must
 * not open the next one (it may take a file a few hundred bytes past
 * max_bytes). */
static int batch_add(struct event_log *log, const char *line, size_t len)
{
	int err = 0;

	if (log->batch_len + len + 1 > BATCH_BYTES)
		err = flush_locked(log);
	memcpy(log->batch + log->batch_len, line, len);
	log->batch[log->batch_len + len] = '\n';
	log->batch_len += len + 1;
	log->batch_lines++;
	return err;
}

/* The live file now holds a line of t (NULL: of no tenant). */
static void note_owner(struct event_log *log, struct tenant_budget *t)
{
	struct tenant_budget **o;

	if (!log->owners)
		return;
	o = &log->owners[0];
	if (!*o && t)
		*o = t;
	else if (*o != t)
		*o = &mixed;
}

static struct tenant_budget *tenant_get(struct event_log *log, const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	struct tenant_budget *t;
	size_t len = strlen(name);

	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (t = log->tenants[h % TENANT_BUCKETS]; t; t = t->next)
		if (!strcmp(t->name, name))
			return t;
	t = calloc(1, sizeof(*t) + len + 1);
	if (!t)
		return NULL;
	memcpy(t->name, name, len + 1);
	t->next = log->tenants[h % TENANT_BUCKETS];
	log->tenants[h % TENANT_BUCKETS] = t;
	return t;
}

/* Over budget, unless rotating deletes no other tenant's lines. */
static bool over_budget(const struct event_log *log, const struct tenant_budget *t, size_t total)
{
	const struct tenant_budget *victim = log->owners[log->keep];

	return t->bytes + total > log->budget_bytes && victim && victim != t;
}

static void drop(struct event_log *log, struct tenant_budget *t, size_t total)
{
	if (!t->drop_lines) {
		t->first_drop_mono_ns = now_ns(CLOCK_MONOTONIC);
		t->first_drop_real_ns = now_ns(CLOCK_REALTIME);
		log->n_pending++;
	}
	t->drop_lines++;
	t->drop_bytes += total;
	t->dropped_total++;
	log->st.budget_dropped++;
}

/* The events_dropped line of t's unreported drops, into the batch. */
static void report(struct event_log *log, struct tenant_budget *t)
{
	struct event_ctx ctx = { .node = log->node, .tenant = t->name };
	char line[EVENT_JSON_MAX], first[32] = "";
	json_t *d;
	int n;

	event_format_ts((int64_t)(t->first_drop_real_ns / 1000000), first, sizeof(first));
	d = json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "reason", "tenant_share", "lines",
		      (json_int_t)t->drop_lines, "bytes", (json_int_t)t->drop_bytes, "budget_bytes",
		      (json_int_t)log->budget_bytes, "file_bytes", (json_int_t)log->max_bytes,
		      "first_dropped", first);
	n = d ? event_userspace_json(&ctx, 0, SG_EV_EVENTS_DROPPED, SG_ACTION_LOGGED, -1, d, line,
				     sizeof(line))
	      : -ENOMEM;
	json_decref(d);
	t->drop_lines = t->drop_bytes = 0;
	log->n_pending--;
	if (n < 0) {
		/* The drops stay counted (the metric); the line is lost. */
		log->st.failures++;
		sg_error("events: cannot encode the events_dropped line of tenant %s: %s", t->name,
			 strerror(-n));
		return;
	}
	batch_add(log, line, (size_t)n);
	note_owner(log, t);
}

/* The summaries that are due: all of them when force (a window ended). */
static void report_due(struct event_log *log, bool force)
{
	uint64_t now;

	if (!log->n_pending)
		return;
	now = now_ns(CLOCK_MONOTONIC);
	for (int b = 0; b < TENANT_BUCKETS; b++)
		for (struct tenant_budget *t = log->tenants[b]; t; t = t->next)
			if (t->drop_lines &&
			    (force || now - t->first_drop_mono_ns >= log->summary_ns))
				report(log, t);
}

/* A rotation: every file moved one place down, and every tenant's budget
 * starts again in the new file. */
static void window_ended(struct event_log *log)
{
	if (!log->owners)
		return;
	memmove(log->owners + 1, log->owners, log->keep * sizeof(*log->owners));
	log->owners[0] = log->size ? &mixed : NULL;
	for (int b = 0; b < TENANT_BUCKETS; b++)
		for (struct tenant_budget *t = log->tenants[b]; t; t = t->next)
			t->bytes = 0;
	report_due(log, true);
}

static int append_locked(struct event_log *log, const char *tenant, const char *line, size_t len)
{
	struct tenant_budget *t = NULL;
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
	/* So a batch's first line rotates, when the file needs it, before
	 * the budget below is charged to the file the line goes to. */
	if (!log->batch_len) {
		if (!log->is_stdout && log->fd < 0)
			open_file(log, false); /* else write_lines tries again, and counts */
		if (log->fd >= 0)
			rotate_if_full(log, total); /* a failure is counted; writing goes on */
	}
	if (tenant && log->owners) {
		t = tenant_get(log, tenant);
		if (!t && !log->table_failing)
			sg_error("events: out of memory for tenant %s's budget: its lines are "
				 "written unbudgeted",
				 tenant);
		log->table_failing = !t;
		if (t && over_budget(log, t, total)) {
			drop(log, t, total);
			return err ? err : -EDQUOT;
		}
	}
	if (t)
		t->bytes += total;
	note_owner(log, t);
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
	return event_log_append_tenant(log, NULL, line, len);
}

int event_log_append_tenant(struct event_log *log, const char *tenant, const char *line, size_t len)
{
	int err;

	pthread_mutex_lock(&log->lock);
	err = append_locked(log, tenant, line, len);
	pthread_mutex_unlock(&log->lock);
	return err;
}

int event_log_flush(struct event_log *log)
{
	int err;

	pthread_mutex_lock(&log->lock);
	report_due(log, false);
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
	err = append_locked(log, NULL, line, len);
	if (err != -EINVAL) {
		int ferr = flush_locked(log);
		err = err ? err : ferr;
	}
	pthread_mutex_unlock(&log->lock);
	return err;
}

/* Whose the files already there are is unknown: others', to be safe. */
static void owners_from_disk(struct event_log *log)
{
	char p[PATH_MAX];
	struct stat sb;

	log->owners[0] = log->size ? &mixed : NULL;
	for (unsigned i = 1; i <= log->keep; i++) {
		event_stream_file(p, sizeof(p), log->path, i);
		log->owners[i] = stat(p, &sb) == 0 ? &mixed : NULL;
	}
}

int event_log_set_budget(struct event_log *log, const struct event_log_budget *b)
{
	bool on = b->share_pct > 0 && b->share_pct < 100 && log->rotatable && log->max_bytes;
	struct tenant_budget **owners = NULL;
	char *node = NULL;

	if (on && log->keep > BUDGET_MAX_KEEP) {
		sg_error("events: a tenant budget over %u rotated files is not supported (keep %u)",
			 BUDGET_MAX_KEEP, log->keep);
		return -EINVAL;
	}
	if (on) {
		owners = calloc((size_t)log->keep + 1, sizeof(*owners));
		node = b->node ? strdup(b->node) : NULL;
		if (!owners || (b->node && !node)) {
			free(owners);
			free(node);
			sg_error("events: out of memory for the tenant budget");
			return -ENOMEM;
		}
	}
	pthread_mutex_lock(&log->lock);
	free(log->owners);
	free(log->node);
	log->owners = owners;
	log->node = node;
	if (on) {
		/* max_bytes * share / 100, without overflowing */
		log->budget_bytes = log->max_bytes / 100 * b->share_pct +
				    log->max_bytes % 100 * b->share_pct / 100;
		log->summary_ns = b->summary_ms * 1000000;
		owners_from_disk(log);
	}
	pthread_mutex_unlock(&log->lock);
	return 0;
}

void event_log_foreach_dropped(struct event_log *log, event_log_dropped_fn fn, void *ctx)
{
	pthread_mutex_lock(&log->lock);
	for (int b = 0; b < TENANT_BUCKETS; b++)
		for (struct tenant_budget *t = log->tenants[b]; t; t = t->next)
			if (t->dropped_total)
				fn(t->name, t->dropped_total, ctx);
	pthread_mutex_unlock(&log->lock);
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
	if (log->batch) {
		report_due(log, true); /* the open windows' summaries */
		flush_locked(log);
	}
	if (!log->is_stdout && log->fd >= 0)
		close(log->fd);
	pthread_mutex_destroy(&log->lock);
	for (int b = 0; b < TENANT_BUCKETS; b++)
		while (log->tenants[b]) {
			struct tenant_budget *t = log->tenants[b];
			log->tenants[b] = t->next;
			free(t);
		}
	free(log->owners);
	free(log->node);
	free(log->batch);
	free(log->path);
	free(log);
}
