/* POST /tci/execute: Together's code interpreter (TCI), as rLLM's
 * TogetherCodeTool calls it through the `together` SDK
 * (client.code_interpreter.run(code=..., language="python")).
 *
 * Request:  {code, language: "python", files?: [{name, encoding: "string"
 *            | "base64", content}], timeout?} ("timeout", in seconds, is
 *            sandguard's own: the shipped CodeTool sends forward()'s)
 * Response: {"data": {"session_id", "status": "completed", "outputs":
 *            [{"type": "stdout" | "stderr" | "error", "data": "..."}],
 *            "errors": null}, "errors": null, "sandguard": {...}}
 *
 * The call is the /run_code request it means, {code, language: "python",
 * files: {name: base64}, run_timeout}, run by /run_code's own endpoint:
 * the same sandbox, limits, admission and booking (mode "run": a failure
 * of the code is its verdict). Its answer is then told the TCI way:
 * stdout and stderr as outputs, and an "error" output when the program
 * did not exit 0 (an exception, a timeout, a limit, a policy violation),
 * which is what rLLM's reward reads (codetool_check_correctness: correct
 * iff no error). A platform error is HTTP 500, never an "error" output,
 * so that a client that can tell (the shipped CodeTool) never scores the
 * node's fault as a wrong program.
 *
 * Every call runs in a fresh sandbox: no session survives it. A request
 * naming a session_id is a 400; the reply's session_id is the request id.
 * Nothing evaluates a last expression: "execute_result" never comes. */
#include <stdlib.h>
#include <string.h>
#include "lib/base64.h"
#include "serve_internal.h"

#define COMPILE_TIMEOUT_S 1 /* python has no compile step: only the budget counts it */

static const char *const tci_keys[] = { "code", "language", "files", "timeout", NULL };
static const char *const tci_paths[] = { "/tci/execute", "//tci/execute", "/v1/tci/execute",
					 "/v1//tci/execute", NULL };

/* The SDK joins its base URL (with a trailing '/') and "/tci/execute". */
bool serve_tci_path(const char *url)
{
	for (const char *const *p = tci_paths; *p; p++)
		if (!strcmp(url, *p))
			return true;
	return false;
}

/* TCI's files as /run_code's {name: base64}. */
static int tci_files(json_t *files, json_t *out, struct serve_reply *rp)
{
	json_t *f;
	size_t i;

	if (!json_is_array(files)) {
		serve_error(rp, 400,
			    "\"files\" must be an array of {\"name\", \"encoding\": \"string\" or "
			    "\"base64\", \"content\"}");
		return -1;
	}
	json_array_foreach(files, i, f)
	{
		const char *name = json_string_value(json_object_get(f, "name"));
		const char *enc = json_string_value(json_object_get(f, "encoding"));
		json_t *content = json_object_get(f, "content");
		char *b64;

		if (!name || !enc || !json_is_string(content) || json_object_size(f) != 3 ||
		    (strcmp(enc, "string") && strcmp(enc, "base64"))) {
			serve_error(
				rp, 400,
				"files[%zu] must be {\"name\": string, \"encoding\": \"string\" "
				"or \"base64\", \"content\": string}",
				i);
			return -1;
		}
		if (json_object_get(out, name)) {
			serve_error(rp, 400, "files[%zu]: \"%.200s\" is given twice", i, name);
			return -1;
		}
		if (!strcmp(enc, "base64")) {
			json_object_set(out, name, content);
			continue;
		}
		b64 = base64_encode(json_string_value(content), json_string_length(content), NULL);
		if (!b64) {
			serve_error(rp, 500, "out of memory");
			return -1;
		}
		json_object_set_new(out, name, json_string(b64));
		free(b64);
	}
	return 0;
}

