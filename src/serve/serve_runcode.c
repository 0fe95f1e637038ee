/* POST /run_code, SandboxFusion-compatible (the request verl's
 * sandbox_fusion client sends, the response it reads).
 *
 * Request:  {code, language, stdin, compile_timeout, run_timeout,
 *            memory_limit_MB, files: {path: base64}, fetch_files: [path]}
 * Response: {status, message, compile_result, run_result,
 *            executor_pod_name, files: {path: base64}, sandguard: {...}}
 *
 * status: "SandboxError" only for a platform error (never the code's
 * fault); "Failed" for a timeout, a non-zero exit, a crash or a limit;
 * "Success" otherwise. run_result.status: "Finished" when the program
 * ended by itself (exit or signal; return_code is the exit code, or minus
 * the signal number as Python's subprocess reports it), "TimeLimitExceeded"
 * at the deadline (return_code null), "Error" when sandguard stopped it for
 * another limit: memory, output cap, forks, a policy violation
 * (return_code null; message and sandguard.cause say which).
 * stdout and stderr come whole up to the policy's output_bytes, with
 * stdout_truncated / stderr_truncated. run_timeout, compile_timeout and
 * memory_limit_MB can only tighten the tenant's policy: larger values are
 * lowered to it, and sandguard.timeout_ms / memory_mb say what applied. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/base64.h"
#include "lib/json_text.h"
#include "lib/log.h"
#include "sandbox/sandbox_scratch.h"
#include "serve_internal.h"
#include "lib/rule_names.h"

#define DEFAULT_TIMEOUT_S 10.0 /* SandboxFusion's default for both */
#define PYTHON_FILE       "main.py"
#define CPP_FILE          "main.cpp"
#define CPP_PROGRAM       "main"
#define TIME_DIGITS       9 /* execution_time 1.5, not 1.5000000000000002 */

static const char *const known_keys[] = { "code",        "language",
					  "stdin",       "compile_timeout",
					  "run_timeout", "memory_limit_MB",
					  "files",       "fetch_files",
					  "args",        NULL };

const char *runcode_status(enum sg_cause cause)
{
	if (cause == SG_CAUSE_OK)
		return "Success";
	return cause == SG_CAUSE_PLATFORM_ERROR ? "SandboxError" : "Failed";
}

/* ---- the request ------------------------------------------------------ */

/* Seconds (a JSON number, default 10) to milliseconds, at most the
 * policy's deadline. */
static int parse_timeout(json_t *body, const char *key, const struct sg_policy *p, uint64_t *ms,
			 struct serve_reply *rp)
{
	json_t *v = json_object_get(body, key);
	double s = v ? json_number_value(v) : DEFAULT_TIMEOUT_S;

	if (v && (!json_is_number(v) || !isfinite(s) || s <= 0)) {
		serve_error(rp, 400, "\"%s\" must be a positive number of seconds", key);
		return -1;
	}
	*ms = s * 1000.0 >= (double)p->limits.timeout_ms ? p->limits.timeout_ms
							 : (uint64_t)ceil(s * 1000.0);
	return 0;
}

static int parse_language(const struct serve_langs *langs, const struct sg_policy *p,
			  const char *tenant, json_t *body, struct runcode_plan *plan,
			  struct serve_reply *rp)
{
	json_t *v = json_object_get(body, "language");
	const char *name = json_string_value(v), *denied;
	char enabled[64] = "";
	int id;

	for (int i = 0; i < LANG__COUNT; i++)
		if (langs->enabled[i])
			snprintf(enabled + strlen(enabled), sizeof(enabled) - strlen(enabled),
				 "%s%s", enabled[0] ? ", " : "", serve_lang_name(i));
	if (!name) {
		serve_error(rp, 400, "\"language\" is required: a string (this server runs %s)",
			    enabled);
		return -1;
	}
	id = serve_lang_lookup(name);
	if (id < 0) {
		serve_error(rp, 400, "unknown language \"%.64s\": this server runs %s", name,
			    enabled);
		return -1;
	}
	if (!langs->enabled[id]) {
		serve_error(rp, 400,
			    "language %s is not enabled on this server (it runs %s; "
			    "see sandguard serve --languages)",
			    name, enabled);
		return -1;
	}
	denied = serve_lang_denied(langs, id, p);
	if (denied) {
		serve_error(
			rp, 400,
			"language %s is not enabled for tenant %s: its policy's exec.allow (%s) "
			"does not allow %s, which %s runs",
			name, tenant, p->source, denied, name);
		return -1;
	}
	plan->lang = id;
	return 0;
}

