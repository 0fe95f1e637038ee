/* POST /run_code once admitted: the compile step (compiled languages),
 * the run step, and the SandboxFusion response (serve_runcode.c has the
 * request and the response's pieces).
 *
 * Each step is one exec_run(): its own sandbox, admission and booking.
 * The compile step is booked as "<request id>.compile", the run as the
 * request id. The executor's own admission (the tenant's node-wide slots,
 * the node's CPU) may only wait as long as the request is still worth
 * running; when it refuses, the answer is 504 with Retry-After, as for
 * the server's own caps, since verl retries exactly that. A client that
 * hung up during the compile step gets no run step.
 *
 * The response's "sandguard" object names every sandbox the request ran
 * in (sandbox_ids, the ids of the agent's events) and every booking
 * (batch_ids, the batch_id of the outcome log and the ledger), so that
 * on-call can join a trainer's report to the node's records. A compile
 * may come from the build cache (run_build_cache.h): then nothing runs or
 * is booked for it, and sandguard.build_cached says so. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "lib/base64.h"
#include "lib/clock.h"
#include "lib/json_text.h"
#include "lib/rule_names.h"
#include "run_build_cache.h"
#include "serve_internal.h"
#include "pool/pool.h"

#define TIME_DIGITS 9 /* execution_time 1.5, not 1.5000000000000002 */

/* The sandboxes a request ran in: taken from the server's pool through
 * `src`, which notes each one's id; or, with a test's fake runner (which
 * exec_run() calls with no context of its own), noted from its results
 * through the request thread's `record`. */
struct sandbox_record {
	sandbox_runner run; /* the server's fake runner; NULL: sandboxes from the pool */
	json_t *ids;
	const struct exec_sandboxes *pool;
	struct exec_sandboxes src;
};
static __thread struct sandbox_record *record;

static int recording_runner(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	int ret = record->run(spec, r);

	if (r->sandbox_id[0])
		json_array_append_new(record->ids, json_string(r->sandbox_id));
	return ret;
}

static int recording_take(void *self, const struct sandbox_spec *spec, struct sandbox **sb,
			  char *detail, size_t len)
{
	struct sandbox_record *rec = self;
	int err = rec->pool->take(rec->pool->self, spec, sb, detail, len);

	if (!err)
		json_array_append_new(rec->ids, json_string(sandbox_id(*sb)));
	return err;
}

static void recording_retire(void *self, struct sandbox *sb)
{
	struct sandbox_record *rec = self;

	rec->pool->retire(rec->pool->self, sb);
}

/* One step's outcome beyond the run's result. */
enum step_end {
	STEP_RAN,     /* r holds the result (whatever the cause) */
	STEP_REFUSED, /* rp holds the answer (403, 504) */
	STEP_ENOMEM,
};

/* exec refused the run before it started: answered as HTTP, not as a
 * run result. A refusal of the node's capacity (its slots, its CPU, its
 * agent for a require_agent tenant) is 504: verl's retry. */
static bool refused(struct serve_call *c, const struct exec_run_result *r, struct serve_reply *rp)
{
	if (r->attempts != 0 || r->refusal == EXEC_ADMITTED || r->refusal == EXEC_REFUSED_STATE)
		return false;
	if (r->refusal == EXEC_REFUSED_PAUSED || r->refusal == EXEC_REFUSED_DISABLED) {
		serve_error(rp, 403, "%s", r->detail);
		return true;
	}
	if (r->refusal == EXEC_REFUSED_LATE)
		atomic_fetch_add(&c->srv->n_late, 1);
	serve_busy(c, &serve_runcode_endpoint, 504, gate_retry_after_s(c->srv->gate), rp, "%s",
		   r->detail);
	return true;
}

/* A platform error whose retries the client's budget cut short: 504, so
 * that the client retries with a budget of its own (a platform error is
 * never the code's, and verl scores a SandboxError -1). */