/* The /run_code request this call means. */
static json_t *runcode_request(struct serve_call *c, json_t *body, struct serve_reply *rp)
{
	json_t *code = json_object_get(body, "code"), *lang = json_object_get(body, "language");
	json_t *files = json_object_get(body, "files"), *timeout = json_object_get(body, "timeout");
	double policy_s = (double)c->policy->limits.timeout_ms / 1000.0;
	double run_s;
	json_t *req;

	if (serve_known_keys(body, tci_keys, rp))
		return NULL;
	if (!json_is_string(code)) {
		serve_error(rp, 400, "\"code\" is required: a string");
		return NULL;
	}
	if (!json_is_string(lang) || strcmp(json_string_value(lang), "python")) {
		serve_error(rp, 400, "\"language\" must be \"python\", as in TCI");
		return NULL;
	}
	if (timeout && (!json_is_number(timeout) || !(json_number_value(timeout) > 0))) {
		serve_error(rp, 400, "\"timeout\" must be a positive number of seconds");
		return NULL;
	}
	/* The policy's deadline, or the request's when it is shorter. */
	run_s = timeout && json_number_value(timeout) < policy_s ? json_number_value(timeout)
								 : policy_s;
	req = json_pack("{s:O, s:s, s:f, s:i, s:{}}", "code", code, "language", "python",
			"run_timeout", run_s, "compile_timeout", COMPILE_TIMEOUT_S, "files");
	if (!req) {
		serve_error(rp, 500, "out of memory");
		return NULL;
	}
	if (files && tci_files(files, json_object_get(req, "files"), rp)) {
		json_decref(req);
		return NULL;
	}
	return req;
}

static int tci_prepare(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp)
{
	json_t *req;
	int ret;

	if (json_object_get(body, "session_id")) {
		serve_error(
			rp, 400,
			"\"session_id\": sandguard runs every call in a fresh sandbox and keeps "
			"no session; send the whole program in one call");
		return -1;
	}
	req = runcode_request(c, body, rp);
	if (!req)
		return -1;
	ret = serve_runcode_endpoint.prepare(c, req, plan, rp);
	json_decref(req); /* the plan holds its own reference */
	return ret;
}

static void add_output(json_t *outputs, const char *type, json_t *data)
{
	if (json_is_string(data) && json_string_length(data))
		json_array_append_new(outputs, json_pack("{s:s, s:O}", "type", type, "data", data));
}

/* /run_code's answer told the TCI way; refusals ({"error"}) as they are. */
static void to_tci(struct serve_call *c, struct serve_reply *rp)
{
	json_t *res = rp->body, *run = json_object_get(res, "run_result");
	json_t *sg = json_object_get(res, "sandguard"), *outputs, *out;
	const char *status = json_string_value(json_object_get(res, "status"));

	if (!status || !sg)
		return;
	json_object_set(sg, "run_result", run ? run : json_null());
	if (!strcmp(status, "SandboxError")) {
		out = json_pack("{s:O, s:O}", "error", json_object_get(res, "message"), "sandguard",
				sg);
		rp->status = 500;
	} else {
		outputs = json_array();
		add_output(outputs, "stdout", json_object_get(run, "stdout"));
		add_output(outputs, "stderr", json_object_get(run, "stderr"));
		if (strcmp(status, "Success"))
			add_output(outputs, "error", json_object_get(res, "message"));
		out = json_pack("{s:{s:s, s:s, s:o, s:n}, s:n, s:O}", "data", "session_id",
				c->request_id, "status", "completed", "outputs", outputs, "errors",
				"errors", "sandguard", sg);
	}
	if (!out) {
		serve_error(rp, 500, "out of memory");
		return;
	}
	json_decref(rp->body);
	rp->body = out;
}

static void tci_execute(struct serve_call *c, void *plan, struct serve_reply *rp)
{
	serve_runcode_endpoint.execute(c, plan, rp);
	to_tci(c, rp);
}

static void tci_budget(struct serve_call *c, void *plan)
{
	serve_runcode_endpoint.budget(c, plan);
}

static void tci_free(void *plan)
{
	serve_runcode_endpoint.free_plan(plan);
}

static void tci_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	serve_runcode_endpoint.policy_error(c, detail, rp);
	to_tci(c, rp);
}

const struct serve_endpoint serve_tci_endpoint = {
	.mode = "run",
	.body_tenant = false,
	.busy_status = 504, /* as /run_code, whose executor it shares */
	.prepare = tci_prepare,
	.budget = tci_budget,
	.execute = tci_execute,
	.policy_error = tci_policy_error,
	.free_plan = tci_free,
};
