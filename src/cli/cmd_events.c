/* sandguard events: the agent's events file for on-call, filtered, as an
 * aligned table or as the raw JSON lines (--json), optionally followed. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "cli_opts.h"
#include "commands.h"
#include "telemetry/event_json.h"
#include "telemetry/event_stream.h"
#include "lib/array_len.h"

#define DEFAULT_EVENTS_FILE "/run/sandguard/events.jsonl"
#define FOLLOW_POLL_US      200000

struct filter {
	const char *tenant;
	const char *sandbox;
	uint32_t types; /* bit per enum sg_event_type; 0 = all */
	bool has_since;
	int64_t since_ms;
};

struct opts {
	const char *file;
	struct filter f;
	bool json;
	bool follow;
};

/* What one file held that was not an event, reported at its end. */
struct bad_lines {
	long count;
	long first_line;
	const char *first_why;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard events [--file PATH] [--tenant T] [--sandbox S] [--type X[,Y...]]\n"
		"                        [--since 30s|10m|1h|2d|RFC3339] [--json] [--follow]\n"
		"\n"
		"Shows the agent's enforcement events, oldest first.\n"
		"  --file PATH   events file (default " DEFAULT_EVENTS_FILE "); with --since, the\n"
		"                rotated files PATH.N .. PATH.1 that reach back that far are read too\n"
		"  --tenant T    only tenant T          --sandbox S   only sandbox S\n"
		"  --type X      only these types: egress_denied fork_limit exec exec_denied\n"
		"                file_denied file_tripped exit sandbox_killed health\n"
		"  --since WHEN  only events at or after WHEN (a duration ago, or an RFC 3339 time)\n"
		"  --json        the raw JSON lines instead of the table\n"
		"  --follow      keep printing new events (without --since: only new ones)\n");
}

static const struct cli_command events_cmd = { "events", usage, false };

/* "10m" (a duration back from now) or an RFC 3339 time. */
static int parse_since(const char *s, int64_t *since_ms)
{
	char *end;
	unsigned long long n;
	int64_t unit;

	if (event_parse_ts(s, since_ms) == 0)
		return 0;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno || end[0] == '\0' || end[1] != '\0')
		return -EINVAL;
	switch (*end) {
	case 's':
		unit = 1000;
		break;
	case 'm':
		unit = 60 * 1000;
		break;
	case 'h':
		unit = 3600 * 1000;
		break;
	case 'd':
		unit = 86400 * 1000;
		break;
	default:
		return -EINVAL;
	}
	if (n > (unsigned long long)INT64_MAX / 1000 / 86400 / 1000)
		return -EINVAL;
	*since_ms = (int64_t)clock_ms(CLOCK_REALTIME) - (int64_t)n * unit;
	return 0;
}

/* A comma-separated list of type names into a bit set. */
static int parse_types(const char *list, uint32_t *types)
{
	char *copy = strdup(list), *save = NULL;
	int err = 0;

	if (!copy) {
		fprintf(stderr, "sandguard events: out of memory\n");
		return SG_EXIT_PLATFORM;
	}
	for (char *t = strtok_r(copy, ",", &save); t && !err; t = strtok_r(NULL, ",", &save)) {
		int type = event_type_from_name(t);
		if (type < 0)
			err = cli_usage_error(&events_cmd, "unknown event type '%s'", t);
		else
			*types |= 1u << type;
	}
	free(copy);
	if (!err && *types == 0)
		err = cli_usage_error(&events_cmd, "--type needs at least one type%s", "");
	return err;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_FILE = 1, O_TENANT, O_SANDBOX, O_TYPE, O_SINCE, O_JSON, O_FOLLOW };
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, O_FILE },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "sandbox", required_argument, NULL, O_SANDBOX },
		{ "type", required_argument, NULL, O_TYPE },
		{ "since", required_argument, NULL, O_SINCE },
		{ "json", no_argument, NULL, O_JSON },
		{ "follow", no_argument, NULL, O_FOLLOW },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, err;

	memset(o, 0, sizeof(*o));
	o->file = DEFAULT_EVENTS_FILE;
	cli_options_begin();
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_FILE:
			o->file = optarg;
			break;
		case O_TENANT:
			o->f.tenant = optarg;
			break;
		case O_SANDBOX:
			o->f.sandbox = optarg;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_FOLLOW:
			o->follow = true;
			break;
		case O_TYPE:
			if ((err = parse_types(optarg, &o->f.types)))
				return err;
			break;
		case O_SINCE:
			if (parse_since(optarg, &o->f.since_ms))
				return cli_usage_error(
					&events_cmd,
					"--since '%s': expected a duration like 30s, 10m, 1h, 2d "
					"or an RFC 3339 time like 2026-11-21T19:30:00Z",
					optarg);
			o->f.has_since = true;
			break;
		default:
			return cli_option_common(&events_cmd, c, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(&events_cmd, "unexpected argument '%s'", argv[optind]);
	if (!*o->file)
		return cli_usage_error(&events_cmd, "--file needs a path%s", "");
	return 0;
}

