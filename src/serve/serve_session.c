/* POST /v1/sessions and /v1/sessions/<id>/<call>: environments' sessions
 * over HTTP (src/session/session.h; docs/environments.md has the API).
 * The request is checked here (4xx, nothing booked); the session's
 * manager does the rest. A session belongs to the tenant and the run
 * (X-Sandguard-Run-Id) that made it: any other caller gets a 404. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/base64.h"
#include "lib/json_text.h"
#include "lib/rule_names.h"
#include "sandbox/sandbox_scratch.h"
#include "serve_internal.h"
#include "session/session.h"

#define FILES_MAX   256
#define FETCH_CAP   (16u << 20)
#define SESSION_MAX (SESSION_FORK_MAX)

enum session_op { OP_CREATE, OP_LIST, OP_EXEC, OP_PUT, OP_GET, OP_FORK, OP_CLOSE };

struct session_plan {
	enum session_op op;
	char id[SG_ID_BUF];
	json_t *body; /* referenced */
	struct sandbox_file files[FILES_MAX];
	unsigned char *data[FILES_MAX]; /* decoded contents */
	size_t n_files;
	const char *paths[FILES_MAX];
	size_t n_paths;
	char *argv[SERVE_LANG_ARGV + 1];
	const char *code;
	size_t code_len;
	const char *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;
	unsigned n_fork;
	const char *kernel;
	char *setup_argv[4];
};

static const struct {
	const char *name;
	enum session_op op;
} calls[] = { { "exec", OP_EXEC },
	      { "put", OP_PUT },
	      { "get", OP_GET },
	      { "fork", OP_FORK },
	      { "close", OP_CLOSE } };

static int parse_url(const char *url, struct session_plan *p, struct serve_reply *rp)
{
	const char *rest = url + strlen("/v1/sessions"), *slash;

	if (!*rest) {
		p->op = OP_CREATE;
		return 0;
	}
	if (!strcmp(rest, "/list")) {
		p->op = OP_LIST;
		return 0;
	}
	slash = strchr(rest + 1, '/');
	if (!slash || (size_t)(slash - rest - 1) >= sizeof(p->id) || slash == rest + 1)
		goto bad;
	memcpy(p->id, rest + 1, slash - rest - 1);
	p->id[slash - rest - 1] = '\0';
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (!strcmp(slash + 1, calls[i].name)) {
			p->op = calls[i].op;
			return 0;
		}
bad:
	serve_error(rp, 404,
		    "no such session call: %.200s (POST /v1/sessions, /v1/sessions/list, "
		    "/v1/sessions/<id>/exec|put|get|fork|close)",
		    url);
	return -1;
}

/* "files": {"path": "content", ...}; "encoding": "utf-8" (default) or
 * "base64" for every content. */
static int parse_files(json_t *body, struct session_plan *p, struct serve_reply *rp)
{
	json_t *files = json_object_get(body, "files"), *enc = json_object_get(body, "encoding"),
	       *v;
	bool b64 = false;
	const char *path;

	if (!files)
		return 0;
	if (enc && (!json_is_string(enc) || (strcmp(json_string_value(enc), "utf-8") &&
					     strcmp(json_string_value(enc), "base64")))) {
		serve_error(rp, 400, "\"encoding\" must be \"utf-8\" or \"base64\"");
		return -1;
	}
	b64 = enc && !strcmp(json_string_value(enc), "base64");
	if (!json_is_object(files) || json_object_size(files) > FILES_MAX) {
		serve_error(rp, 400, "\"files\" must be an object of at most %d paths to contents",
			    FILES_MAX);
		return -1;
	}
	json_object_foreach(files, path, v)
	{
		struct sandbox_file *f = &p->files[p->n_files];
		char why[128];

		if (!json_is_string(v)) {
			serve_error(rp, 400,
				    "\"files\": the content of \"%.200s\" must be a string", path);
			return -1;
		}
		if (!sb_scratch_path_valid(path)) {
			serve_error(
				rp, 400,
				"\"files\": \"%.200s\" is not a path inside the session's scratch "
				"(relative, without \"..\" or empty components)",
				path);
			return -1;
		}
		f->path = path;
		f->mode = 0644;
		if (b64) {
			if (base64_decode(json_string_value(v), json_string_length(v),
					  &p->data[p->n_files], &f->len, why, sizeof(why))) {
				serve_error(rp, 400, "\"files\": \"%.200s\": %s", path, why);
				return -1;
			}
			f->data = p->data[p->n_files];
		} else {
			f->data = json_string_value(v);
			f->len = json_string_length(v);
		}
		for (size_t i = 0; i < p->n_files; i++)
			if (sb_scratch_paths_conflict(p->files[i].path, path)) {
				serve_error(rp, 400,
					    "\"files\": \"%.200s\" and \"%.200s\" cannot both be "
					    "written (one is inside the other)",
					    p->files[i].path, path);
				return -1;
			}
		p->n_files++;
	}
	return 0;
}

