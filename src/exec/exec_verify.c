/* Verifier mode: the program runs once per stdin/stdout test, tests in
 * parallel up to min(tenant concurrency, cores), outputs compared
 * LiveCodeBench-style; reward 1 iff every test passes. Each worker keeps
 * one sandbox for the tests it runs: every test is a fresh process in a
 * fresh cgroup and IPC namespace, and between two tests the sandbox is put
 * back as it was made (sandbox_reset(): nothing left running, the scratch
 * as made), or replaced when that cannot be done. Test failures are the
 * verdict, never retried; a platform error is retried within the attempt
 * budget, from a pool of max_retries retries for the whole request, and,
 * if it persists, fails the whole request (no reward: a platform fault
 * must not read as a wrong answer). A timeout on a node without room for
 * it gets one confirmation run (exec_confirm.c), outside that pool.
 *
 * With the policy's warm.verify, a Python program's tests are children of
 * a warm interpreter in that sandbox (docs/sandbox.md, "Warm interpreters
 * for verifier tests"). A warm test killed by SIGSYS (it made a SysV or
 * POSIX IPC object, which a cold run makes in an IPC namespace of its own,
 * or broke the sandbox's seccomp filter) is not what a cold run would
 * have done: it is booked as a platform error and runs again, cold,
 * without counting against the retry budget, and so do the request's
 * later tests.
 *
 * With ctx->build (a compiled language), the program is built once in the
 * request's first slot before any test (verify_compile.c) and handed to
 * every test's sandbox; a compile that fails is the request's verdict. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "exec_internal.h"
#include "interp/interp.h"
#include "verify_judge.h"
#include "judge/lcb.h"
#include "verify_compile.h"
#include "lib/log.h"
#include "lib/array_len.h"
#include "telemetry/journal.h"

const char *verify_status_name(enum verify_status s)
{
	static const char *const names[] = {
		[VERIFY_PASS] = "pass",   [VERIFY_FAIL] = "fail", [VERIFY_TIMEOUT] = "timeout",
		[VERIFY_CRASH] = "crash", [VERIFY_OOM] = "oom",   [VERIFY_VIOLATION] = "violation",
		[VERIFY_ERROR] = "error",
	};
	return (unsigned)s < ARRAY_LEN(names) ? names[s] : "unknown";
}

struct verify_job {
	const struct exec_ctx *ctx;
	const char *batch_id;
	const struct verify_cases *tests;
	struct exec_result *res;
	uint64_t timeout_ms;
	FILE *log;            /* the requester's log stream (sg_log_to()) */
	pthread_mutex_t lock; /* guards the fields below and res->err */
	size_t next;
	uint32_t runs;
	size_t err_test; /* the test whose stderr res->err holds */
	bool cold;       /* no more warm interpreters: a test needed a cold run */
	/* Platform retries the request may still spend, all its tests
	 * together: the policy's max_retries bounds what one request can
	 * cost the node, however many of its tests meet a platform error. */
	uint32_t retries_left;
	struct sandbox_file program; /* ctx->build's, for every test */
	/* The request's records, synced together before its result: one
	 * fdatasync for the compile, every test and the final, not one each
	 * (journal.h). */
	struct journal_group group;
};

/* One platform retry from the request's pool, if any is left. */
static bool take_retry(struct verify_job *job)
{
	bool ok;

	pthread_mutex_lock(&job->lock);
	ok = job->retries_left > 0;
	job->retries_left -= ok;
	pthread_mutex_unlock(&job->lock);
	return ok;
}

static enum verify_status status_of(enum sg_cause cause)
{
	switch (cause) {
	case SG_CAUSE_OK:
		return VERIFY_PASS;
	case SG_CAUSE_TENANT_TIMEOUT:
		return VERIFY_TIMEOUT;
	case SG_CAUSE_TENANT_CRASH:
		return VERIFY_CRASH;
	case SG_CAUSE_TENANT_OOM:
		return VERIFY_OOM;
	case SG_CAUSE_TENANT_POLICY_VIOLATION:
		return VERIFY_VIOLATION;
	case SG_CAUSE_TENANT_BAD_OUTPUT:
		return VERIFY_FAIL; /* oversized */
	default:
		return VERIFY_ERROR;
	}
}

