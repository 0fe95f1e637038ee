/* The outcome journal: the record codec, durable appends in order,
 * rotation and retention, readers that see complete lines only, a torn
 * line that never swallows the next record, a failed write refused whole,
 * an unfinished tail never kept across a wait,
 * appends from many processes at once, the disk reserve, and a request's
 * records synced together (a group). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <cmocka.h>
#include "abi/events.h"
#include "telemetry/journal.h"
#include "telemetry/journal_read.h"
#include "telemetry/journal_record.h"

static char state[64];
static struct journal j;

static int setup(void **s)
{
	snprintf(state, sizeof(state), "/tmp/sg-journal-XXXXXX");
	if (!mkdtemp(state))
		return -1;
	unsetenv("SANDGUARD_JOURNAL_SEGMENT_BYTES");
	unsetenv("SANDGUARD_JOURNAL_KEEP");
	unsetenv("SANDGUARD_JOURNAL_RESERVE_BYTES");
	return journal_init(&j, state);
}

static int teardown(void **s)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	return system(cmd);
}

static struct sg_outcome outcome(const char *id, const char *tenant, enum sg_cause cause)
{
	struct sg_outcome o = { .cause = cause, .rule = -1, .attempt = 1, .final = true };

	snprintf(o.id, sizeof(o.id), "%s", id);
	snprintf(o.tenant, sizeof(o.tenant), "%s", tenant);
	snprintf(o.batch_id, sizeof(o.batch_id), "b-%s", id);
	return o;
}

/* Append the record of `o`; returns where it went. */
static struct journal_pos append(const struct sg_outcome *o)
{
	struct journal_pos at;
	char *line;
	size_t len;

	assert_int_equal(journal_record_encode(o, "some detail", &line, &len), 0);
	assert_int_equal(journal_append(&j, line, len, &at), 0);
	free(line);
	return at;
}

/* Read every line from `from`; the ids in order, joined by spaces. */
static int read_ids(const struct journal_pos *from, char *ids, size_t cap, uint64_t *gaps)
{
	struct journal_cursor c;
	struct journal_pos at;
	struct sg_outcome o;
	char why[128], *line;
	size_t len;
	int n = 0;

	ids[0] = '\0';
	journal_cursor_init(&c, j.dir, from);
	while (journal_next(&c, &line, &len, &at) > 0) {
		if (journal_record_decode(line, len, &o, why, sizeof(why)))
			snprintf(ids + strlen(ids), cap - strlen(ids), "BAD ");
		else
			snprintf(ids + strlen(ids), cap - strlen(ids), "%s ", o.id);
		n++;
	}
	if (gaps)
		*gaps = c.gap_segments;
	journal_cursor_close(&c);
	return n;
}

