/* The native API: the request and result of `sandguard exec` over HTTP.
 *
 * POST /v1/score   {tenant?, run_id?, timeout_ms?, command: [argv], batch: {...}}
 *                  = sandguard exec --tenant T [--run-id R] [--timeout-ms N]
 *                    --batch <batch> -- argv...
 * POST /v1/verify  {tenant?, run_id?, batch_id?, timeout_ms?, grader?, tests: [...],
 *                   command: [argv] | code: "...", language: "python"|...}
 *                  = sandguard exec --tests <tests> [--grader G] -- argv...
 *                    (with code: [env PYTHONPATH=<dir>] python3 -c <code>, as
 *                    serve_lang_python() says; any other /run_code language is
 *                    built once and its tests run the program: serve_verify_lang.c)
 *
 * The command names a program on this node: command[0] must be allowed by
 * the tenant's exec.allow, and every absolute path among the arguments
 * must exist inside its read_only paths, so that a mistyped path is a 400
 * here, not a tenant_crash booked (or a tenant paused) for the trainer's
 * typo. The batch and the tests reach the executor byte for byte as sent.
 *
 * Reply: the result object of `sandguard exec` (plus "request_id"), 200
 * for ok and every tenant cause, 500 for a platform_error; 429 with
 * Retry-After when exec's node-wide cap for the tenant refused it, 503
 * when the node's own admission did (its CPU). A /v1/verify request holds
 * at most --max-tests tests (400 beyond). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "exec/exec.h"
#include "exec/verify_judge.h"
#include "lib/json_locate.h"
#include "lib/json_text.h"
#include "serve_internal.h"
#include "pool/pool.h"

#define ARGV_MAX      64
#define ARG_BYTES_MAX 131071 /* MAX_ARG_STRLEN less the NUL: one exec argument */

static const char *const score_keys[] = {
	"tenant", "run_id", "timeout_ms", "command", "batch", NULL
};
static const char *const verify_keys[] = { "tenant",  "run_id", "batch_id", "timeout_ms", "tests",
					   "command", "code",   "language", "grader",     NULL };

struct native_plan {
	bool verify;
	char **argv; /* NULL-terminated; strings in the body */
	uint64_t timeout_ms;
	const char *batch_id; /* verify */
	struct exec_batch batch;
	struct verify_cases tests;
	struct verify_lang *lang; /* code in another language than python */
};

/* The exact text of the body's member `key`: jansson keeps no positions,
 * so json_locate finds where the value starts and the parser where it
 * ends (with JSON_DISABLE_EOF_CHECK, error.position is the bytes read). */
static int member_text(const struct serve_call *c, const char *key, const char **text, size_t *len)
{
	struct json_step step = { .key = key };
	long at = json_locate(c->rq->body, c->rq->body_len, &step, 1, false);
	json_error_t err;
	json_t *v;

	if (at < 0)
		return -1;
	v = json_loadb(c->rq->body + at, c->rq->body_len - (size_t)at, JSON_DISABLE_EOF_CHECK,
		       &err);
	if (!v)
		return -1;
	json_decref(v);
	*text = c->rq->body + at;
	*len = (size_t)err.position;
	return 0;
}

/* path, once resolved, lies in one of the policy's read_only trees. */
static bool readable_by_policy(const struct sg_policy *p, const char *path)
{
	char real[PATH_MAX], ro[PATH_MAX];

	if (!realpath(path, real))
		return false;
	for (int i = 0; i < p->n_read_only; i++) {
		const char *root = realpath(p->read_only[i], ro) ? ro : p->read_only[i];
		size_t n = strlen(root);

		if (!strncmp(real, root, n) && (real[n] == '\0' || real[n] == '/'))
			return true;
	}
	return false;
}

static int parse_command(struct serve_call *c, json_t *cmd, struct native_plan *plan,
			 struct serve_reply *rp)
{
	size_t n = json_array_size(cmd);
	struct stat st;

	if (!json_is_array(cmd) || n == 0 || n > ARGV_MAX) {
		serve_error(rp, 400,
			    "\"command\" must be an array of 1 to %d strings: the program and "
			    "its arguments",
			    ARGV_MAX);
		return -1;
	}
	plan->argv = calloc(n + 1, sizeof(*plan->argv));
	if (!plan->argv) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(cmd, i);
		const char *arg = json_string_value(v);