/* Count a run and its sandbox; the result keeps the stderr of the first
 * failing test that wrote any. */
static void note_run(struct verify_job *job, size_t i, uint32_t attempt, bool confirmation,
		     enum sg_cause cause, bool failed, struct sandbox_result *r)
{
	pthread_mutex_lock(&job->lock);
	job->runs++;
	exec_attempts_add(&job->res->runs, attempt, (int)i, confirmation, r->sandbox_id, cause);
	if (r->warm_fallback[0] && !job->res->warm_fallback[0]) /* why a test ran cold */
		snprintf(job->res->warm_fallback, sizeof(job->res->warm_fallback), "%s",
			 r->warm_fallback);
	if (failed && r->err && r->err_len && i < job->err_test) {
		free(job->res->err);
		job->res->err = r->err;
		job->res->err_len = r->err_len;
		job->err_test = i;
		r->err = NULL;
	}
	pthread_mutex_unlock(&job->lock);
}

/* A warm test that ended as only a warm child can (above): the request's
 * tests run cold from now on, and the tenant's for a while. A test can
 * also kill itself with SIGSYS, which reads the same: without the while,
 * every request could make its tests cost two runs each (red-team finding
 * F1). The warm run is booked as what it was, never as a platform error:
 * the program can send itself SIGSYS (issue 31's audit). */
static bool cold_would_differ(struct verify_job *job, const struct exec_box *box, int rc,
			      const struct sandbox_result *r, char *detail, size_t len)
{
	if (rc || !r->warm || r->end != SB_SIGNALED || r->signal != SIGSYS)
		return false;
	pthread_mutex_lock(&job->lock);
	job->cold = true;
	pthread_mutex_unlock(&job->lock);
	if (box->sb)
		interp_refuse(box->sb, "a test was killed by SIGSYS in it");
	snprintf(detail, len,
		 "killed by SIGSYS in a warm interpreter (an IPC object, or a syscall the "
		 "sandbox refuses): run again cold");
	return true;
}

static bool job_cold(struct verify_job *job)
{
	bool cold;

	pthread_mutex_lock(&job->lock);
	cold = job->cold;
	pthread_mutex_unlock(&job->lock);
	return cold;
}

/* A test's own part of its attempts (exec_attempt()). */
struct test_attempts {
	struct verify_job *job;
	size_t i;
	int grader;
	/* Platform errors retried within it; a warm SIGSYS's cold rerun
	 * adds one, as it is not a retry. */
	uint32_t budget;
	/* the attempt's */
	enum verify_status status;
	bool cold_rerun;
	char booked[EXEC_DETAIL_MAX + 32];
};

/* A warm box does not fit a test that must run cold: it is replaced. */
static void test_before(void *self, struct sandbox_spec *spec)
{
	struct test_attempts *ta = self;

	spec->cold = spec->confirm || job_cold(ta->job);
}

static void test_judge(void *self, struct exec_try *t)
{
	struct test_attempts *ta = self;
	const struct exec_ctx *ctx = ta->job->ctx;

	t->cause = exec_classify(t->rc, &t->r, t->spec, &t->rule, t->detail, sizeof(t->detail));
	/* Killed by SIGSYS warm: booked as what it was (the program can send
	 * itself SIGSYS, so it is no evidence of ours), and superseded by a
	 * cold run, the test's own, not a retry. */
	ta->cold_rerun =
		cold_would_differ(ta->job, t->box, t->rc, &t->r, t->detail, sizeof(t->detail));
	if (ta->cold_rerun)
		ta->budget++;
	ta->status = status_of(t->cause);
	if (t->cause == SG_CAUSE_OK && t->r.out_truncated) {
		ta->status = VERIFY_FAIL;
		snprintf(t->detail, sizeof(t->detail),
			 "oversized: stdout exceeded the cap of %llu bytes",
			 (unsigned long long)ctx->policy->limits.output_bytes);
	} else if (t->cause == SG_CAUSE_OK &&
		   !verify_judge(ta->grader, &ta->job->tests->v[ta->i], t->r.out, t->r.out_len,
				 t->detail, sizeof(t->detail))) {
		ta->status = VERIFY_FAIL; /* a wrong answer: the run itself was fine (cause ok) */
	}
}