static void test_record_codec(void **s)
{
	struct sg_outcome o = outcome("3f2a9c01-4242", "acme", SG_CAUSE_TENANT_POLICY_VIOLATION),
			  back;
	char *line, why[160], id[SG_ID_BUF];
	size_t len;

	o.rule = SG_RULE_EGRESS;
	o.mode = SG_MODE_RUN;
	o.attempt = 2;
	o.wall_ms = 1234;
	o.ts_ms = 1790000000123ull;
	o.started_ms = o.ts_ms - 1234;
	o.pid = 4242;
	o.cgroup_id = 99;
	o.cpu_known = o.mem_peak_known = true;
	o.cpu_us = 987654;
	o.mem_peak_bytes = 5u << 20;
	snprintf(o.sandbox, sizeof(o.sandbox), "3f2a9c01-4242");
	assert_int_equal(journal_record_encode(&o, "killed by the agent: egress rule", &line, &len),
			 0);
	assert_null(memchr(line, '\n', len));
	assert_int_equal(strncmp(line, "{\"v\":1,\"id\":\"3f2a9c01-4242\",\"ts\":\"2026-", 39), 0);
	/* The class a reader sees: a run-once violation is a verdict. */
	assert_non_null(strstr(line, "\"class\":\"verdict\""));
	assert_non_null(strstr(line, "\"detail\":\"killed by the agent: egress rule\""));
	assert_int_equal(journal_record_id(line, len, id, sizeof(id)), 0);
	assert_string_equal(id, "3f2a9c01-4242");
	assert_int_equal(journal_record_decode(line, len, &back, why, sizeof(why)), 0);
	assert_string_equal(back.id, o.id);
	assert_string_equal(back.tenant, "acme");
	assert_string_equal(back.sandbox, o.sandbox);
	assert_int_equal(back.mode, SG_MODE_RUN);
	assert_int_equal(back.cause, SG_CAUSE_TENANT_POLICY_VIOLATION);
	assert_int_equal(back.rule, SG_RULE_EGRESS);
	assert_int_equal(back.attempt, 2);
	assert_true(back.final);
	assert_int_equal(back.wall_ms, 1234);
	assert_int_equal(back.ts_ms, o.ts_ms);
	assert_int_equal(back.started_ms, o.started_ms);
	assert_int_equal(back.pid, 4242);
	assert_int_equal(back.cgroup_id, 99);
	assert_true(back.cpu_known && back.mem_peak_known);
	assert_int_equal(back.cpu_us, 987654);
	assert_int_equal(back.mem_peak_bytes, 5u << 20);
	free(line);

	/* The notes for people and `sandguard explain`: after "detail", in
	 * order, null when not known; the fold decodes either form. */
	assert_int_equal(journal_record_encode(&o, NULL, &line, &len), 0);
	assert_non_null(strstr(line,
			       "\"detail\":null,\"reason\":null,\"decision\":null,\"uid\":null,"
			       "\"init_pid\":null,\"limits\":null,\"policy\":null,\"test\":null}"));
	free(line);
	struct sg_limits lim = { .timeout_ms = 2000,
				 .memory_mb = 256,
				 .max_tasks = 32,
				 .max_forks = 1024,
				 .cpu = 1.5,
				 .output_bytes = 4096 };
	assert_int_equal(
		journal_record_encode_notes(&o,
					    &(struct journal_notes){ .detail = "d",
								     .reason = "why",
								     .decision = "final: x",
								     .policy = "/p/acme.json",
								     .uid = 61234,
								     .init_pid = 4321,
								     .limits = &lim,
								     .timeout_ms = 1500,
								     .test = 3 },
					    &line, &len),
		0);
	assert_non_null(strstr(
		line,
		"\"detail\":\"d\",\"reason\":\"why\",\"decision\":\"final: x\","
		"\"uid\":61234,\"init_pid\":4321,\"limits\":{\"timeout_ms\":1500,\"memory_mb\":256,"
		"\"max_tasks\":32,\"max_forks\":1024,\"cpu\":1.5,\"output_bytes\":4096},"
		"\"policy\":\"/p/acme.json\",\"test\":2}"));
	assert_int_equal(journal_record_decode(line, len, &back, why, sizeof(why)), 0);
	assert_string_equal(back.id, o.id);
	free(line);

	/* Without an id or a tenant there is no record. */
	o.id[0] = '\0';
	assert_int_equal(journal_record_encode(&o, NULL, &line, &len), -EINVAL);

	const char *bad[] = {
		"",
		"[]",
		"{\"v\":2,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"Not Valid\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"nope\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"tenant_bogus\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":-1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"tenant_policy_violation\",\"attempt\":1,\"final\":true,\"wall_ms\":1,\"rule\":null}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1,\"rule\":\"teleport\"}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1,\"cpu_us\":-5}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1,\"mem_peak_bytes\":\"big\"}",
		"{\"v\":1,\"id\":\"x\",\"id\":\"y\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":1,\"final\":true,\"wall_ms\":1}",
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\",\"attempt\":0,\"final\":true,\"wall_ms\":1,\"artifact_refused\":7}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(journal_record_decode(bad[i], strlen(bad[i]), &back, why,
						       sizeof(why)),
				 -EBADMSG);
		assert_true(why[0]);
	}
	/* The smallest valid one. */
	const char *ok =
		"{\"v\":1,\"id\":\"x\",\"tenant\":\"acme\",\"mode\":\"batch\",\"cause\":\"ok\","
		"\"attempt\":0,\"final\":true,\"wall_ms\":0}";
	assert_int_equal(journal_record_decode(ok, strlen(ok), &back, why, sizeof(why)), 0);
	assert_string_equal(back.artifact_refused, "");
	/* A refused artifact is a policy violation that names no rule; it
	 * round-trips, and the ledger books it (no rule counted). */
	memset(&o, 0, sizeof(o));
	snprintf(o.id, sizeof(o.id), "o-1");
	snprintf(o.tenant, sizeof(o.tenant), "acme");
	o.cause = SG_CAUSE_TENANT_POLICY_VIOLATION;
	o.rule = -1;
	o.final = true;
	snprintf(o.artifact_refused, sizeof(o.artifact_refused),
		 "artifact /p/s.py: sha256 expected 11, found 22");
	assert_int_equal(journal_record_encode(&o, "d", &line, &len), 0);
	assert_int_equal(journal_record_decode(line, len, &back, why, sizeof(why)), 0);
	assert_string_equal(back.artifact_refused, o.artifact_refused);
	assert_int_equal(back.cause, SG_CAUSE_TENANT_POLICY_VIOLATION);
	assert_int_equal(back.rule, -1);
	free(line);

	assert_int_equal(journal_new_id(id, sizeof(id)), 0);
	assert_int_equal(strlen(id), 18);
	assert_int_equal(strncmp(id, "o-", 2), 0);
}