		if (!arg || strlen(arg) != json_string_length(v) ||
		    json_string_length(v) > ARG_BYTES_MAX) {
			serve_error(
				rp, 400,
				"command[%zu] must be a string without NUL bytes, at most %d bytes",
				i, ARG_BYTES_MAX);
			return -1;
		}
		if (arg[0] == '/' && stat(arg, &st)) {
			serve_error(rp, 400, "command[%zu] \"%.200s\" does not exist on this node",
				    i, arg);
			return -1;
		}
		if (arg[0] == '/' && !readable_by_policy(c->policy, arg)) {
			serve_error(
				rp, 400,
				"command[%zu] \"%.200s\" is outside tenant %s's read_only paths "
				"(%s): the sandbox could not open it",
				i, arg, c->tenant, c->policy->source);
			return -1;
		}
		plan->argv[i] = (char *)arg;
	}
	if (plan->argv[0][0] != '/') {
		serve_error(rp, 400, "command[0] \"%.200s\" must be an absolute path",
			    plan->argv[0]);
		return -1;
	}
	if (stat(plan->argv[0], &st) || !S_ISREG(st.st_mode) || access(plan->argv[0], X_OK)) {
		serve_error(rp, 400, "command[0] \"%.200s\" is not an executable file",
			    plan->argv[0]);
		return -1;
	}
	if (!serve_exec_allowed(c->policy, plan->argv[0])) {
		serve_error(rp, 400,
			    "command[0] \"%.200s\" is not allowed by tenant %s's exec.allow (%s)",
			    plan->argv[0], c->tenant, c->policy->source);
		return -1;
	}
	return 0;
}

/* /v1/verify with code: python3 -c <code>, with /run_code's python's
 * runtime libraries (serve_lang_python()). The verifier feeds each test
 * on stdin and has no files, so the code travels as one argument. */
static int parse_code(struct serve_call *c, json_t *body, struct native_plan *plan,
		      struct serve_reply *rp)
{
	const struct serve_langs *langs = &c->srv->langs;
	json_t *code = json_object_get(body, "code"), *lang = json_object_get(body, "language");
	const char *denied;
	int n;

	if (json_is_string(lang) && strcmp(json_string_value(lang), "python")) {
		if (verify_lang_plan(c, body, &plan->lang, rp))
			return -1;
		plan->argv = plan->lang->lp.run;
		return 0;
	}
	if (!json_is_string(lang)) {
		serve_error(rp, 400, "\"language\" is required with \"code\": a string");
		return -1;
	}
	if (!langs->enabled[LANG_PYTHON]) {
		serve_error(rp, 400, "language python is not enabled on this server");
		return -1;
	}
	if ((denied = serve_lang_denied(langs, LANG_PYTHON, c->policy))) {
		serve_error(rp, 400,
			    "language python is not enabled for tenant %s: its policy's exec.allow "
			    "(%s) does not allow %s",
			    c->tenant, c->policy->source, denied);
		return -1;
	}
	if (!json_is_string(code) || strlen(json_string_value(code)) != json_string_length(code) ||
	    json_string_length(code) > ARG_BYTES_MAX) {
		serve_error(rp, 400,
			    "\"code\" must be a string without NUL bytes, at most %d bytes",
			    ARG_BYTES_MAX);
		return -1;
	}
	plan->argv = calloc(6, sizeof(*plan->argv));
	if (!plan->argv) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	n = serve_lang_python(langs, c->policy, plan->argv); /* and its runtime libraries */
	plan->argv[n++] = "-c";
	plan->argv[n] = (char *)json_string_value(code);
	return 0;
}

/* The fields every native request shares. */
static int parse_common(struct serve_call *c, json_t *body, const char *const *keys,
			struct native_plan *plan, struct serve_reply *rp)
{
	const char *run_id = NULL;