static int string_field(json_t *body, const char *key, const char **out, size_t *len,
			struct serve_reply *rp)
{
	json_t *v = json_object_get(body, key);

	if (!v)
		return 0;
	if (!json_is_string(v)) {
		serve_error(rp, 400, "\"%s\" must be a string", key);
		return -1;
	}
	*out = json_string_value(v);
	if (len)
		*len = json_string_length(v);
	return 0;
}

/* "timeout_ms": at most the policy's step deadline (session.step_timeout_ms,
 * else limits.timeout_ms), which a step without one gets. */
static int step_timeout(struct serve_call *c, json_t *body, struct session_plan *p,
			struct serve_reply *rp)
{
	const struct sg_policy *pol = c->policy;
	uint64_t max = pol->session.step_timeout_ms ? pol->session.step_timeout_ms
						    : pol->limits.timeout_ms;
	json_t *v = json_object_get(body, "timeout_ms");

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		serve_error(
			rp, 400,
			"\"timeout_ms\" must be a positive integer of at most the step deadline, "
			"%llu ms (%s)",
			(unsigned long long)max, pol->source);
		return -1;
	}
	p->timeout_ms = (uint64_t)json_integer_value(v);
	return 0;
}

/* exec: exactly one of "command" (run by sh -c), "argv" and "code" (for
 * the session's kernel); "stdin", "timeout_ms". Also create's "setup". */
static int parse_step(struct serve_call *c, json_t *body, struct session_plan *p,
		      struct serve_reply *rp)
{
	json_t *argv = json_object_get(body, "argv");
	const char *command = NULL;
	int n = 0;

	if (string_field(body, "command", &command, NULL, rp) ||
	    string_field(body, "code", &p->code, &p->code_len, rp) ||
	    string_field(body, "stdin", &p->stdin_data, &p->stdin_len, rp))
		return -1;
	if (!!command + !!argv + !!p->code != 1) {
		serve_error(rp, 400, "send exactly one of \"command\", \"argv\" and \"code\"");
		return -1;
	}
	if (command) {
		p->argv[n++] = "sh";
		p->argv[n++] = "-c";
		p->argv[n++] = (char *)command;
	}
	if (argv) {
		size_t i;
		json_t *a;

		if (!json_is_array(argv) || !json_array_size(argv) ||
		    json_array_size(argv) > SERVE_LANG_ARGV) {
			serve_error(rp, 400, "\"argv\" must be an array of 1 to %d strings",
				    SERVE_LANG_ARGV);
			return -1;
		}
		json_array_foreach(argv, i, a)
		{
			if (!json_is_string(a) || !json_string_length(a)) {
				serve_error(rp, 400, "\"argv\" must hold non-empty strings");
				return -1;
			}
			p->argv[n++] = (char *)json_string_value(a);
		}
	}
	p->argv[n] = NULL;
	return step_timeout(c, body, p, rp);
}