static bool reserved(const struct runcode_plan *plan, const char *path)
{
	if (plan->lang == LANG_PYTHON)
		return !strcmp(path, PYTHON_FILE);
	return !strcmp(path, CPP_FILE) || !strcmp(path, CPP_PROGRAM);
}

static size_t longest_component(const char *path)
{
	size_t longest = 0;

	while (*path) {
		size_t n = strcspn(path, "/");

		if (n > longest)
			longest = n;
		path += n + (path[n] == '/');
	}
	return longest;
}

/* A path that would need another file (or the program) as a directory,
 * or the reverse: the scratch could not hold both. */
static bool conflicting(const struct runcode_plan *plan, const char *path, const char **other)
{
	for (size_t i = 0; i < plan->n_files; i++)
		if (sb_scratch_paths_conflict(path, plan->files[i].path)) {
			*other = plan->files[i].path;
			return true;
		}
	if (plan->lang != LANG_PYTHON && sb_scratch_paths_conflict(path, CPP_PROGRAM)) {
		*other = CPP_PROGRAM;
		return true;
	}
	return false;
}

static int parse_files(json_t *body, struct runcode_plan *plan, struct serve_reply *rp)
{
	json_t *files = json_object_get(body, "files"), *v;
	const char *path;
	size_t n = files ? json_object_size(files) : 0;

	if (files && !json_is_object(files)) {
		serve_error(rp, 400, "\"files\" must be an object {path: base64 content}");
		return -1;
	}
	if (n > RUNCODE_MAX_FILES) {
		serve_error(rp, 400, "\"files\" has %zu entries, at most %d", n, RUNCODE_MAX_FILES);
		return -1;
	}
	plan->files = calloc(1 + n, sizeof(*plan->files));
	if (!plan->files) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	plan->files[0] =
		(struct sandbox_file){ .path = plan->lang == LANG_PYTHON ? PYTHON_FILE : CPP_FILE,
				       .data = plan->code,
				       .len = plan->code_len,
				       .mode = 0644 };
	plan->n_files = 1;
	json_object_foreach(files, path, v)
	{
		struct sandbox_file *f = &plan->files[plan->n_files];
		unsigned char *data;
		const char *other;
		char why[128];
		size_t len;
		int ret;

		if (longest_component(path) > NAME_MAX) {
			serve_error(rp, 400, "files: \"%.200s\" has a component over %d bytes",
				    path, NAME_MAX);
			return -1;
		}
		if (!sb_scratch_path_valid(path)) {
			serve_error(rp, 400,
				    "files: \"%.200s\" is not a relative path inside the scratch "
				    "(no leading '/', no '.' or '..' or empty components)",
				    path);
			return -1;
		}
		if (reserved(plan, path)) {
			serve_error(rp, 400, "files: \"%s\" is where this request's code goes",
				    path);
			return -1;
		}
		if (conflicting(plan, path, &other)) {
			serve_error(rp, 400,
				    "files: \"%.200s\" and \"%.200s\" cannot both be files "
				    "(one would be the other's directory)",
				    path, other);
			return -1;
		}
		if (!json_is_string(v)) {
			serve_error(rp, 400, "files[\"%.200s\"] must be a base64 string", path);
			return -1;
		}
		ret = base64_decode(json_string_value(v), json_string_length(v), &data, &len, why,
				    sizeof(why));
		if (ret == -ENOMEM) {
			serve_error(rp, 500, "out of memory");
			return -1;
		}
		if (ret) {
			serve_error(rp, 400, "files[\"%.200s\"]: invalid base64: %s", path, why);
			return -1;
		}
		*f = (struct sandbox_file){ .path = path, .data = data, .len = len, .mode = 0644 };
		plan->n_files++;
	}
	return 0;
}

static int parse_fetch(json_t *body, struct runcode_plan *plan, struct serve_reply *rp)
{
	json_t *fetch = json_object_get(body, "fetch_files");
	size_t n = fetch ? json_array_size(fetch) : 0;

	if (fetch && !json_is_array(fetch)) {
		serve_error(rp, 400, "\"fetch_files\" must be an array of paths");
		return -1;
	}
	if (n > RUNCODE_MAX_FETCH) {
		serve_error(rp, 400, "\"fetch_files\" has %zu entries, at most %d", n,
			    RUNCODE_MAX_FETCH);
		return -1;
	}
	plan->fetch = n ? calloc(n, sizeof(*plan->fetch)) : NULL;
	if (n && !plan->fetch) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *path = json_string_value(json_array_get(fetch, i));

		if (!path || !sb_scratch_path_valid(path)) {
			serve_error(rp, 400,
				    "fetch_files[%zu] must be a relative path inside the scratch",
				    i);
			return -1;
		}
		plan->fetch[plan->n_fetch++] = path;
	}
	return 0;
}