static void test_append_and_read(void **s)
{
	struct journal_pos p1, p2, p3;
	struct sg_outcome o;
	char ids[256];

	assert_int_equal(read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), NULL), 0);
	o = outcome("a", "acme", SG_CAUSE_OK);
	p1 = append(&o);
	o = outcome("b", "acme", SG_CAUSE_TENANT_CRASH);
	p2 = append(&o);
	o = outcome("c", "beta", SG_CAUSE_OK);
	p3 = append(&o);
	assert_int_equal(p1.segment, 1);
	assert_int_equal(p1.offset, 0);
	assert_int_equal(p2.segment, 1);
	assert_true(p2.offset > p1.offset && p3.offset > p2.offset);
	assert_int_equal(read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), NULL), 3);
	assert_string_equal(ids, "a b c ");
	/* From a position on: what a checkpoint resumes from. */
	assert_int_equal(read_ids(&p2, ids, sizeof(ids), NULL), 2);
	assert_string_equal(ids, "b c ");
	/* One record, one line. */
	assert_int_equal(journal_append(&j, "{\"a\":\n1}", 8, NULL), -EINVAL);
}

/* A reader sees complete lines only; a torn line becomes one bad line
 * once the next append ends it, and the next record is intact. */
static void test_torn_line(void **s)
{
	struct journal_cursor c;
	struct journal_pos at;
	struct sg_outcome o = outcome("a", "acme", SG_CAUSE_OK);
	char path[PATH_MAX], ids[256], *line;
	size_t len;
	int fd;

	append(&o);
	assert_int_equal(journal_segment_path(j.dir, 1, path, sizeof(path)), 0);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\"v\":1,\"id\":\"torn", 17), 17); /* killed mid-write */
	close(fd);

	journal_cursor_init(&c, j.dir, &(struct journal_pos){ 0, 0 });
	assert_int_equal(journal_next(&c, &line, &len, &at), 1);
	assert_int_equal(journal_next(&c, &line, &len, &at), 0); /* the partial line waits */
	o = outcome("b", "acme", SG_CAUSE_OK);
	append(&o);
	assert_int_equal(journal_next(&c, &line, &len, &at), 1);
	assert_int_equal(len, 17); /* the torn part, alone */
	assert_int_equal(journal_next(&c, &line, &len, &at), 1);
	assert_non_null(strstr(line, "\"id\":\"b\""));
	assert_int_equal(journal_next(&c, &line, &len, &at), 0);
	journal_cursor_close(&c);
	assert_int_equal(read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), NULL), 3);
	assert_string_equal(ids, "a BAD b ");
}