	if (serve_known_keys(body, keys, rp) || serve_opt_id(body, "run_id", &run_id, rp) ||
	    serve_opt_timeout(body, c->policy, &plan->timeout_ms, rp))
		return -1;
	if (run_id && c->run_id && strcmp(run_id, c->run_id)) {
		serve_error(rp, 400,
			    "the " SERVE_RUN_ID_HEADER " header says \"%s\" but the body's "
			    "\"run_id\" says \"%s\"",
			    c->run_id, run_id);
		return -1;
	}
	if (run_id)
		c->run_id = run_id;
	return 0;
}

static int parse_member(struct serve_call *c, json_t *body, const char *key,
			struct native_plan *plan, struct serve_reply *rp)
{
	const char *text;
	char err[512];
	size_t len;
	int ret;

	if (!json_object_get(body, key)) {
		serve_error(rp, 400, "\"%s\" is required", key);
		return -1;
	}
	if (member_text(c, key, &text, &len)) {
		serve_error(rp, 400, "\"%s\": cannot find its text in the body", key);
		return -1;
	}
	ret = plan->verify ? verify_cases_parse(text, len, key, &plan->tests, err, sizeof(err))
			   : exec_batch_parse(text, len, key, &plan->batch, err, sizeof(err));
	if (ret == -ENOMEM)
		serve_error(rp, 500, "out of memory");
	else if (ret)
		serve_error(rp, 400, "%s", err);
	else if (plan->verify && plan->tests.n > c->srv->cfg.max_tests) {
		serve_error(rp, 400,
			    "\"tests\" has %zu tests, at most %u in one request (sandguard serve "
			    "--max-tests): split them",
			    plan->tests.n, c->srv->cfg.max_tests);
		ret = -1;
	}
	return ret ? -1 : 0;
}

static void native_free(void *p)
{
	struct native_plan *plan = p;

	if (!plan)
		return;
	if (!plan->lang)
		free(plan->argv);
	free(plan->lang);
	exec_batch_free(&plan->batch);
	verify_cases_free(&plan->tests);
	free(plan);
}

static int native_prepare(struct serve_call *c, json_t *body, bool verify, void **out,
			  struct serve_reply *rp)
{
	struct native_plan *plan = calloc(1, sizeof(*plan));
	json_t *cmd = json_object_get(body, "command");
	int ret;

	if (!plan) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	plan->verify = verify;
	ret = parse_common(c, body, verify ? verify_keys : score_keys, plan, rp);
	if (!ret && verify) {
		ret = serve_opt_id(body, "batch_id", &plan->batch_id, rp);
		if (!ret && !cmd == !json_object_get(body, "code")) {
			serve_error(rp, 400,
				    "give exactly one of \"command\" (a program on this node) and "
				    "\"code\" (python code)");
			ret = -1;
		}
		if (!ret && cmd && json_object_get(body, "language")) {
			serve_error(rp, 400,
				    "\"language\" goes with \"code\", not with \"command\"");
			ret = -1;
		}
	} else if (!ret && !cmd) {
		serve_error(rp, 400,
			    "\"command\" is required: the reward program and its arguments");
		ret = -1;
	}
	if (!ret)
		ret = cmd ? parse_command(c, cmd, plan, rp) : parse_code(c, body, plan, rp);
	if (!ret)
		ret = parse_member(c, body, verify ? "tests" : "batch", plan, rp);
	if (ret) {
		native_free(plan);
		return -1;
	}
	*out = plan;
	return 0;
}

static int score_prepare(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp)
{
	return native_prepare(c, body, false, plan, rp);
}

/* "grader": "strict" | "lcb" (src/exec/verify_judge.h), else the
 * policy's; a test that needs the harness needs a Python command. */
static int verify_grader_of(struct serve_call *c, json_t *body, struct native_plan *plan,
			    struct serve_reply *rp)
{
	json_t *g = json_object_get(body, "grader");
	char err[512];
	int ret;