int runcode_parse(const struct serve_langs *langs, const struct sg_policy *p, const char *tenant,
		  json_t *body, struct runcode_plan *plan, struct serve_reply *rp)
{
	json_t *code = json_object_get(body, "code"), *in = json_object_get(body, "stdin");
	json_t *mem = json_object_get(body, "memory_limit_MB"),
	       *args = json_object_get(body, "args");

	memset(plan, 0, sizeof(*plan));
	plan->body = json_incref(body);
	if (serve_known_keys(body, known_keys, rp))
		return -1;
	if (!json_is_string(code)) {
		serve_error(rp, 400, "\"code\" is required: a string");
		return -1;
	}
	plan->code = json_string_value(code);
	plan->code_len = json_string_length(code);
	if (parse_language(langs, p, tenant, body, plan, rp))
		return -1;
	if (in && !json_is_null(in) && !json_is_string(in)) {
		serve_error(rp, 400, "\"stdin\" must be a string or null");
		return -1;
	}
	plan->stdin_data = json_is_string(in) ? json_string_value(in) : NULL;
	plan->stdin_len = json_is_string(in) ? json_string_length(in) : 0;
	if (parse_timeout(body, "compile_timeout", p, &plan->compile_timeout_ms, rp) ||
	    parse_timeout(body, "run_timeout", p, &plan->run_timeout_ms, rp))
		return -1;
	/* SandboxFusion's -1 means "no limit of the request's own". */
	if (mem && !json_is_integer(mem)) {
		serve_error(rp, 400,
			    "\"memory_limit_MB\" must be an integer (megabytes; -1: the policy's)");
		return -1;
	}
	plan->memory_mb = mem && json_integer_value(mem) > 0 ? (uint64_t)json_integer_value(mem)
							     : 0;
	if (args && (!json_is_array(args) || json_array_size(args))) {
		serve_error(rp, 400,
			    "\"args\" is not supported (SandboxFusion passes it to pytest): "
			    "send [] or leave it out");
		return -1;
	}
	if (parse_files(body, plan, rp) || parse_fetch(body, plan, rp))
		return -1;
	return 0;
}

void runcode_plan_free(struct runcode_plan *plan)
{
	for (size_t i = 1; i < plan->n_files; i++) /* [0] is the code, in the body */
		free((void *)plan->files[i].data);
	free(plan->files);
	free(plan->fetch);
	json_decref(plan->body);
	memset(plan, 0, sizeof(*plan));
}

/* ---- the response ----------------------------------------------------- */

json_t *runcode_result_json(const struct exec_run_result *r)
{
	bool finished = r->has_return_code || r->signal;
	json_t *rc = r->has_return_code ? json_integer(r->return_code)
		     : r->signal        ? json_integer(-r->signal)
					: json_null();

	return json_pack("{s:s, s:f, s:o, s:o, s:o, s:b, s:b}", "status",
			 r->timed_out ? "TimeLimitExceeded"
			 : finished   ? "Finished"
				      : "Error",
			 "execution_time", (double)r->wall_ms / 1000.0, "return_code", rc, "stdout",
			 json_string_lossy(r->out ? r->out : "", r->out ? r->out_len : 0), "stderr",
			 json_string_lossy(r->err ? r->err : "", r->err ? r->err_len : 0),
			 "stdout_truncated", r->out_truncated, "stderr_truncated",
			 r->err_truncated);
}

static json_t *response_new(struct serve_call *c, const char *status, const char *message)
{
	return json_pack("{s:s, s:o, s:n, s:n, s:s, s:{}}", "status", status, "message",
			 json_string_lossy(message, strlen(message)), "compile_result",
			 "run_result", "executor_pod_name", c->srv->host, "files");
}