/* Test failures are the verdict; a platform error is retried from the
 * request's pool. */
static bool test_again(void *self, struct exec_try *t)
{
	struct test_attempts *ta = self;

	return t->confirm || ta->cold_rerun ||
	       (t->cause == SG_CAUSE_PLATFORM_ERROR && t->attempt < ta->budget &&
		take_retry(ta->job));
}

static void test_book(void *self, const struct exec_try *t, struct exec_booking *b)
{
	struct test_attempts *ta = self;

	snprintf(ta->booked, sizeof(ta->booked), "test %zu: %s", ta->i, t->detail);
	b->superseded = ta->cold_rerun;
	b->test = (uint32_t)ta->i + 1;
	b->detail = t->detail[0] ? ta->booked : NULL;
}

static void test_take(void *self, struct exec_try *t)
{
	struct test_attempts *ta = self;
	struct verify_result *v = &ta->job->res->tests[ta->i];

	if (t->unbooked) /* the test has no verdict */
		ta->status = VERIFY_ERROR;
	note_run(ta->job, ta->i, t->attempt, t->spec->confirm, t->cause,
		 ta->status != VERIFY_PASS && !t->again, &t->r);
	v->status = ta->status;
	v->cause = t->cause;
	v->rule = t->rule;
	v->wall_ms = t->r.wall_ms;
	v->warm = t->r.warm;
	v->confirmed = t->spec->confirm;
	snprintf(v->detail, sizeof(v->detail), "%s", t->detail);
}

static const struct exec_mode_ops test_ops = {
	.before = test_before,
	.judge = test_judge,
	.again = test_again,
	.book = test_book,
	.take = test_take,
};

/* owed: the worker's run record, idle (owing nothing) between its tests
 * and rewritten in place for each (sb_run_record_idle()). */
static void run_test(struct verify_job *job, struct exec_box *box, struct sb_run_record *owed,
		     size_t i)
{
	const struct exec_ctx *ctx = job->ctx;
	const struct verify_case *tc = &job->tests->v[i];
	struct node_cpu_commit line = { .fd = -1 }; /* a confirmation run's */
	struct sandbox_spec spec;
	struct test_attempts ta = { .job = job,
				    .i = i,
				    .grader = verify_grader(ctx->policy, job->tests),
				    .budget = exec_attempt_budget(ctx->policy) };
	char **argv = verify_test_argv(ta.grader, tc, ctx->argv); /* NULL: ctx->argv */

	exec_spec_init(ctx, ctx->policy, "verify", job->batch_id, job->timeout_ms, &spec);
	if (argv)
		spec.argv = argv;
	spec.stdin_data = tc->input;
	spec.stdin_len = tc->input_len;
	if (job->program.data) { /* built once (verify_compile.c) */
		spec.files = &job->program;
		spec.n_files = 1;
		spec.allow_exec_in_scratch = ctx->build->compile != NULL;
	}
	spec.record = owed; /* the test's runs; the request owes the final */
	/* The worker's box serves its tests one after another; each run is
	 * noted under the job's lock (note_run()). */
	exec_attempt(&(struct exec_attempt_plan){ .ctx = ctx,
						  .spec = &spec,
						  .batch_id = job->batch_id,
						  .box = box,
						  .line = &line,
						  .group = &job->group,
						  .ops = &test_ops,
						  .self = &ta });
	/* A confirmation ran in a favoured sandbox of its own (exec_box_run()
	 * took it fresh): it serves no later test. */
	if (spec.confirm)
		exec_box_done(ctx, box);
	exec_owed_idle(owed);
	node_cpu_release(&line);
	free(argv);
}