static bool matches(const struct filter *f, const struct event_record *r)
{
	int type = event_type_from_name(r->type);

	if (f->has_since && r->ts_ms < f->since_ms)
		return false;
	if (f->types && (type < 0 || !(f->types & (1u << type))))
		return false;
	if (f->tenant && (!r->tenant || strcmp(f->tenant, r->tenant)))
		return false;
	if (f->sandbox && (!r->sandbox || strcmp(f->sandbox, r->sandbox)))
		return false;
	return true;
}

/* ---- The table ---- */

/* The next display token of s: a control character (C0, DEL, C1) as
 * \xNN so that a hostile comm cannot drive the terminal; anything else as
 * is (one column per UTF-8 character). */
static size_t next_token(const char *s, char tok[8], int *cols)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = 1;

	if (u[0] < 0x20 || u[0] == 0x7f) {
		snprintf(tok, 8, "\\x%02x", u[0]);
		*cols = 4;
		return 1;
	}
	if (u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f) {
		snprintf(tok, 8, "\\x%02x", u[1]);
		*cols = 4;
		return 2;
	}
	if (u[0] >= 0xc0)
		while (n < 4 && (u[n] & 0xc0) == 0x80)
			n++;
	memcpy(tok, s, n);
	tok[n] = '\0';
	*cols = 1;
	return n;
}

/* One cell: at most width columns (0 = no limit), a cut marked '~',
 * padded to width and followed by two spaces unless it is the last. */
static void put_cell(const char *s, int width, bool last)
{
	char tok[8];
	int total = 0, used = 0, cols, limit;

	if (!s || !*s)
		s = "-";
	for (const char *p = s; *p; total += cols)
		p += next_token(p, tok, &cols);
	limit = width && total > width ? width - 1 : INT_MAX;
	for (const char *p = s; *p;) {
		size_t n = next_token(p, tok, &cols);
		if (used + cols > limit)
			break;
		fputs(tok, stdout);
		used += cols;
		p += n;
	}
	if (width && total > width) {
		putchar('~');
		used++;
	}
	if (!last)
		printf("%*s", width - used + 2, "");
}

static const struct {
	const char *title;
	int width;
} columns[] = {
	{ "TIME (UTC)", 23 }, { "TENANT", 16 }, { "SANDBOX", 20 }, { "TYPE", 14 },
	{ "ACTION", 7 },      { "PID", 7 },     { "COMM", 16 },    { "DETAIL", 0 },
};
#define N_COLUMNS (ARRAY_LEN(columns))

static void print_header(void)
{
	for (size_t i = 0; i < N_COLUMNS; i++)
		put_cell(columns[i].title, columns[i].width, i == N_COLUMNS - 1);
	putchar('\n');
}

static void print_row(const struct event_record *r)
{
	char ts[32] = "?", pid[24] = "-";
	const char *cells[N_COLUMNS];

	if (event_format_ts(r->ts_ms, ts, sizeof(ts)) == 0) {
		ts[10] = ' '; /* 2026-11-21 19:30:00.123 */
		ts[strlen(ts) - 1] = '\0';
	}
	if (r->pid >= 0)
		snprintf(pid, sizeof(pid), "%lld", (long long)r->pid);
	cells[0] = ts;
	cells[1] = r->tenant;
	cells[2] = r->sandbox;
	cells[3] = r->type;
	cells[4] = r->action;
	cells[5] = pid;
	cells[6] = r->comm;
	cells[7] = r->summary;
	for (size_t i = 0; i < N_COLUMNS; i++)
		put_cell(cells[i], columns[i].width, i == N_COLUMNS - 1);
	putchar('\n');
}

