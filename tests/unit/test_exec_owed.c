/* A killed executor's batch ends with exactly one final record, wherever
 * it dies (src/exec/exec_owed.c, the states in src/sandbox/sandbox_record.h):
 * an executor is forked, dies at one step of a batch, and the reaper
 * (exec_reap_orphans) books what its in-flight record owes. Each case
 * asserts the journal's fold, the way the ledger counts it: one final
 * record for the batch, every attempt that was booked kept, and no
 * record left. Over a scripted fake sandbox, in a private run, state and
 * log directory. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "tmp_dir.h"
#include "exec/exec.h"
#include "exec/exec_internal.h"
#include "journal_lines.h"

static char tmp[64];
static struct sg_policy policy;
static struct exec_ctx ctx;
static char *const argv_[] = { "/usr/bin/python3", "reward.py", NULL };
static int calls, die_at_call;
static bool record_runs;       /* the fake writes the run's record, as sandbox_exec does */
static int die_when_running;   /* die once this many run records exist (parallel tests) */
static bool die_before_record; /* die at die_at_call before its record is written */

static size_t records_left(void);

/* The names in the in-flight directory: the records (prefix NULL: those
 * not starting with a dot), or all those starting with `prefix`, dot
 * files included (the released records an executor keeps for reuse are
 * .tmp files). */
static size_t files_left(const char *prefix)
{
	char dir[128];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/run/inflight", tmp);
	d = opendir(dir);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += prefix ? strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
				      !strncmp(e->d_name, prefix, strlen(prefix))
			    : e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* What the sandbox layer writes when a run starts (record_run()). */
static void record_run(const struct sandbox_spec *spec, const char *id)
{
	struct sb_record rec;
	char detail[256];

	if (!spec->record)
		return;
	rec = spec->record->rec;
	rec.kind = SB_RECORD_RUN;
	rec.attempt = spec->attempt;
	snprintf(rec.sandbox, sizeof(rec.sandbox), "%s", id);
	snprintf(rec.outcome, sizeof(rec.outcome), "%s", id);
	snprintf(rec.final_id, sizeof(rec.final_id), "%s", spec->record->owes_final ? id : "");
	assert_int_equal(sb_run_record_write(spec->record, &rec, detail, sizeof(detail)), 0);
}

/* Run 1 is a platform fault (retried); the executor dies as run
 * `die_at_call` starts, or once `die_when_running` runs are in flight. */
static int fake_run(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	int call = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);

	memset(r, 0, sizeof(*r));
	r->rule = -1;
	r->end = SB_EXITED;
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "fake-%d-%d", (int)getpid(), call);
	if (call == die_at_call && die_before_record)
		_exit(0);
	if (record_runs)
		record_run(spec, r->sandbox_id);
	if (call == die_at_call)
		_exit(0);
	/* Parallel tests: each waits (2 s at most) for the others to start. */
	for (int i = 0; die_when_running && i < 200; i++) {
		if (records_left() >= (size_t)die_when_running + 1) /* + the request's */
			_exit(0);
		usleep(10 * 1000);
	}
	r->out = strdup("[0.5]");
	r->out_len = 5;
	return call == 1 ? -EIO : 0;
}

static int setup(void **state)
{
	(void)state;
	tmp_dir_executor(tmp, sizeof(tmp), "owed");
	policy_defaults(&policy);
	snprintf(policy.tenant, sizeof(policy.tenant), "acme");
	policy.max_retries = 1;
	ctx = (struct exec_ctx){
		.policy = &policy, .tenant = "acme", .argv = argv_, .run = fake_run
	};
	calls = die_at_call = die_when_running = 0;
	record_runs = die_before_record = false;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tmp_dir_remove(tmp);
	return 0;
}

static bool has_text(const json_t *o, const char *needle)
{
	char *text = json_dumps(o, 0);
	bool has = text && strstr(text, needle);

	free(text);
	return has;
}

/* The journal's fold for `batch_id`: the first record of each id. */
struct fold {
	size_t records, finals, from_reaper;
	json_t *final; /* borrowed from lines; NULL when none */
	json_t *lines;
};

static void fold_batch(const char *batch_id, struct fold *f)
{
	json_t *seen = json_object();
	size_t i;
	json_t *o;

	memset(f, 0, sizeof(*f));
	f->lines = journal_lines();
	json_array_foreach(f->lines, i, o)
	{
		const char *id = json_string_value(json_object_get(o, "id"));

		assert_non_null(id);
		if (strcmp(json_string_value(json_object_get(o, "batch_id")), batch_id) ||
		    json_object_get(seen, id))
			continue;
		json_object_set_new(seen, id, json_true());
		f->records++;
		f->from_reaper += has_text(o, "executor died");
		if (json_is_true(json_object_get(o, "final"))) {
			f->finals++;
			f->final = o;
		}
	}
	json_decref(seen);
}