/* What sandguard adds: whose run, why it ended, the limits that applied. */
static void add_sandguard(struct serve_call *c, json_t *resp, const struct exec_run_result *r,
			  uint32_t attempts)
{
	json_object_set_new(
		resp, "sandguard",
		json_pack("{s:s, s:s, s:s, s:o, s:o, s:i, s:I, s:I}", "tenant", c->tenant,
			  "request_id", c->request_id, "cause", cause_name(r->cause), "rule",
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
static void add_files(json_t *resp, const struct exec_run_result *r, const struct sg_policy *p)
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
			json_object_set_new(errors, f->path, json_string(why));
			continue;
		}
		b64 = base64_encode(f->data, f->len, NULL);
		json_object_set_new(files, f->path, b64 ? json_string(b64) : json_null());
		free(b64);
	}
	if (json_object_size(errors))
		json_object_set_new(json_object_get(resp, "sandguard"), "fetch_errors", errors);
	else
		json_decref(errors);
}

/* exec refused the run before it started: answered as HTTP errors, not as
 * a run result. Returns true when it did. */
static bool refused(struct serve_call *c, const struct exec_run_result *r, struct serve_reply *rp)
{
	if (r->attempts == 0 &&
	    (r->refusal == EXEC_REFUSED_PAUSED || r->refusal == EXEC_REFUSED_DISABLED)) {
		serve_error(rp, 403, "%s", r->detail);
		return true;
	}
	if (r->attempts == 0 && r->refusal == EXEC_REFUSED_CONCURRENCY) {
		serve_error(rp, 429, "%s", r->detail);
		rp->retry_after_s = serve_retry_after(c->policy);
		return true;
	}
	return false;
}

static int run_step(struct serve_call *c, char *const *argv, uint64_t timeout_ms, const char *id,
		    const struct runcode_plan *plan, const struct exec_run_request *proto,
		    struct exec_run_result *r)
{
	struct exec_ctx ctx = {
		.policy = c->policy,
		.tenant = c->tenant,
		.run_id = c->run_id,
		.argv = argv,
		.timeout_ms = timeout_ms,
		.agent = c->agent,
		.run = c->srv->cfg.run,
	};
	struct exec_run_request req = *proto;

	req.request_id = id;
	req.memory_mb = plan->memory_mb;
	/* Compiled code runs via the loader (serve_lang.c), which maps it from
	 * the scratch: a noexec scratch would refuse that. */
	req.allow_exec_in_scratch = plan->lang == LANG_CPP;
	return exec_run(&ctx, &req, r);
}

/* cpp, first sandbox: compile. 0 with the program in *prog (malloc'd);
 * 1 when the response is complete without a run (compile failed); 2 when
 * exec refused it and rp holds the answer; -ENOMEM. */
static int compile(struct serve_call *c, struct runcode_plan *plan, json_t *resp,
		   uint32_t *attempts, char **prog, size_t *prog_len, struct serve_reply *rp)
{
	struct serve *s = c->srv;
	char *argv[] = { s->langs.cxx, "-std=c++17", "-O2",    "-save-temps",
			 "-o",         CPP_PROGRAM,  CPP_FILE, NULL };
	static const char *const fetch[] = { CPP_PROGRAM };
	struct exec_run_request proto = {
		.files = plan->files, .n_files = plan->n_files, .fetch = fetch, .n_fetch = 1
	};
	struct exec_run_result r;
	char id[SG_ID_MAX + 16];
	const char *msg = NULL;

	snprintf(id, sizeof(id), "%s.compile", c->request_id);
	if (run_step(c, argv, plan->compile_timeout_ms, id, plan, &proto, &r))
		return -ENOMEM;
	if (refused(c, &r, rp)) {
		exec_run_result_free(&r);
		return 2;
	}
	*attempts += r.attempts;
	if (r.cause == SG_CAUSE_OK && r.n_fetched == 1 && r.fetched[0].data &&
	    !r.fetched[0].truncated) {
		*prog = r.fetched[0].data;
		*prog_len = r.fetched[0].len;
		r.fetched[0].data = NULL;
	} else if (r.cause == SG_CAUSE_OK) {
		r.cause = r.n_fetched && r.fetched[0].truncated ? SG_CAUSE_TENANT_BAD_OUTPUT
								: SG_CAUSE_PLATFORM_ERROR;
		msg = r.cause == SG_CAUSE_TENANT_BAD_OUTPUT
			      ? "the compiled program is larger than the policy's output cap (output_bytes)"
			      : "platform error: the compiler exited 0 but left no program";
		snprintf(r.detail, sizeof(r.detail), "%s", msg);
		r.has_return_code = false; /* a compile "Error": verl reads it as a compile error */
	}
	/* As for a run: a platform error has no result of its own. */
	if (r.cause != SG_CAUSE_PLATFORM_ERROR)
		json_object_set_new(resp, "compile_result", runcode_result_json(&r));
	if (r.cause != SG_CAUSE_OK) {
		json_object_set_new(resp, "status", json_string(runcode_status(r.cause)));
		json_object_set_new(resp, "message", json_string_lossy(r.detail, strlen(r.detail)));
		add_sandguard(c, resp, &r, *attempts);
	}
	exec_run_result_free(&r);
	return *prog ? 0 : 1;
}