static int parse_paths(json_t *body, struct session_plan *p, struct serve_reply *rp)
{
	json_t *paths = json_object_get(body, "paths"), *v;
	size_t i;

	if (!json_is_array(paths) || !json_array_size(paths) ||
	    json_array_size(paths) > FILES_MAX) {
		serve_error(rp, 400, "\"paths\" must be an array of 1 to %d scratch paths",
			    FILES_MAX);
		return -1;
	}
	json_array_foreach(paths, i, v)
	{
		if (!json_is_string(v)) {
			serve_error(rp, 400, "\"paths\" must hold strings");
			return -1;
		}
		for (size_t j = 0; j < p->n_paths; j++)
			if (!strcmp(p->paths[j], json_string_value(v))) {
				serve_error(rp, 400, "\"paths\": \"%.200s\" is asked for twice",
					    json_string_value(v));
				return -1;
			}
		p->paths[p->n_paths++] = json_string_value(v);
	}
	return 0;
}

static void session_free_plan(void *plan);
static int session_parse(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp);

/* The plan, or -1 with the 4xx: a plan refused here is freed here (the
 * router frees only the plan of a request it ran). */
static int session_prepare(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp)
{
	int ret = session_parse(c, body, plan, rp);

	if (ret) {
		session_free_plan(*plan);
		*plan = NULL;
	}
	return ret;
}

static int session_parse(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp)
{
	static const char *const keys[][8] = {
		[OP_CREATE] = { "tenant", "kernel", "files", "encoding", "setup", "timeout_ms",
				NULL },
		[OP_LIST] = { "tenant", NULL },
		[OP_EXEC] = { "tenant", "command", "argv", "code", "stdin", "timeout_ms", NULL },
		[OP_PUT] = { "tenant", "files", "encoding", NULL },
		[OP_GET] = { "tenant", "paths", NULL },
		[OP_FORK] = { "tenant", "n", NULL },
		[OP_CLOSE] = { "tenant", NULL },
	};
	struct session_plan *p = calloc(1, sizeof(*p));
	json_t *n;
	int err = 0;

	*plan = p;
	if (!p) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	p->body = json_incref(body);
	if (parse_url(c->rq->url, p, rp) || serve_known_keys(body, keys[p->op], rp))
		return -1;
	switch (p->op) {
	case OP_CREATE:
		err = string_field(body, "kernel", &p->kernel, NULL, rp) ||
		      parse_files(body, p, rp);
		if (!err && json_object_get(body, "setup")) {
			const char *setup = NULL;

			err = string_field(body, "setup", &setup, NULL, rp) ||
			      step_timeout(c, body, p, rp);
			p->setup_argv[0] = "sh";
			p->setup_argv[1] = "-c";
			p->setup_argv[2] = (char *)setup;
		}
		break;
	case OP_EXEC:
		err = parse_step(c, body, p, rp);
		break;
	case OP_PUT:
		err = parse_files(body, p, rp);
		if (!err && !p->n_files) {
			serve_error(rp, 400, "\"files\" is required");
			err = -1;
		}
		break;
	case OP_GET:
		err = parse_paths(body, p, rp);
		break;
	case OP_FORK:
		n = json_object_get(body, "n");
		p->n_fork = n ? 0 : 1;
		if (n && json_is_integer(n) && json_integer_value(n) >= 1 &&
		    json_integer_value(n) <= SESSION_MAX)
			p->n_fork = (unsigned)json_integer_value(n);
		if (!p->n_fork) {
			serve_error(rp, 400, "\"n\" must be an integer from 1 to %d", SESSION_MAX);
			err = -1;
		}
		break;
	default:
		break;
	}
	return err ? -1 : 0;
}

static json_t *info_json(const struct session_info *i)
{
	return json_pack("{s:s, s:s, s:s, s:I, s:f, s:I, s:I, s:b}", "session", i->id, "sandbox",
			 i->sandbox, "kernel", i->kernel, "steps", (json_int_t)i->steps, "cpu_s",
			 i->cpu_ms / 1000.0, "age_ms", (json_int_t)i->age_ms, "idle_ms",
			 (json_int_t)i->idle_ms, "busy", i->busy);
}

static const char *step_status(const struct exec_step_result *r)
{
	if (r->timed_out)
		return "timeout";
	if (r->ends)
		return "killed";
	if (r->exited)
		return r->exit_code ? "error" : "ok";
	return "error";
}

