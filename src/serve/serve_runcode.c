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
 * lowered to it, and sandguard.timeout_ms / memory_mb say what applied.
 *
 * This file reads the request; serve_runcode_run.c compiles, runs and
 * answers. The languages are in serve_lang.c. */
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

#define DEFAULT_TIMEOUT_S 10.0  /* SandboxFusion's default for both */
#define TIMEOUT_MAX_S     86400 /* keeps the client's budget in range */

static const char *const known_keys[] = {
	"code",  "language",    "stdin", "compile_timeout", "run_timeout", "memory_limit_MB",
	"files", "fetch_files", "args",  "fn_name",         "grader",      NULL
};

/* ---- the request ------------------------------------------------------ */

/* Seconds (a JSON number, default 10): *sent as the client gave it (it
 * waits for that), *ms lowered to the policy's deadline (what applies). */
static int parse_timeout(json_t *body, const char *key, const struct sg_policy *p, double *sent,
			 uint64_t *ms, struct serve_reply *rp)
{
	json_t *v = json_object_get(body, key);
	double s = v ? json_number_value(v) : DEFAULT_TIMEOUT_S;

	if (v && (!json_is_number(v) || !isfinite(s) || s <= 0 || s > TIMEOUT_MAX_S)) {
		serve_error(rp, 400, "\"%s\" must be a positive number of seconds, at most %d", key,
			    TIMEOUT_MAX_S);
		return -1;
	}
	*sent = s;
	*ms = s * 1000.0 >= (double)p->limits.timeout_ms ? p->limits.timeout_ms
							 : (uint64_t)ceil(s * 1000.0);
	return 0;
}

int runcode_parse_language(const struct serve_langs *langs, const struct sg_policy *p,
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
	if (p->limits.output_bytes < serve_lang_min_output(id)) {
		serve_error(rp, 400,
			    "language %s is not enabled for tenant %s: its compiled programs need "
			    "an output cap of at least %llu bytes, and its policy (%s) has "
			    "limits.output_bytes %llu",
			    name, tenant, (unsigned long long)serve_lang_min_output(id), p->source,
			    (unsigned long long)p->limits.output_bytes);
		return -1;
	}
	plan->lang = id;
	return 0;
}

/* A request's path that is one of the language's own files, or would
 * need one of them as a directory (or the reverse): *other names it. */