/* A worker runs tests on one slot of the request's, in one sandbox, and
 * gives both back as soon as no test is left for it: not when the
 * request's last test ends. A slot kept idle while a sibling's test runs to
 * its deadline is CPU the node admits nobody to (a 1 s timeout kept the
 * bench's other CPU idle for most of it). */
struct verify_worker {
	struct verify_job *job;
	struct tenant_slot *slot;
};

static void *worker(void *arg)
{
	struct verify_worker *w = arg;
	struct verify_job *job = w->job;
	struct exec_box box = { 0 };
	struct sb_run_record owed;

	sg_log_to(job->log);
	exec_owed_init(&owed, job->ctx, "verify", job->batch_id, false);
	for (;;) {
		size_t i;

		pthread_mutex_lock(&job->lock);
		i = job->next++;
		pthread_mutex_unlock(&job->lock);
		if (i >= job->tests->n)
			break;
		run_test(job, &box, &owed, i);
	}
	exec_owed_done(&owed);
	exec_box_done(job->ctx, &box);
	tenant_slot_release(w->slot);
	return NULL;
}

static size_t parallelism(const struct sg_policy *p, size_t n_tests)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	size_t n = p->limits.concurrency;

	if (cores > 0 && (size_t)cores < n)
		n = (size_t)cores;
	if (n_tests < n)
		n = n_tests;
	return n ? n : 1;
}

/* Run every test with one worker per slot we hold (the calling thread is
 * one of them); each slot is given back by its worker. */
static void run_all(struct verify_job *job, struct tenant_slot *slots, size_t n_slots)
{
	struct verify_worker workers[n_slots];
	pthread_t threads[n_slots];
	size_t started = 0;

	for (size_t k = 0; k < n_slots; k++)
		workers[k] = (struct verify_worker){ .job = job, .slot = &slots[k] };
	for (size_t k = 1; k < n_slots; k++) {
		if (pthread_create(&threads[started], NULL, worker, &workers[k])) {
			sg_warn("exec: cannot start a verifier thread: running with %zu",
				started + 1);
			tenant_slot_release(&slots[k]);
			continue;
		}
		started++;
	}
	worker(&workers[0]);
	for (size_t k = 0; k < started; k++)
		pthread_join(threads[k], NULL);
}

static void summarize(const struct verify_cases *tests, struct exec_result *res)
{
	bool all_pass = true;

	for (size_t i = 0; i < tests->n; i++) {
		const struct verify_result *t = &res->tests[i];

		if (t->status == VERIFY_ERROR) {
			res->cause = SG_CAUSE_PLATFORM_ERROR;
			res->reward = -1;
			snprintf(res->detail, sizeof(res->detail), "test %zu: %s", i, t->detail);
			return;
		}
		if (t->status != VERIFY_PASS && all_pass) {
			all_pass = false;
			snprintf(res->detail, sizeof(res->detail), "test %zu: %s: %s", i,
				 verify_status_name(t->status), t->detail);
		}
	}
	res->cause = SG_CAUSE_OK;
	res->reward = all_pass ? 1 : 0;
}

int exec_verify(const struct exec_ctx *ctx, const char *batch_id, const struct verify_cases *tests,
		struct exec_result *res)
{
	uint64_t start = clock_ms(CLOCK_MONOTONIC);
	size_t want = parallelism(ctx->policy, tests->n), n_slots = 0;
	struct tenant_slot slots[want];
	char made_up[64];
	struct verify_job job = {
		.ctx = ctx,
		.tests = tests,
		.res = res,
		.timeout_ms = exec_timeout_ms(ctx),
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.err_test = SIZE_MAX,
		.log = sg_log_stream(),
		.retries_left = ctx->policy->max_retries,
		.group = JOURNAL_GROUP_INIT,
	};
	struct score_stats st = { .n = 1 };
	struct sb_run_record owed; /* owes the final, booked with no run */
	char outcome_id[SG_ID_BUF];