static json_t *step_json(const struct exec_step_result *r, const struct session_info *i)
{
	return json_pack(
		"{s:s, s:I, s:s, s:o, s:o, s:o, s:o, s:b, s:b, s:s, s:o, s:o, s:I, s:f, s:b, s:s}",
		"session", i->id, "step", (json_int_t)i->steps, "status", step_status(r),
		"exit_code", r->exited ? json_integer(r->exit_code) : json_null(), "signal",
		r->signal ? json_integer(r->signal) : json_null(), "stdout",
		json_string_lossy(r->out ? r->out : "", r->out_len), "stderr",
		json_string_lossy(r->err ? r->err : "", r->err_len), "stdout_truncated",
		r->out_truncated, "stderr_truncated", r->err_truncated, "cause",
		cause_name(r->cause), "rule",
		rule_name(r->rule) ? json_string(rule_name(r->rule)) : json_null(), "detail",
		r->detail[0] ? json_string_lossy(r->detail, strlen(r->detail)) : json_null(),
		"wall_ms", (json_int_t)r->wall_ms, "cpu_s", r->cpu_ms / 1000.0, "session_ended",
		r->session_over, "outcome_id", r->outcome_id);
}

/* A manager's refusal as HTTP: 503 (with Retry-After) when the node has
 * no sandbox slot left or is stopping. */
static unsigned status_of(int err, const char *detail)
{
	switch (-err) {
	case ENOENT:
		return 404;
	case EBUSY:
		return 409;
	case ENOTDIR: /* the tree the session made is in the way */
	case EISDIR:
	case ELOOP:
	case EEXIST:
	case ENAMETOOLONG:
		return 409;
	case ESRCH:
		return 410;
	case EFBIG:
		return 413;
	case EINVAL:
		return 400;
	case EPERM:
		return strstr(detail, "paused") ? 423 : 403;
	case EUSERS:
		return 429;
	case ENOSPC:
	case EDQUOT:
		return 507;
	case ESHUTDOWN:
	case EAGAIN:
		return 503;
	default:
		return 500;
	}
}

static void refused(struct serve_call *c, int err, const char *detail, struct serve_reply *rp)
{
	unsigned status = status_of(err, detail);

	serve_error(rp, status, "%s", detail);
	if (status == 429 || status == 503)
		rp->retry_after_s = serve_retry_after(c->policy);
}

static void do_create(struct serve_call *c, struct session_plan *p, const struct session_owner *who,
		      struct serve_reply *rp)
{
	struct exec_step setup = { .argv = p->setup_argv, .timeout_ms = p->timeout_ms };
	struct session_create req = { .policy = c->policy,
				      .kernel = p->kernel,
				      .files = p->files,
				      .n_files = p->n_files,
				      .setup = p->setup_argv[0] ? &setup : NULL };
	struct session_info info;
	struct exec_step_result r;
	char detail[EXEC_DETAIL_MAX];
	int err = session_create(c->srv->sessions, who, &req, &info, &r, detail, sizeof(detail));

	if (err) {
		refused(c, err, detail, rp);
		return;
	}
	rp->status = 201;
	rp->body = info_json(&info);
	if (req.setup)
		json_object_set_new(rp->body, "setup", step_json(&r, &info));
	free(r.out);
	free(r.err);
}

static void do_get(struct serve_call *c, struct session_plan *p, const struct session_owner *who,
		   struct serve_reply *rp)
{
	struct sandbox_fetched got[FILES_MAX];
	char detail[EXEC_DETAIL_MAX];
	json_t *files;
	int err;

	memset(got, 0, sizeof(got));
	err = session_get(c->srv->sessions, who, p->id, p->paths, p->n_paths, FETCH_CAP, got,
			  detail, sizeof(detail));
	if (err) {
		refused(c, err, detail, rp);
		goto out;
	}
	files = json_object();
	for (size_t i = 0; i < p->n_paths; i++) {
		char *b64 = got[i].data ? base64_encode(got[i].data, got[i].len, NULL) : NULL;

		json_object_set_new(files, p->paths[i], b64 ? json_string(b64) : json_null());
		free(b64);
	}
	rp->status = 200;
	rp->body = json_pack("{s:s, s:o, s:s}", "session", p->id, "files", files, "encoding",
			     "base64");
out:
	for (size_t i = 0; i < p->n_paths; i++) {
		free(got[i].path);
		free(got[i].data);
	}
}