static bool out_of_time(struct serve_call *c, const struct exec_run_result *r, uint32_t cut_to,
			struct serve_reply *rp)
{
	if (r->cause != SG_CAUSE_PLATFORM_ERROR || r->attempts != cut_to)
		return false;
	serve_busy(c, &serve_runcode_endpoint, 504, gate_retry_after_s(c->srv->gate), rp,
		   "%s; no time is left to retry it within what the client waits "
		   "(compile_timeout + run_timeout + %d s): retry",
		   r->detail, SERVE_CLIENT_SLACK_MS / 1000);
	return true;
}

/* A run the node could not start by latest_ms (its setup was slow): booked
 * as a platform error, answered 504 like a request that could not start in
 * time, so that the client retries rather than reads a SandboxError. */
static bool too_late(struct serve_call *c, const struct exec_run_result *r, struct serve_reply *rp)
{
	if (!r->attempts || r->refusal != EXEC_REFUSED_LATE)
		return false;
	atomic_fetch_add(&c->srv->n_late, 1);
	serve_busy(c, &serve_runcode_endpoint, 504, gate_retry_after_s(c->srv->gate), rp,
		   "request %s: %s; it could not finish within what its client waits "
		   "(compile_timeout + run_timeout + %d s): retry later",
		   c->request_id, r->detail, SERVE_CLIENT_SLACK_MS / 1000);
	return true;
}

/* Run one step, admitted by the executor no later than latest_ms, retried
 * (platform errors) only as often as whole runs still fit in the client's
 * budget, before the then_ms that later steps need. `loads_program`: the
 * step runs a program compiled in the scratch through the loader, which
 * maps it executable (see serve_lang.c). */
static enum step_end step(struct serve_call *c, char *const *argv, uint64_t timeout_ms,
			  uint64_t then_ms, const char *id, uint64_t latest_ms, bool loads_program,
			  const struct runcode_plan *plan, struct exec_run_request *req,
			  struct exec_run_result *r, struct serve_reply *rp)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);
	struct sg_policy *policy = malloc(sizeof(*policy));
	struct exec_ctx ctx = {
		.tenant = c->tenant,
		.run_id = c->run_id,
		.argv = argv,
		.timeout_ms = timeout_ms,
		.start_by_ms = latest_ms,
		/* A timeout's confirmation run must end before the client
		 * gives up, leaving the later steps their time. */
		.finish_by_ms =
			c->budget.client_end_ms > then_ms ? c->budget.client_end_ms - then_ms : 0,
		.agent = c->agent,
		.sandboxes = record->run ? NULL : &record->src,
		.reap_elsewhere = !record->run,
		.run = record->run ? recording_runner : NULL,
	};
	uint32_t cut_to = 0; /* the attempts the budget allows, when fewer than the policy's */
	int ret;

	if (!policy)
		return STEP_ENOMEM;
	if (latest_ms && now >= latest_ms) {
		free(policy);
		serve_busy(c, &serve_runcode_endpoint, 504, gate_retry_after_s(c->srv->gate), rp,
			   "request %s cannot start in time to finish within what its client "
			   "waits (compile_timeout + run_timeout + %d s); retry later",
			   c->request_id, SERVE_CLIENT_SLACK_MS / 1000);
		return STEP_REFUSED;
	}
	/* The executor's own wait for a slot ends when the request stops
	 * being worth running. */
	memcpy(policy, c->policy, sizeof(*policy));
	if (latest_ms && policy->limits.queue_timeout_ms > latest_ms - now)
		policy->limits.queue_timeout_ms = latest_ms - now;
	if (c->budget.client_end_ms > now + then_ms) {
		uint64_t fit = (c->budget.client_end_ms - now - then_ms) /
			       (timeout_ms + SERVE_FINISH_MARGIN_MS);

		if (fit >= 1 && policy->max_retries > fit - 1) {
			policy->max_retries = (uint32_t)(fit - 1);
			cut_to = (uint32_t)fit;
		}
	}
	ctx.policy = policy;
	req->request_id = id;
	req->memory_mb = plan->memory_mb;
	req->allow_exec_in_scratch = loads_program;
	ret = exec_run(&ctx, req, r);
	free(policy);
	if (ret)
		return STEP_ENOMEM;
	if (refused(c, r, rp) || too_late(c, r, rp) || (cut_to && out_of_time(c, r, cut_to, rp))) {
		exec_run_result_free(r);
		return STEP_REFUSED;
	}
	return STEP_RAN;
}