static void test_rotation(void **s)
{
	struct sg_outcome o;
	uint64_t *seqs, gaps;
	size_t n;
	char id[32], ids[65536];
	int lines;

	setenv("SANDGUARD_JOURNAL_SEGMENT_BYTES", "4096", 1);
	setenv("SANDGUARD_JOURNAL_KEEP", "3", 1);
	assert_int_equal(journal_init(&j, state), 0);
	assert_int_equal(j.segment_bytes, 4096);
	assert_int_equal(j.keep, 3);
	for (int i = 0; i < 200; i++) {
		snprintf(id, sizeof(id), "r%d", i);
		o = outcome(id, "acme", SG_CAUSE_OK);
		append(&o);
	}
	assert_int_equal(journal_segments(j.dir, &seqs, &n), 0);
	assert_int_equal(n, 3); /* the newest three kept */
	assert_true(seqs[0] > 1);
	assert_int_equal(seqs[1], seqs[0] + 1);
	assert_int_equal(seqs[2], seqs[0] + 2);
	for (size_t k = 0; k < n; k++) {
		char path[PATH_MAX];
		struct stat st;
		assert_int_equal(journal_segment_path(j.dir, seqs[k], path, sizeof(path)), 0);
		assert_int_equal(stat(path, &st), 0);
		assert_true(st.st_size <= 4096);
	}
	/* Read from the start: the retained records, in order, ending with r199. */
	lines = read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), &gaps);
	assert_true(lines > 10 && lines < 200);
	assert_int_equal(gaps, 0);
	assert_non_null(strstr(ids, "r198 r199 "));
	assert_null(strstr(ids, "r0 "));
	/* A position in a deleted segment: a gap, counted, and reading goes on. */
	assert_int_equal(read_ids(&(struct journal_pos){ 1, 100 }, ids, sizeof(ids), &gaps), lines);
	assert_int_equal(gaps, seqs[0] - 1);
	free(seqs);

	/* An invalid setting is warned about and the default used. */
	setenv("SANDGUARD_JOURNAL_KEEP", "1", 1);
	setenv("SANDGUARD_JOURNAL_SEGMENT_BYTES", "lots", 1);
	assert_int_equal(journal_init(&j, state), 0);
	assert_int_equal(j.keep, JOURNAL_KEEP_DEFAULT);
	assert_int_equal(j.segment_bytes, JOURNAL_SEGMENT_BYTES_DEFAULT);
}

/* A write the filesystem cuts short (here: RLIMIT_FSIZE, which fallocate
 * does not check, as a disk without fallocate would when full) is an
 * error, and the part written stays: a reader may have read it. The next
 * append ends it with a newline, so it is one bad line and the journal
 * goes on. */
static void test_failed_append(void **s)
{
	struct sg_outcome o = outcome("a", "acme", SG_CAUSE_OK);
	char path[PATH_MAX], ids[256], *line;
	struct rlimit old, lim;
	struct stat before, after;
	size_t len;

	append(&o);
	assert_int_equal(journal_segment_path(j.dir, 1, path, sizeof(path)), 0);
	assert_int_equal(stat(path, &before), 0);
	o = outcome("b-with-a-long-id-so-that-the-line-does-not-fit", "acme", SG_CAUSE_OK);
	assert_int_equal(journal_record_encode(&o, NULL, &line, &len), 0);
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = before.st_size + 10;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_true(journal_append(&j, line, len, NULL) < 0);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_size, before.st_size + 10); /* cut short, kept */
	assert_int_equal(journal_append(&j, line, len, NULL), 0);
	free(line);
	assert_int_equal(read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), NULL), 3);
	assert_string_equal(ids, "a BAD b-with-a-long-id-so-that-the-line-does-not-fit ");
}

/* Issue 32: a reader that has read the unfinished tail of a segment does
 * not keep it across the wait. A writer that takes such a tail back and
 * writes the next record in its place (this one's older versions did, after
 * a write cut short by a full disk) must not get the tail's head spliced
 * onto the next record: the reader hands out that record, whole. */
static void test_tail_taken_back(void **s)
{
	struct journal_cursor c;
	struct journal_pos at;
	struct sg_outcome o = outcome("a", "acme", SG_CAUSE_OK);
	char path[PATH_MAX], *line, *gone;
	size_t len, gone_len;
	struct stat st;
	int fd;

	append(&o);
	assert_int_equal(journal_segment_path(j.dir, 1, path, sizeof(path)), 0);
	assert_int_equal(stat(path, &st), 0);
	o = outcome("refused-with-a-much-longer-id-than-the-next", "hostile",
		    SG_CAUSE_PLATFORM_ERROR);
	assert_int_equal(journal_record_encode(&o, "the disk is full", &gone, &gone_len), 0);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, gone, gone_len - 5), (ssize_t)gone_len - 5);

	journal_cursor_init(&c, j.dir, &(struct journal_pos){ 0, 0 });
	assert_int_equal(journal_next(&c, &line, &len, &at), 1);
	assert_int_equal(journal_next(&c, &line, &len, &at), 0); /* the tail read, unfinished */
	assert_int_equal(ftruncate(fd, st.st_size), 0);          /* and taken back */
	close(fd);
	free(gone);
	o = outcome("b", "v0", SG_CAUSE_OK);
	append(&o);
	o = outcome("c", "v0", SG_CAUSE_OK);
	append(&o);
	assert_int_equal(journal_next(&c, &line, &len, &at), 1);
	assert_non_null(strstr(line, "\"id\":\"b\""));
	assert_null(strstr(line, "hostile"));
	assert_int_equal(at.offset, (uint64_t)st.st_size);
	assert_int_equal(journal_next(&c, &line, &len, &at), 1);
	assert_non_null(strstr(line, "\"id\":\"c\""));
	assert_int_equal(journal_next(&c, &line, &len, &at), 0);
	journal_cursor_close(&c);
}