static size_t records_left(void)
{
	return files_left(NULL);
}

/* In a child, `fn` dies (or returns, then the child exits without any
 * cleanup); then the reaper runs. */
static void die_then_reap(void (*fn)(void))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_true(exec_reap_orphans(NULL) >= 0);
	assert_int_equal(exec_reap_orphans(NULL), 0); /* once */
	assert_int_equal(records_left(), 0);
}

static void run_batch(void)
{
	static const char json[] = "{\"batch_id\": \"b-owed\", \"items\": [{\"prompt\": \"p\", "
				   "\"completion\": \"a\"}]}";
	struct exec_batch batch;
	struct exec_result res;
	char err[256];

	assert_int_equal(exec_batch_parse(json, strlen(json), "b", &batch, err, sizeof(err)), 0);
	exec_batch(&ctx, &batch, &res);
	/* freed: a child that then leaves by exit() is leak-checked */
	exec_result_free(&res);
	exec_batch_free(&batch);
}

/* A batch run to its end (its records released and kept for reuse, as
 * .tmp files), then another one during which the executor dies. */
static void finished_then_dies(void)
{
	static const char json[] = "{\"batch_id\": \"b-next\", \"items\": [{\"prompt\": "
				   "\"p\", \"completion\": \"a\"}]}";
	struct exec_batch batch;
	struct exec_result res;
	char err[256];

	run_batch();
	if (files_left(".tmp-spare-") == 0 || records_left() != 0)
		_exit(3); /* the released records were not kept, or not released */
	assert_int_equal(exec_batch_parse(json, strlen(json), "b", &batch, err, sizeof(err)), 0);
	exec_batch(&ctx, &batch, &res);
}

/* Records an executor released and kept are no records: dead in the next
 * batch, it leaves that batch's record, booked once by the reaper, and
 * nothing for the finished one; its kept files go with it. */
static void test_kept_records_are_no_records(void **state)
{
	struct fold f;

	(void)state;
	record_runs = true;
	die_at_call = 3; /* the finished batch's two attempts, then the next's first */
	die_then_reap(finished_then_dies);
	fold_batch("b-owed", &f);
	assert_int_equal(f.finals, 1);
	assert_int_equal(f.from_reaper, 0);
	json_decref(f.lines);
	fold_batch("b-next", &f);
	assert_int_equal(f.finals, 1);
	assert_true(has_text(f.final, "executor died"));
	json_decref(f.lines);
	assert_int_equal(files_left(""), 0);
}

/* An executor that ends in order (exit(), a one-shot `sandguard exec`)
 * takes its kept files with it: the in-flight directory is empty after it,
 * with no reaper (chaos's check: a final CLI run left two .tmp-spare files). */