/* What sandguard adds: whose run, why it ended, the limits that applied,
 * and the ids to find it by on the node. */
static void add_sandguard(struct serve_call *c, json_t *resp, const struct exec_run_result *r,
			  uint32_t attempts, json_t *batch_ids)
{
	json_object_set_new(
		resp, "sandguard",
		json_pack("{s:s, s:s, s:o, s:O, s:O, s:s, s:o, s:o, s:i, s:I, s:I}", "tenant",
			  c->tenant, "request_id", c->request_id, "run_id",
			  c->run_id ? json_string(c->run_id) : json_null(), "batch_ids", batch_ids,
			  "sandbox_ids", record->ids, "cause", cause_name(r->cause), "rule",
			  r->rule >= 0 && r->rule < SG_RULE__COUNT ? json_string(rule_name(r->rule))
								   : json_null(),
			  "detail",
			  r->detail[0] ? json_string_lossy(r->detail, strlen(r->detail))
				       : json_null(),
			  "attempts", (int)attempts, "timeout_ms", (json_int_t)r->timeout_ms,
			  "memory_mb", (json_int_t)r->memory_mb));
}

/* Fetched files: whole ones go to "files"; the others are named in
 * sandguard.fetch_errors rather than passed on cut short. */
static void add_files(json_t *resp, const struct exec_run_result *r, const char *const *names,
		      const struct sg_policy *p)
{
	json_t *files = json_object_get(resp, "files"), *errors = json_object();
	char why[128];

	for (size_t i = 0; i < r->n_fetched; i++) {
		const struct sandbox_fetched *f = &r->fetched[i];
		char *b64;

		if (!f->data || f->truncated) {
			snprintf(why, sizeof(why),
				 f->data ? "larger than the output cap of %llu bytes"
					 : "missing, or not a regular file of the run",
				 (unsigned long long)p->limits.output_bytes);
			json_object_set_new(errors, names[i], json_string(why));
			continue;
		}
		b64 = base64_encode(f->data, f->len, NULL);
		json_object_set_new(files, names[i], b64 ? json_string(b64) : json_null());
		free(b64);
	}
	if (json_object_size(errors))
		json_object_set_new(json_object_get(resp, "sandguard"), "fetch_errors", errors);
	else
		json_decref(errors);
}

/* A step's result object (none for a platform error, as SandboxFusion). */
static void add_result(json_t *resp, const char *key, const struct exec_run_result *r)
{
	if (r->cause != SG_CAUSE_PLATFORM_ERROR)
		json_object_set_new(resp, key, runcode_result_json(r));
}

/* The request's ending: the step that failed, or the run. */
static void add_ending(struct serve_call *c, json_t *resp, const struct exec_run_result *r,
		       uint32_t attempts, json_t *batch_ids)
{
	json_object_set_new(resp, "status", json_string(runcode_status(r->cause)));
	json_object_set_new(resp, "message", json_string_lossy(r->detail, strlen(r->detail)));
	add_sandguard(c, resp, r, attempts, batch_ids);
}

/* The compile step. STEP_RAN with the artifact in *out (malloc'd) when it
 * compiled, or with the response complete (it did not compile). */