/* A forked child's: `n` records <prefix><i>, then its exit (1: one failed). */
static void child_appends(const char *prefix, int n)
{
	char id[64], *line;
	struct sg_outcome o;
	size_t len;

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "%s%d", prefix, i);
		o = outcome(id, "acme", SG_CAUSE_OK);
		if (journal_record_encode(&o, NULL, &line, &len) ||
		    journal_append(&j, line, len, NULL))
			_exit(1);
		free(line);
	}
	_exit(0);
}

/* This process keeps the newest segment open between appends: whatever
 * other executors did to the journal meanwhile, its next record lands in
 * the live newest segment and is read back. */
static void test_kept_segment(void **s)
{
	struct sg_outcome o = outcome("a", "acme", SG_CAUSE_OK);
	struct journal_pos at;
	char path[PATH_MAX], ids[65536], cmd[PATH_MAX + 16];
	uint64_t *seqs;
	size_t n;
	pid_t kid;
	int fd, status;

	setenv("SANDGUARD_JOURNAL_SEGMENT_BYTES", "4096", 1);
	setenv("SANDGUARD_JOURNAL_KEEP", "2", 1);
	assert_int_equal(journal_init(&j, state), 0);
	assert_int_equal(append(&o).segment, 1); /* segment 1 kept open */
	/* Another executor rotated: segment 2 made, empty so far. */
	assert_int_equal(journal_segment_path(j.dir, 2, path, sizeof(path)), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0640);
	assert_true(fd >= 0);
	close(fd);
	o = outcome("b", "acme", SG_CAUSE_OK);
	assert_int_equal(append(&o).segment, 2);
	/* Another process rotates past the kept segment and prunes it. */
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0)
		child_appends("k", 100);
	assert_int_equal(waitpid(kid, &status, 0), kid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(journal_segments(j.dir, &seqs, &n), 0);
	assert_int_equal(n, 2);
	assert_true(seqs[0] > 2); /* the kept segment 2 is gone */
	o = outcome("z", "acme", SG_CAUSE_OK);
	at = append(&o);
	assert_int_equal(at.segment, seqs[1]);
	free(seqs);
	assert_true(read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), NULL) > 2);
	assert_non_null(strstr(ids, "k99 z "));
	/* The journal wiped (its lock file too): a new one, segment 1. */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", j.dir);
	assert_int_equal(system(cmd), 0);
	o = outcome("c", "acme", SG_CAUSE_OK);
	assert_int_equal(append(&o).segment, 1);
	assert_int_equal(read_ids(&(struct journal_pos){ 0, 0 }, ids, sizeof(ids), NULL), 1);
	assert_string_equal(ids, "c ");
	snprintf(path, sizeof(path), "%s/.lock", j.dir);
	assert_int_equal(access(path, F_OK), 0);
}

/* Executors append at once: every record whole, none lost. */
static void test_concurrent_appends(void **s)
{
	enum { KIDS = 8, EACH = 100 };
	char ids[1], id[32];
	pid_t kids[KIDS];
	int status;

	setenv("SANDGUARD_JOURNAL_SEGMENT_BYTES", "65536", 1);
	setenv("SANDGUARD_JOURNAL_KEEP", "1000", 1);
	assert_int_equal(journal_init(&j, state), 0);
	for (int k = 0; k < KIDS; k++) {
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			snprintf(id, sizeof(id), "k%d-", k);
			child_appends(id, EACH);
		}
	}
	for (int k = 0; k < KIDS; k++) {
		assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	struct journal_cursor c;
	struct journal_pos at;
	struct sg_outcome o;
	char why[128], *line;
	size_t len;
	int n = 0, bad = 0;

	journal_cursor_init(&c, j.dir, &(struct journal_pos){ 0, 0 });
	while (journal_next(&c, &line, &len, &at) > 0) {
		n++;
		bad += journal_record_decode(line, len, &o, why, sizeof(why)) != 0;
	}
	journal_cursor_close(&c);
	assert_int_equal(n, KIDS * EACH);
	assert_int_equal(bad, 0);
	(void)ids;
}