	memset(res, 0, sizeof(*res));
	res->rule = -1;
	res->reward = -1;
	res->verify = true;
	res->path = ctx->path;
	if (!batch_id) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(made_up, sizeof(made_up), "verify-%lld%03ld-%d", (long long)ts.tv_sec,
			 ts.tv_nsec / 1000000, (int)getpid());
		batch_id = made_up;
	}
	job.batch_id = batch_id;
	snprintf(res->batch_id, sizeof(res->batch_id), "%s", batch_id);
	snprintf(res->run_id, sizeof(res->run_id), "%s", ctx->run_id ? ctx->run_id : "");
	res->cause = exec_admit(ctx, &slots[0], &res->refusal, res->detail, sizeof(res->detail));
	if (res->cause != SG_CAUSE_OK) {
		res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start;
		res->cause = exec_book_refusal(ctx, "verify", batch_id, res->cause, res->wall_ms,
					       res->detail, sizeof(res->detail));
		return 0;
	}
	n_slots = 1;
	exec_owed_init(&owed, ctx, "verify", batch_id, true);
	if (exec_owed_final_first(&owed, res->detail, sizeof(res->detail))) {
		tenant_slot_release(&slots[0]);
		res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start;
		res->cause = exec_book_refusal(ctx, "verify", batch_id, SG_CAUSE_PLATFORM_ERROR,
					       res->wall_ms, res->detail, sizeof(res->detail));
		return 0;
	}
	if (ctx->build) {
		int built = verify_compile(ctx, batch_id, &job.program, res, &job.group);

		job.cold = true; /* a warm interpreter runs Python alone */
		if (built < 0) {
			tenant_slot_release(&slots[0]);
			journal_group_commit(&job.group); /* the compile's, if booked */
			exec_owed_done(&owed);
			return built;
		}
		if (built) {
			tenant_slot_release(&slots[0]);
			goto final;
		}
	}
	/* More slots only if free right now: never wait or refuse for them. */
	while (n_slots < want && exec_admit_more(ctx, &slots[n_slots]))
		n_slots++;
	res->tests = calloc(tests->n, sizeof(*res->tests));
	if (!res->tests) {
		for (size_t k = 0; k < n_slots; k++)
			tenant_slot_release(&slots[k]);
		journal_group_commit(&job.group); /* the compile's, if booked */
		exec_owed_done(&owed);            /* nothing ran: nothing is owed */
		return -ENOMEM;
	}
	res->n_tests = tests->n;
	run_all(&job, slots, n_slots);

	summarize(tests, res);
final:
	res->attempts += job.runs;
	if (res->cause == SG_CAUSE_OK) {
		res->scores = malloc(sizeof(double));
		if (res->scores) {
			res->scores[0] = res->reward;
			res->n_scores = 1;
		}
		st.mean = res->reward;
		res->stats = st;
	}
	res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start;
	struct exec_booking b = { .mode = "verify",
				  .batch_id = batch_id,
				  .attempt = 1,
				  .final = true,
				  .cause = res->cause,
				  .rule = -1,
				  .wall_ms = res->wall_ms,
				  .stats = res->cause == SG_CAUSE_OK ? &st : NULL,
				  .detail = res->detail,
				  .group = &job.group };
	exec_owed_before_booking(&owed, &b, outcome_id, sizeof(outcome_id));
	int err = exec_book(ctx, &b), synced = journal_group_commit(&job.group);
	if (!err)
		err = synced; /* the result waits for its records to be on disk */
	exec_owed_done(&owed);
	if (err) { /* unbooked: no reward is returned */
		res->cause = exec_book_failed(err, res->cause, res->detail, sizeof(res->detail));
		res->reward = -1;
		free(res->scores);
		res->scores = NULL;
		res->n_scores = 0;
	}
	pthread_mutex_destroy(&job.lock);
	pthread_mutex_destroy(&job.group.lock);
	free((void *)job.program.data);
	return 0;
}