/* ---- Reading ---- */

static void handle_line(const struct opts *o, char *line, struct bad_lines *bad, long line_no,
			long *shown)
{
	struct event_record rec;

	if (event_parse_line(line, &rec)) {
		if (bad->count++ == 0) {
			bad->first_line = line_no;
			bad->first_why = rec.error;
		}
		return;
	}
	if (matches(&o->f, &rec)) {
		if (o->json)
			puts(line);
		else
			print_row(&rec);
		(*shown)++;
	}
	event_record_free(&rec);
}

/* Every complete line available now; with at_end, an unterminated last
 * line too (a file that is not followed is over). */
static int drain(const struct opts *o, struct event_reader *r, const char *path, bool at_end,
		 struct bad_lines *bad, long *shown)
{
	char *line = NULL;
	int ret;

	while ((ret = event_reader_next(r, &line)) > 0) {
		if (ret == 2) {
			if (bad->count++ == 0) {
				bad->first_line = r->line_no;
				bad->first_why = "line too long";
			}
			continue;
		}
		handle_line(o, line, bad, r->line_no, shown);
	}
	if (ret < 0) {
		fprintf(stderr, "sandguard events: reading %s: %s\n", path, strerror(-ret));
		return -1;
	}
	if (at_end && event_reader_tail(r, &line))
		handle_line(o, line, bad, r->line_no, shown);
	return 0;
}

static void report_bad(const char *path, const struct bad_lines *bad)
{
	if (bad->count)
		fprintf(stderr,
			"sandguard events: warning: %s: skipped %ld line%s that %s not an event "
			"(first at line %ld: %s)\n",
			path, bad->count, bad->count == 1 ? "" : "s",
			bad->count == 1 ? "is" : "are", bad->first_line, bad->first_why);
}

static int reader_open(struct event_reader *r, const char *path, int fd)
{
	int err = fd >= 0 ? event_reader_open_fd(r, fd) : event_reader_open(r, path);

	if (err)
		fprintf(stderr, "sandguard events: cannot read %s: %s\n", path, strerror(-err));
	return err ? -1 : 0;
}

/* A whole file that is not followed (a rotated one, or without --follow);
 * fd is open on it, or -1 to open path. */
static int show_file(const struct opts *o, const char *path, int fd, long *shown)
{
	struct event_reader r;
	struct bad_lines bad = { 0 };
	int ret;

	if (reader_open(&r, path, fd))
		return -1;
	ret = drain(o, &r, path, true, &bad, shown);
	event_reader_close(&r);
	report_bad(path, &bad);
	return ret;
}

struct shown_files {
	const struct opts *o;
	long *shown;
	int live_fd; /* with --follow: the live file, kept to follow it */
};

static int show_stream_file(const char *name, int fd, bool live, void *ctx)
{
	struct shown_files *sf = ctx;

	if (live && sf->o->follow) {
		sf->live_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		return 0;
	}
	return show_file(sf->o, name, fd, sf->shown);
}

static void warn_lost(const char *path, unsigned lost)
{
	if (lost)
		fprintf(stderr,
			"sandguard events: warning: %u of %s's rotated files were rotated away "
			"before they could be read\n",
			lost, path);
}

/* The rotated files written since the followed file last was. */
struct after_followed {
	const struct opts *o;
	long *shown;
	dev_t dev;
	ino_t ino;
	bool found; /* the followed file is among them (it was read already) */
	int live_fd;
};

static int show_after_followed(const char *name, int fd, bool live, void *ctx)
{
	struct after_followed *a = ctx;
	struct stat st;

	if (live) {
		a->live_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		return 0;
	}
	if (fstat(fd, &st) == 0 && st.st_dev == a->dev && st.st_ino == a->ino) {
		a->found = true;
		return 0;
	}
	return show_file(a->o, name, fd, a->shown) ? 1 : 0; /* 1: it said why */
}

/* The followed file was rotated (and read to its end): the files the
 * writer rotated in after it before this look, oldest first (more than
 * one rotation between two polls: the file between was never the live
 * one when we looked). They are the rotated files last written at or
 * after the followed file's last write (event_stream_each()'s since: the
 * ones before it were written before it was created), but for the
 * followed file itself, told by its identity. Returns a descriptor on
 * the live file to follow next, or -1 to open it by name; -2 when a file
 * could not be shown. */