static void runcode_execute(struct serve_call *c, void *p, struct serve_reply *rp)
{
	struct runcode_plan *plan = p;
	struct serve *s = c->srv;
	json_t *resp = response_new(c, "Success", "");
	struct sandbox_file *files = plan->files;
	struct exec_run_request proto = {
		.stdin_data = plan->stdin_data,
		.stdin_len = plan->stdin_len,
		.fetch = plan->fetch,
		.n_fetch = plan->n_fetch,
	};
	struct exec_run_result r;
	uint32_t attempts = 0;
	char *prog = NULL, *argv[3] = { NULL };
	size_t prog_len = 0;
	int ret = 0;

	if (plan->lang == LANG_CPP) {
		ret = compile(c, plan, resp, &attempts, &prog, &prog_len, rp);
		if (ret)
			goto done;
		/* The run gets the program in place of the source. */
		files = malloc(plan->n_files * sizeof(*files));
		if (!files) {
			ret = -ENOMEM;
			goto done;
		}
		memcpy(files, plan->files, plan->n_files * sizeof(*files));
		files[0] = (struct sandbox_file){
			.path = CPP_PROGRAM, .data = prog, .len = prog_len, .mode = 0755
		};
		argv[0] = s->langs.loader;
		argv[1] = "./" CPP_PROGRAM;
	} else {
		argv[0] = s->langs.python;
		argv[1] = PYTHON_FILE;
	}
	proto.files = files;
	proto.n_files = plan->n_files;
	ret = run_step(c, argv, plan->run_timeout_ms, c->request_id, plan, &proto, &r);
	if (ret)
		goto done;
	attempts += r.attempts;
	if (!refused(c, &r, rp)) {
		if (r.cause != SG_CAUSE_PLATFORM_ERROR)
			json_object_set_new(resp, "run_result", runcode_result_json(&r));
		json_object_set_new(resp, "status", json_string(runcode_status(r.cause)));
		json_object_set_new(resp, "message", json_string_lossy(r.detail, strlen(r.detail)));
		add_sandguard(c, resp, &r, attempts);
		add_files(resp, &r, c->policy);
		rp->status = 200;
		rp->body = json_incref(resp);
	}
	exec_run_result_free(&r);
done:
	rp->real_digits = TIME_DIGITS;
	if (ret < 0) {
		serve_error(rp, 500, "out of memory");
	} else if (ret == 1) { /* compile ended it: the response is complete */
		rp->status = 200;
		rp->body = json_incref(resp);
	}
	if (files != plan->files)
		free(files);
	free(prog);
	json_decref(resp);
}

/* ---- the endpoint ----------------------------------------------------- */

static int runcode_prepare(struct serve_call *c, json_t *body, void **plan_out,
			   struct serve_reply *rp)
{
	struct runcode_plan *plan = malloc(sizeof(*plan));

	if (!plan) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	if (runcode_parse(&c->srv->langs, c->policy, c->tenant, body, plan, rp)) {
		runcode_plan_free(plan);
		free(plan);
		return -1;
	}
	*plan_out = plan;
	return 0;
}

static void runcode_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	rp->status = 200; /* as SandboxFusion: the body says SandboxError */
	rp->body = response_new(c, "SandboxError", detail);
	json_object_set_new(rp->body, "sandguard",
			    json_pack("{s:s, s:s, s:s, s:n, s:o, s:i}", "tenant", c->tenant,
				      "request_id", c->request_id, "cause",
				      cause_name(SG_CAUSE_PLATFORM_ERROR), "rule", "detail",
				      json_string_lossy(detail, strlen(detail)), "attempts", 0));
}

static void runcode_free(void *p)
{
	runcode_plan_free(p);
	free(p);
}

const struct serve_endpoint serve_runcode_endpoint = {
	.mode = "run",
	.body_tenant = false,
	.prepare = runcode_prepare,
	.execute = runcode_execute,
	.policy_error = runcode_policy_error,
	.free_plan = runcode_free,
};