static bool language_owns(const struct runcode_plan *plan, const char *path, const char **other)
{
	const char *own[SERVE_LANG_PATHS];
	size_t n = serve_lang_paths(plan->lang, own);

	for (size_t i = 0; i < n; i++) {
		if (!strcmp(path, own[i]) || sb_scratch_paths_conflict(path, own[i])) {
			*other = own[i];
			return true;
		}
	}
	return false;
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

/* A path that would need another file as a directory, or the reverse:
 * the scratch could not hold both. */
static bool conflicting(const struct runcode_plan *plan, const char *path, const char **other)
{
	for (size_t i = 0; i < plan->n_files; i++)
		if (sb_scratch_paths_conflict(path, plan->files[i].path)) {
			*other = plan->files[i].path;
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
	plan->files[0] = (struct sandbox_file){ .path = serve_lang_source(plan->lang),
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
		if (language_owns(plan, path, &other)) {
			serve_error(rp, 400,
				    "files: \"%.200s\" clashes with \"%s\", which %s writes in the "
				    "scratch",
				    path, other, serve_lang_name(plan->lang));
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

/* SandboxFusion reads a fetched path relative to the run's working
 * directory, so an absolute one names a file wherever the program could
 * write it. In a sandbox that is the scratch (the working directory, at a
 * path of its own), and /tmp, /dev/shm and /mnt, which are directories of
 * the scratch (sandbox_scratch.h): an absolute path under one of those is
 * read from there. The scratch-relative path, or NULL (the 400's reason in
 * why). */
static const char *fetch_path(const char *path, char **owned, char *why, size_t wlen)
{
	static const char *const dirs[][2] = { { "/tmp/", SB_SCRATCH_TMP },
					       { "/dev/shm/", SB_SCRATCH_SHM },
					       { "/mnt/", SB_SCRATCH_MNT } };

	*owned = NULL;
	if (path[0] != '/') {
		if (sb_scratch_path_valid(path))
			return path;
		snprintf(why, wlen,
			 "\"%.200s\" is not a path inside the working directory "
			 "(no '.', '..' or empty components)",
			 path);
		return NULL;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t n = strlen(dirs[i][0]);

		if (strncmp(path, dirs[i][0], n) || !sb_scratch_path_valid(path + n))
			continue;
		if (asprintf(owned, "%s/%s", dirs[i][1], path + n) < 0) {
			*owned = NULL;
			snprintf(why, wlen, "out of memory");
			return NULL;
		}
		return *owned;
	}
	snprintf(why, wlen,
		 "\"%.200s\" is outside what a program can write: its working directory "
		 "(relative paths), /tmp, /dev/shm and /mnt (no '.', '..' or empty components)",
		 path);
	return NULL;
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
	plan->fetch_names = n ? calloc(n, sizeof(*plan->fetch_names)) : NULL;
	if (n && (!plan->fetch || !plan->fetch_names)) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *path = json_string_value(json_array_get(fetch, i)), *rel;
		char why[512];

		if (!path) {
			serve_error(rp, 400, "fetch_files[%zu] must be a string", i);
			return -1;
		}
		rel = fetch_path(path, &plan->fetch_mapped[i], why, sizeof(why));
		if (!rel) {
			serve_error(rp, strcmp(why, "out of memory") ? 400 : 500,
				    "fetch_files[%zu]: %s", i, why);
			return -1;
		}
		plan->fetch_names[plan->n_fetch] = path;
		plan->fetch[plan->n_fetch++] = rel;
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
	if (runcode_parse_language(langs, p, tenant, body, plan, rp))
		return -1;
	if (in && !json_is_null(in) && !json_is_string(in)) {
		serve_error(rp, 400, "\"stdin\" must be a string or null");
		return -1;
	}
	plan->stdin_data = json_is_string(in) ? json_string_value(in) : NULL;
	plan->stdin_len = json_is_string(in) ? json_string_length(in) : 0;
	if (parse_timeout(body, "compile_timeout", p, &plan->compile_timeout_s,
			  &plan->compile_timeout_ms, rp) ||
	    parse_timeout(body, "run_timeout", p, &plan->run_timeout_s, &plan->run_timeout_ms, rp))
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
	if (parse_files(body, plan, rp) || parse_fetch(body, plan, rp) ||
	    runcode_call_parse(p, body, plan, rp))
		return -1;
	return 0;
}

void runcode_plan_free(struct runcode_plan *plan)
{
	for (size_t i = 1; i < plan->n_files; i++) /* [0] is the code, in the body */
		free((void *)plan->files[i].data);
	free(plan->files);
	free(plan->fetch);
	free(plan->fetch_names);
	for (size_t i = 0; i < RUNCODE_MAX_FETCH; i++)
		free(plan->fetch_mapped[i]);
	free(plan->fn_name);
	json_decref(plan->body);
	memset(plan, 0, sizeof(*plan));
}

void runcode_budget(const struct runcode_plan *plan, uint64_t arrived_ms, struct serve_budget *b)
{
	bool compiled = serve_lang_compiled(plan->lang);

	/* The client waits for the sum of what it sent, compiled or not. */
	b->client_ms = (uint64_t)ceil((plan->compile_timeout_s + plan->run_timeout_s) * 1000.0) +
		       SERVE_CLIENT_SLACK_MS;
	b->worst_ms = (compiled ? plan->compile_timeout_ms : 0) + plan->run_timeout_ms;
	b->latest_start_ms = arrived_ms + b->client_ms - b->worst_ms - SERVE_FINISH_MARGIN_MS;
	b->run_latest_ms =
		arrived_ms + b->client_ms - plan->run_timeout_ms - SERVE_FINISH_MARGIN_MS;
	b->client_end_ms = arrived_ms + b->client_ms - SERVE_FINISH_MARGIN_MS;
}

/* ---- the response ----------------------------------------------------- */

const char *runcode_status(enum sg_cause cause)
{
	if (cause == SG_CAUSE_OK)
		return "Success";
	return cause == SG_CAUSE_PLATFORM_ERROR ? "SandboxError" : "Failed";
}

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

json_t *runcode_response_new(struct serve_call *c, const char *status, const char *message)
{
	return json_pack("{s:s, s:o, s:n, s:n, s:s, s:{}}", "status", status, "message",
			 json_string_lossy(message, strlen(message)), "compile_result",
			 "run_result", "executor_pod_name", c->srv->host, "files");
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

static void runcode_set_budget(struct serve_call *c, void *plan)
{
	runcode_budget(plan, c->rq->arrived_ms, &c->budget);
}

static void runcode_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	rp->status = 200; /* as SandboxFusion: the body says SandboxError */
	rp->body = runcode_response_new(c, "SandboxError", detail);
	json_object_set_new(rp->body, "sandguard",
			    json_pack("{s:s, s:s, s:o, s:[], s:[], s:s, s:n, s:o, s:i}", "tenant",
				      c->tenant, "request_id", c->request_id, "run_id",
				      c->run_id ? json_string(c->run_id) : json_null(), "batch_ids",
				      "sandbox_ids", "cause", cause_name(SG_CAUSE_PLATFORM_ERROR),
				      "rule", "detail", json_string_lossy(detail, strlen(detail)),
				      "attempts", 0));
}

static void runcode_free(void *p)
{
	runcode_plan_free(p);
	free(p);
}

const struct serve_endpoint serve_runcode_endpoint = {
	.mode = "run",
	.body_tenant = false,
	.busy_status = 504,
	.prepare = runcode_prepare,
	.budget = runcode_set_budget,
	.execute = runcode_execute,
	.policy_error = runcode_policy_error,
	.free_plan = runcode_free,
};