static int catch_up(const struct opts *o, const struct event_reader *r, long *shown)
{
	struct after_followed a = { o, shown, 0, 0, false, -1 };
	struct stat st;
	unsigned lost = 0;
	int err;

	if (fstat(r->fd, &st))
		return -1;
	a.dev = st.st_dev;
	a.ino = st.st_ino;
	err = event_stream_each(o->file,
				(int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000,
				show_after_followed, &a, &lost);
	if (err > 0) {
		if (a.live_fd >= 0)
			close(a.live_fd);
		return -2;
	}
	if (err < 0 && err != -ENOENT)
		fprintf(stderr, "sandguard events: cannot list %s's rotated files: %s\n", o->file,
			event_stream_strerror(err));
	else if (!a.found)
		fprintf(stderr,
			"sandguard events: warning: the file of %s followed until now is not among "
			"its rotated files any more (rotated past the files kept, or removed): the "
			"rotated files newer than it are read, and any rotated away meanwhile are "
			"missed\n",
			o->file);
	else
		warn_lost(o->file, lost);
	return a.live_fd;
}

/* The current file (open on fd, or -1 to open it), then whatever is
 * appended, across rotations (the old descriptor is drained, and the
 * files rotated in after it are read, before the new file is followed)
 * and truncations. */
static int follow(const struct opts *o, int fd, long *shown)
{
	struct event_reader r;
	struct bad_lines bad = { 0 };

	if (reader_open(&r, o->file, fd))
		return -1;
	if (!o->f.has_since)
		lseek(r.fd, 0, SEEK_END);
	for (;;) {
		if (drain(o, &r, o->file, false, &bad, shown))
			return -1;
		fflush(stdout);
		if (event_reader_rewind_if_truncated(&r))
			fprintf(stderr,
				"sandguard events: %s was truncated; reading from its start\n",
				o->file);
		if (event_reader_replaced(&r, o->file)) {
			int live, err;

			/* Rotated: what was written before the rename is still ours. */
			if (drain(o, &r, o->file, true, &bad, shown))
				return -1;
			report_bad(o->file, &bad);
			memset(&bad, 0, sizeof(bad));
			/* Between a rotation's rename and the new file: wait for
			 * it, as a reader that stopped would miss nothing. */
			while (access(o->file, F_OK) && errno == ENOENT)
				usleep(FOLLOW_POLL_US);
			live = catch_up(o, &r, shown);
			event_reader_close(&r);
			if (live == -2)
				return -1;
			err = reader_open(&r, o->file, live);
			if (live >= 0)
				close(live);
			if (err)
				return -1;
			continue;
		}
		usleep(FOLLOW_POLL_US);
	}
}

/* With --since, every file that reaches back that far, each once while
 * the agent rotates them (event_stream_each()); with --follow the live
 * one is followed after the others. */
static int show_since(const struct opts *o, long *shown)
{
	struct shown_files sf = { o, shown, -1 };
	unsigned lost;
	int err = event_stream_each(o->file, o->f.since_ms, show_stream_file, &sf, &lost);

	if (err < 0)
		fprintf(stderr, "sandguard events: cannot read %s: %s\n", o->file,
			event_stream_strerror(err));
	else
		warn_lost(o->file, lost);
	if (!err && o->follow)
		err = follow(o, sf.live_fd, shown);
	if (sf.live_fd >= 0)
		close(sf.live_fd);
	return err;
}

int cmd_events(int argc, char **argv)
{
	struct opts o;
	struct stat st;
	long shown = 0;
	int ret, err;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret < 0 ? SG_EXIT_OK : ret;
	if (stat(o.file, &st)) {
		fprintf(stderr, "sandguard events: %s: %s%s\n", o.file, strerror(errno),
			errno == ENOENT ? " (is the agent running, and writing events there? "
					  "see --file)"
					: "");
		return SG_EXIT_TENANT;
	}
	if (!o.json)
		print_header();
	if (o.f.has_since)
		err = show_since(&o, &shown);
	else
		err = o.follow ? follow(&o, -1, &shown) : show_file(&o, o.file, -1, &shown);
	fflush(stdout);
	if (err)
		return SG_EXIT_TENANT;
	if (shown == 0 && !o.json)
		fprintf(stderr, "sandguard events: no events match\n");
	return SG_EXIT_OK;
}