static enum step_end compile(struct serve_call *c, const struct runcode_plan *plan,
			     const struct lang_plan *lp, json_t *resp, json_t *batch_ids,
			     uint32_t *attempts, struct sandbox_file *out, struct serve_reply *rp)
{
	const char *fetch[] = { lp->artifact };
	struct sandbox_file *files = calloc(plan->n_files + lp->n_setup, sizeof(*files));
	struct exec_run_request req = { .fetch = fetch, .n_fetch = 1 };
	uint64_t latest = c->budget.latest_start_ms;
	struct exec_run_result r;
	char id[SG_ID_MAX + 16];
	enum step_end end;

	if (!files)
		return STEP_ENOMEM;
	memcpy(files, plan->files, plan->n_files * sizeof(*files));
	memcpy(files + plan->n_files, lp->setup, lp->n_setup * sizeof(*files));
	req.files = files;
	req.n_files = plan->n_files + lp->n_setup;
	snprintf(id, sizeof(id), "%s.compile", c->request_id);
	end = step(c, lp->compile, plan->compile_timeout_ms,
		   plan->run_timeout_ms + SERVE_FINISH_MARGIN_MS, id, latest, false, plan, &req, &r,
		   rp);
	free(files);
	if (end != STEP_RAN)
		return end;
	json_array_append_new(batch_ids, json_string(id));
	*attempts += r.attempts;
	if (r.cause == SG_CAUSE_OK && r.n_fetched == 1 && r.fetched[0].data &&
	    !r.fetched[0].truncated) {
		add_result(resp, "compile_result", &r);
		*out = (struct sandbox_file){ .path = lp->artifact,
					      .data = r.fetched[0].data,
					      .len = r.fetched[0].len,
					      .mode = lp->artifact_mode };
		r.fetched[0].data = NULL;
		exec_run_result_free(&r);
		return STEP_RAN;
	}
	if (r.cause == SG_CAUSE_OK) {
		bool too_big = r.n_fetched && r.fetched[0].truncated;

		r.cause = too_big ? SG_CAUSE_TENANT_BAD_OUTPUT : SG_CAUSE_PLATFORM_ERROR;
		snprintf(r.detail, sizeof(r.detail), "%s",
			 too_big ? "the compiled program is larger than the policy's output cap "
				   "(output_bytes)"
				 : "platform error: the compiler exited 0 but left no program");
		r.has_return_code = false; /* a compile "Error": verl reads it as a compile error */
	}
	add_result(resp, "compile_result", &r);
	add_ending(c, resp, &r, *attempts, batch_ids);
	exec_run_result_free(&r);
	return STEP_RAN; /* out->data stays NULL: the response is complete */
}

/* The compile step through the build cache (run_build_cache.h): a
 * verified entry of this tenant's identical compile stands for it, with
 * the compile_result of the compile that made it; *cached says so. */
static enum step_end compile_cached(struct serve_call *c, const struct runcode_plan *plan,
				    const struct lang_plan *lp, json_t *resp, json_t *batch_ids,
				    uint32_t *attempts, struct sandbox_file *out, bool *cached,
				    struct serve_reply *rp)
{
	struct run_build_cache *bc = c->srv->build_cache;
	uint64_t wait = c->budget.latest_start_ms
				? c->budget.latest_start_ms
				: clock_ms(CLOCK_MONOTONIC) + plan->compile_timeout_ms;
	struct run_build_key key;
	json_t *result;
	void *program;
	size_t len;
	enum step_end end;

	if (!bc || run_build_cache_key(bc, c->tenant, &c->srv->langs, plan->lang, lp, plan->files,
				       plan->n_files, &key))
		return compile(c, plan, lp, resp, batch_ids, attempts, out, rp);
	if (run_build_cache_get(bc, &key, wait, &program, &len, &result)) {
		json_object_set_new(resp, "compile_result", result);
		*out = (struct sandbox_file){
			.path = lp->artifact, .data = program, .len = len, .mode = lp->artifact_mode
		};
		*cached = true;
		return STEP_RAN;
	}
	end = compile(c, plan, lp, resp, batch_ids, attempts, out, rp);
	run_build_cache_done(bc, &key, end == STEP_RAN ? out->data : NULL, out->len,
			     json_object_get(resp, "compile_result"));
	return end;
}