static void test_space(void **s)
{
	uint64_t free_bytes;
	char why[PATH_MAX + 128];

	setenv("SANDGUARD_JOURNAL_RESERVE_BYTES", "0", 1);
	assert_int_equal(journal_init(&j, state), 0);
	assert_int_equal(journal_space(&j, &free_bytes), 0);
	assert_true(free_bytes > 0);
	setenv("SANDGUARD_JOURNAL_RESERVE_BYTES", "1152921504606846976", 1); /* 2^60 */
	assert_int_equal(journal_init(&j, state), 0);
	assert_int_equal(journal_space(&j, &free_bytes), -ENOSPC);
	journal_space_describe(&j, free_bytes, why, sizeof(why));
	assert_non_null(strstr(why, j.dir));
	assert_non_null(strstr(why, "below the reserve"));
	/* No side effect: the directory is not created by a check. */
	assert_int_equal(access(j.dir, F_OK), -1);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A group's records: written at once (a reader sees them before the
 * commit), one descriptor kept per segment they went to, never more than
 * JOURNAL_GROUP_SEGMENTS, all synced and closed by the commit, which
 * returns a failed sync. */
static void test_group(void **s)
{
	struct journal_group g = JOURNAL_GROUP_INIT;
	struct journal_pos at, first = { 0, 0 };
	struct sg_outcome o;
	char id[32], ids[65536], *line;
	int fds = open_fds(), pipefd[2];
	size_t len;

	setenv("SANDGUARD_JOURNAL_SEGMENT_BYTES", "4096", 1);
	setenv("SANDGUARD_JOURNAL_KEEP", "64", 1); /* none pruned */
	assert_int_equal(journal_init(&j, state), 0);
	for (int i = 0; i < 120; i++) {
		snprintf(id, sizeof(id), "g%d", i);
		o = outcome(id, "acme", SG_CAUSE_OK);
		assert_int_equal(journal_record_encode(&o, "some detail", &line, &len), 0);
		assert_int_equal(journal_group_append(&j, &g, line, len, &at), 0);
		free(line);
		if (i == 0)
			first = at;
		/* one descriptor per segment written since the last sync */
		assert_true(g.n >= 1 && g.n <= JOURNAL_GROUP_SEGMENTS);
		assert_int_equal(g.seq[g.n - 1], at.segment);
		for (unsigned k = 1; k < g.n; k++)
			assert_int_equal(g.seq[k], g.seq[k - 1] + 1);
		assert_int_equal(open_fds(), fds + (int)g.n);
	}
	assert_true(at.segment >= first.segment + JOURNAL_GROUP_SEGMENTS); /* it made room */
	assert_int_equal(read_ids(&first, ids, sizeof(ids), NULL), 120);
	assert_non_null(strstr(ids, "g0 g1 g2 "));
	assert_non_null(strstr(ids, "g118 g119 "));
	assert_int_equal(journal_group_commit(&g), 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(open_fds(), fds);
	assert_int_equal(journal_sync_segments(j.dir, 0, at.segment + 2), 0);

	/* A sync that fails (a pipe has no fdatasync): the commit says so,
	 * once, and the group is empty and usable again. */
	assert_int_equal(pipe(pipefd), 0);
	close(pipefd[1]);
	g.fd[0] = pipefd[0];
	g.seq[0] = 999;
	g.n = 1;
	assert_int_equal(journal_group_commit(&g), -EINVAL);
	assert_int_equal(g.n, 0);
	assert_int_equal(journal_group_commit(&g), 0);
	assert_int_equal(open_fds(), fds);
	pthread_mutex_destroy(&g.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_codec),
		cmocka_unit_test_setup_teardown(test_append_and_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tail_taken_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_segment, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_appends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_space, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