/* The most sessions a list answers. */
#define LIST_MAX 256

static void session_execute(struct serve_call *c, void *plan, struct serve_reply *rp)
{
	struct session_plan *p = plan;
	struct session_owner who = { .tenant = c->tenant, .run_id = c->run_id };
	struct session_mgr *m = c->srv->sessions;
	char detail[EXEC_DETAIL_MAX];
	int err = 0;

	if (!m) {
		serve_error(rp, 501, "this server keeps no sessions");
		return;
	}
	switch (p->op) {
	case OP_CREATE:
		do_create(c, p, &who, rp);
		return;
	case OP_GET:
		do_get(c, p, &who, rp);
		return;
	case OP_LIST: {
		/* 128 KiB: not on a worker's 256 KiB stack (SG_SERVE_WORKER_STACK). */
		struct session_info *list = calloc(LIST_MAX, sizeof(*list));
		json_t *arr;
		size_t n;

		if (!list) {
			serve_error(rp, 500, "out of memory listing the sessions");
			return;
		}
		n = session_list(m, &who, list, LIST_MAX);
		arr = json_array();
		for (size_t i = 0; i < n && i < LIST_MAX; i++)
			json_array_append_new(arr, info_json(&list[i]));
		free(list);
		rp->status = 200;
		rp->body = json_pack("{s:o}", "sessions", arr);
		return;
	}
	case OP_EXEC: {
		struct exec_step st = { .stdin_data = p->stdin_data,
					.stdin_len = p->stdin_len,
					.timeout_ms = p->timeout_ms };
		struct exec_step_result r;
		struct session_info info;

		err = session_exec(m, &who, p->id, p->code ? NULL : p->argv, p->code, p->code_len,
				   &st, &r, &info, detail, sizeof(detail));
		if (!err) {
			rp->status = 200;
			rp->body = step_json(&r, &info);
		}
		free(r.out);
		free(r.err);
		break;
	}
	case OP_PUT:
		err = session_put(m, &who, p->id, p->files, p->n_files, detail, sizeof(detail));
		if (!err) {
			rp->status = 200;
			rp->body = json_pack("{s:s, s:I}", "session", p->id, "written",
					     (json_int_t)p->n_files);
		}
		break;
	case OP_FORK: {
		char ids[SESSION_FORK_MAX][SG_ID_BUF];
		json_t *arr;

		err = session_fork(m, &who, p->id, p->n_fork, ids, detail, sizeof(detail));
		if (!err) {
			arr = json_array();
			for (unsigned i = 0; i < p->n_fork; i++)
				json_array_append_new(arr, json_string(ids[i]));
			rp->status = 201;
			rp->body = json_pack("{s:s, s:o}", "session", p->id, "forks", arr);
		}
		break;
	}
	case OP_CLOSE:
		err = session_close(m, &who, p->id, detail, sizeof(detail));
		if (!err) {
			rp->status = 200;
			rp->body = json_pack("{s:s, s:s}", "session", p->id, "ended", "closed");
		}
		break;
	}
	if (err)
		refused(c, err, detail, rp);
}

static void session_policy_error(struct serve_call *c, const char *detail, struct serve_reply *rp)
{
	(void)c;
	serve_error(rp, 500, "%s", detail);
}

static void session_free_plan(void *plan)
{
	struct session_plan *p = plan;

	if (!p)
		return;
	/* Every slot: a file refused while parsing leaves its decoded data
	 * one past n_files. */
	for (size_t i = 0; i < FILES_MAX; i++)
		free(p->data[i]);
	json_decref(p->body);
	free(p);
}

const struct serve_endpoint serve_session_endpoint = {
	.mode = "session",
	.body_tenant = true,
	.prepare = session_prepare,
	.execute = session_execute,
	.policy_error = session_policy_error,
	.free_plan = session_free_plan,
};