	if (g && !json_is_null(g)) {
		const char *v = json_is_string(g) ? json_string_value(g) : "";

		if (strcmp(v, "strict") && strcmp(v, "lcb")) {
			serve_error(rp, 400, "\"grader\" must be \"strict\" or \"lcb\"");
			return -1;
		}
		plan->tests.grader_set = true;
		plan->tests.grader = strcmp(v, "lcb") ? SG_GRADER_STRICT : SG_GRADER_LCB;
	}
	ret = verify_harness_check(c->policy, &plan->tests, plan->argv, err, sizeof(err));
	if (ret)
		serve_error(rp, ret == -EINVAL ? 400 : 500, "%s", err);
	return ret ? -1 : 0;
}

static int verify_prepare(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp)
{
	if (native_prepare(c, body, true, plan, rp))
		return -1;
	if (verify_grader_of(c, body, *plan, rp)) {
		native_free(*plan);
		*plan = NULL;
		return -1;
	}
	return 0;
}

/* exec's admission said "not now": the tenant's node-wide slots (429) or
 * the node's own capacity (503). Paused, disabled, no agent and an
 * unreadable state are answers of their own. */
static bool node_busy(enum exec_refusal why)
{
	return why != EXEC_ADMITTED && why != EXEC_REFUSED_PAUSED && why != EXEC_REFUSED_DISABLED &&
	       why != EXEC_REFUSED_NO_AGENT && why != EXEC_REFUSED_STATE;
}

static void reply_result(struct serve_call *c, const struct exec_result *res,
			 struct serve_reply *rp)
{
	json_t *j;

	if (res->attempts == 0 && node_busy(res->refusal)) {
		serve_error(rp, res->refusal == EXEC_REFUSED_CONCURRENCY ? 429 : 503, "%s",
			    res->detail);
		rp->retry_after_s = serve_retry_after(c->policy);
		return;
	}
	j = exec_result_json(c->tenant, res);
	if (!j) {
		serve_error(rp, 500, "out of memory");
		return;
	}
	json_object_set_new(j, "request_id", json_string(c->request_id));
	rp->status = res->cause == SG_CAUSE_PLATFORM_ERROR ? 500 : 200;
	rp->body = j;
}

static void native_execute(struct serve_call *c, void *p, struct serve_reply *rp)
{
	struct native_plan *plan = p;
	struct exec_ctx ctx = {
		.policy = c->policy,
		.tenant = c->tenant,
		.run_id = c->run_id,
		.argv = plan->argv,
		.timeout_ms = plan->timeout_ms,
		.agent = c->agent,
		.sandboxes = c->srv->pool ? pool_source(c->srv->pool) : NULL,
		.path = "warm",
		.reap_elsewhere = c->srv->pool != NULL,
		.run = c->srv->cfg.run,
		.build = plan->lang ? &plan->lang->build : NULL,
	};
	struct exec_result res;
	int ret = plan->verify ? exec_verify(&ctx, plan->batch_id ? plan->batch_id : c->request_id,
					     &plan->tests, &res)
			       : exec_batch(&ctx, &plan->batch, &res);

	if (ret) {
		serve_error(rp, 500, "%s", strerror(-ret));
		return;
	}
	reply_result(c, &res, rp);
	exec_result_free(&res);
}

/* The policy could not be loaded: the result of a platform error, as
 * `sandguard exec` prints it. */
static void policy_error(struct serve_call *c, const char *detail, bool verify,
			 struct serve_reply *rp)
{
	struct exec_result res = {
		.cause = SG_CAUSE_PLATFORM_ERROR, .rule = -1, .reward = -1, .verify = verify
	};

	snprintf(res.batch_id, sizeof(res.batch_id), "%s", c->request_id);
	snprintf(res.detail, sizeof(res.detail), "%s", detail);
	reply_result(c, &res, rp);
}

static void score_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	policy_error(c, detail, false, rp);
}

static void verify_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	policy_error(c, detail, true, rp);
}

const struct serve_endpoint serve_score_endpoint = {
	.mode = "batch",
	.body_tenant = true,
	.prepare = score_prepare,
	.execute = native_execute,
	.policy_error = score_policy_error,
	.free_plan = native_free,
};

const struct serve_endpoint serve_verify_endpoint = {
	.mode = "verify",
	.body_tenant = true,
	.prepare = verify_prepare,
	.execute = native_execute,
	.policy_error = verify_policy_error,
	.free_plan = native_free,
};