static void test_orderly_exit_leaves_no_files(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	record_runs = true;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		run_batch();
		_exit(files_left(".tmp-spare-") ? 0 : 3); /* kept while it runs */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(files_left(".tmp-spare-") > 0); /* _exit: the reaper's */
	assert_true(exec_reap_orphans(NULL) >= 0);
	assert_int_equal(files_left(""), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		run_batch();
		exit(0); /* in order: its atexit handler runs */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(files_left(""), 0);
}

/* Attempt 1 booked (retried), dead before attempt 2 ran: the final is the
 * one the record owed between the two, booked by the reaper. */
static void test_dies_between_attempts(void **state)
{
	struct fold f;

	(void)state;
	die_at_call = 2;
	die_then_reap(run_batch);
	fold_batch("b-owed", &f);
	assert_int_equal(f.records, 2); /* attempt 1, and the final */
	assert_int_equal(f.finals, 1);
	assert_true(has_text(f.final, "before it booked the batch's final"));
	assert_string_equal(json_string_value(json_object_get(f.final, "cause")), "platform_error");
	json_decref(f.lines);
}

/* Dead in the middle of attempt 2 (its record written): the reaper books
 * attempt 2 as the final, "executor died". */
static void test_dies_mid_attempt(void **state)
{
	struct fold f;

	(void)state;
	record_runs = true;
	die_at_call = 2;
	die_then_reap(run_batch);
	fold_batch("b-owed", &f);
	assert_int_equal(f.records, 2);
	assert_int_equal(f.finals, 1);
	assert_int_equal(json_integer_value(json_object_get(f.final, "attempt")), 2);
	assert_true(has_text(f.final, "executor died"));
	assert_false(has_text(f.final, "before it booked"));
	json_decref(f.lines);
}

/* One booking at a time, dying at step `step_stop`: 1 between the
 * record's rewrite and the append, 2 after the append (attempt 1 booked,
 * retried), 3 after the append of a final, before its record went. */
static int step_stop;

static void booking_steps(void)
{
	struct sandbox_result r = { .rule = -1 };
	struct sb_run_record owed;
	bool final = step_stop == 3;
	struct exec_booking b = { .mode = "batch",
				  .batch_id = "b-steps",
				  .attempt = 1,
				  .final = final,
				  .retried = !final,
				  .cause = final ? SG_CAUSE_OK : SG_CAUSE_PLATFORM_ERROR,
				  .rule = -1,
				  .run = &r,
				  .detail = "scripted" };
	char id[SG_ID_BUF];

	snprintf(r.sandbox_id, sizeof(r.sandbox_id), "sb-steps-1");
	exec_owed_init(&owed, &ctx, "batch", "b-steps", true);
	exec_owed_before_booking(&owed, &b, id, sizeof(id));
	assert_string_equal(id, "sb-steps-1");
	assert_true(b.final == final);
	if (step_stop == 1)
		_exit(0);
	assert_int_equal(exec_book(&ctx, &b), 0);
	_exit(0);
}

static void test_dies_around_the_append(void **state)
{
	struct fold f;

	(void)state;
	for (step_stop = 1; step_stop <= 3; step_stop++) {
		journal_clear();
		die_then_reap(booking_steps);
		fold_batch("b-steps", &f);
		assert_int_equal(f.finals, 1);
		if (step_stop == 3) {
			/* The reaper's has the same id: the fold keeps the executor's. */
			assert_int_equal(f.records, 1);
			assert_int_equal(f.from_reaper, 0);
			assert_string_equal(json_string_value(json_object_get(f.final, "cause")),
					    "ok");
		} else {
			/* Attempt 1 (the executor's, or the reaper's "executor
			 * died"), and the final it owed. */
			assert_int_equal(f.records, 2);
			assert_int_equal(f.from_reaper, step_stop == 1 ? 2 : 1);
		}
		json_decref(f.lines);
	}
}

static void run_verify(void)
{
	static const char json[] = "[{\"input\": \"1\", \"output\": \"[0.5]\"}, "
				   "{\"input\": \"2\", \"output\": \"[0.5]\"}, "
				   "{\"input\": \"3\", \"output\": \"[0.5]\"}]";
	struct verify_cases c;
	struct exec_result res;
	char err[256];

	assert_int_equal(verify_cases_parse(json, strlen(json), "tests", &c, err, sizeof(err)), 0);
	exec_verify(&ctx, "v-owed", &c, &res);
}

/* A verifier's tests own no final; the request's record does, from
 * before its first test: one final, whichever test it died in. */
static void test_verify_dies_mid_tests(void **state)
{
	struct fold f;

	(void)state;
	policy.limits.concurrency = 1; /* the tests in order */
	die_at_call = 3;
	die_then_reap(run_verify);
	fold_batch("v-owed", &f);
	assert_int_equal(f.finals, 1);
	assert_true(has_text(f.final, "before it booked the batch's final"));
	json_decref(f.lines);
}

/* Two tests in flight at once, each with its run record: both are booked
 * as tests ("executor died"), and the request's final once. */
static void test_verify_dies_with_parallel_tests(void **state)
{
	struct fold f;

	(void)state;
	policy.limits.concurrency = 2;
	record_runs = true;
	die_when_running = 2;
	die_then_reap(run_verify);
	fold_batch("v-owed", &f);
	assert_int_equal(f.finals, 1);
	assert_true(has_text(f.final, "before it booked the batch's final"));
	assert_true(f.from_reaper >= 2); /* a test or two, and the final */
	json_decref(f.lines);
}

/* Dead between two tests of one worker, whose record is then idle (kept,
 * owing nothing, for its next test): the reaper books the request's final
 * and nothing for the idle record, which goes. Counted on the journal's
 * lines, not the fold, which would hide a test booked twice. */
static void test_verify_dies_between_tests(void **state)
{
	struct fold f;
	size_t lines = 0, i;
	json_t *o;

	(void)state;
	policy.limits.concurrency = 1; /* one worker, the tests in order */
	record_runs = true;
	die_before_record = true;
	die_at_call = 3; /* test 1: attempts 1 (-EIO) and 2 booked; test 2 not started */
	die_then_reap(run_verify);
	fold_batch("v-owed", &f);
	json_array_foreach(f.lines, i, o)
		lines += !strcmp(json_string_value(json_object_get(o, "batch_id")), "v-owed");
	assert_int_equal(lines, 3); /* test 1's two attempts, and the final */
	assert_int_equal(f.records, 3);
	assert_int_equal(f.finals, 1);
	assert_int_equal(f.from_reaper, 1); /* the final alone */
	assert_true(has_text(f.final, "before it booked the batch's final"));
	json_decref(f.lines);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dies_between_attempts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_records_are_no_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orderly_exit_leaves_no_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dies_around_the_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dies_mid_attempt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_dies_mid_tests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify_dies_with_parallel_tests, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_verify_dies_between_tests, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