static bool client_gone(const struct serve_call *c)
{
	return c->rq->client_gone && c->rq->client_gone(c->rq->gone_arg);
}

/* The memory and cores a run gets: what the toolchains are told. */
static void run_limits(const struct serve_call *c, const struct runcode_plan *plan,
		       uint64_t *memory_mb, unsigned *cpus)
{
	const struct sg_limits *lim = &c->policy->limits;
	double cores = lim->cpu > 0 ? lim->cpu : 1.0;

	*memory_mb = plan->memory_mb && plan->memory_mb < lim->memory_mb ? plan->memory_mb
									 : lim->memory_mb;
	*cpus = cores < 1.0 ? 1 : (unsigned)(cores + 0.999);
}

void runcode_execute(struct serve_call *c, void *p, struct serve_reply *rp)
{
	struct runcode_plan *plan = p;
	struct sandbox_record rec = {
		.run = c->srv->cfg.run,
		.ids = json_array(),
		.pool = c->srv->pool ? pool_source(c->srv->pool) : NULL,
		.src = { .take = recording_take, .retire = recording_retire, .self = &rec },
	};
	json_t *resp = runcode_response_new(c, "Success", ""), *batch_ids = json_array();
	struct sandbox_file artifact = { 0 }, *files = plan->files;
	struct exec_run_request req = { .stdin_data = plan->stdin_data,
					.stdin_len = plan->stdin_len,
					.fetch = plan->fetch,
					.n_fetch = plan->n_fetch };
	struct lang_plan lp;
	struct exec_run_result r;
	enum step_end end = STEP_RAN;
	uint32_t attempts = 0;
	bool cached = false;
	uint64_t memory_mb;
	unsigned cpus;

	record = &rec;
	rp->real_digits = TIME_DIGITS;
	run_limits(c, plan, &memory_mb, &cpus);
	serve_lang_plan(&c->srv->langs, plan->lang, c->policy, memory_mb, cpus, &lp);
	runcode_call_argv(plan, &lp);
	if (lp.compile[0]) {
		end = compile_cached(c, plan, &lp, resp, batch_ids, &attempts, &artifact, &cached,
				     rp);
		if (end != STEP_RAN || !artifact.data)
			goto done;
		if (client_gone(c)) { /* nobody waits for the run any more */
			atomic_fetch_add(&c->srv->n_gone, 1);
			rp->no_reply = true;
			end = STEP_REFUSED;
			goto done;
		}
		/* The run gets the program in place of the source. */
		files = malloc(plan->n_files * sizeof(*files));
		if (!files) {
			end = STEP_ENOMEM;
			goto done;
		}
		memcpy(files, plan->files, plan->n_files * sizeof(*files));
		files[0] = artifact;
	}
	req.files = files;
	req.n_files = plan->n_files;
	end = step(c, lp.run, plan->run_timeout_ms, 0, c->request_id, c->budget.run_latest_ms,
		   lp.compile[0] != NULL, plan, &req, &r, rp);
	if (end != STEP_RAN)
		goto done;
	json_array_append_new(batch_ids, json_string(c->request_id));
	attempts += r.attempts;
	runcode_call_stdout(plan, &r);
	add_result(resp, "run_result", &r);
	add_ending(c, resp, &r, attempts, batch_ids);
	add_files(resp, &r, plan->fetch_names, c->policy);
	exec_run_result_free(&r);
done:
	if (lp.compile[0] && json_object_get(resp, "sandguard"))
		json_object_set_new(json_object_get(resp, "sandguard"), "build_cached",
				    json_boolean(cached));
	if (end == STEP_ENOMEM) {
		serve_error(rp, 500, "out of memory");
	} else if (end == STEP_RAN) {
		rp->status = 200;
		rp->body = json_incref(resp);
	}
	if (files != plan->files)
		free(files);
	free((void *)artifact.data);
	json_decref(resp);
	json_decref(batch_ids);
	json_decref(rec.ids);
	record = NULL;
}
