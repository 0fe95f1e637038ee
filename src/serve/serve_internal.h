/* Shared by the HTTP server's files (serve*.c) and their unit tests. Not
 * an API: see src/serve/serve.h.
 *
 *   serve.c             lifecycle: start, drain, stop; /healthz, /readyz
 *   serve_conn.c        the listening socket: accept, the connection cap
 *                       (503), header deadlines
 *   serve_http.c        libmicrohttpd: requests, bodies, workers, replies
 *   serve_auth.c        tenant tokens
 *   serve_route.c       routing, authentication, tenant, policy, admission
 *   serve_gate.c        the concurrency caps and the bounded queue
 *   serve_lang.c        languages: what each one runs and execs
 *   serve_lang_find.c   finding the toolchains on this node
 *   serve_runcode.c     POST /run_code: the request
 *   serve_runcode_run.c POST /run_code: compile, run, the response
 *   serve_native.c      POST /v1/score, /v1/verify
 *   serve_session.c     POST /v1/sessions...: environments' sessions
 *   serve_openrlhf.c    POST /openrlhf/get_reward: OpenRLHF's, via /v1/score
 *   serve_tci.c         POST /tci/execute: Together's, via /run_code */
#ifndef SG_SERVE_INTERNAL_H
#define SG_SERVE_INTERNAL_H
#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"
#include "exec/verify_compile.h"
#include "policy/policy.h"
#include "serve.h"
#include "serve_auth.h"
#include "lib/ids.h"
#include "control/agent_shared.h"

struct session_mgr;

#define SERVE_TENANT_HEADER      "X-Sandguard-Tenant"
#define SERVE_RUN_ID_HEADER      "X-Sandguard-Run-Id"
#define SERVE_REQUEST_ID_HEADER  "X-Sandguard-Request-Id"
#define SERVE_REQUEST_ID_HEADER2 "X-Request-Id" /* what proxies and tracers set */
#define SERVE_RETRY_AFTER_MAX_S  60
/* What verl's client waits beyond compile_timeout + run_timeout (its
 * API_TIMEOUT), and how long before that a /run_code must be done: the
 * sandbox's setup and teardown, and the reply's way back. */
#define SERVE_CLIENT_SLACK_MS  10000
#define SERVE_FINISH_MARGIN_MS 3000

/* ---- admission (serve_gate.c) ----------------------------------------- */

enum gate_verdict {
	GATE_OK = 0,
	GATE_TENANT_FULL,  /* the tenant's cap, no place within its wait */
	GATE_TENANT_QUEUE, /* the tenant's share of the queue is full */
	GATE_SERVER_FULL,  /* the server's cap, no place within the wait */
	GATE_SERVER_QUEUE, /* the server's queue is full */
	GATE_CLOSED,       /* shutting down */
	GATE_GONE,         /* the client hung up while waiting */
};

struct gate_wait {
	uint64_t wait_ms;     /* longest wait in line; 0: none */
	uint64_t expected_ms; /* how long it may run once started (Retry-After) */
	bool (*gone)(void *arg);
	void *gone_arg;
};

/* A running request's place; held from gate_enter() to gate_leave(). */
struct gate_ticket {
	struct gate_tenant *tenant;
	uint64_t ends_ms; /* CLOCK_MONOTONIC: due to end by then at the latest */
	struct gate_ticket *prev, *next;
};

struct serve_gate;

struct serve_gate *gate_new(uint32_t max_running, uint32_t max_waiting, uint32_t tenant_queue);
void gate_free(struct serve_gate *g);

/* Take a running place for `tenant` (whose cap is tenant_cap), waiting in
 * FIFO order as `how` allows when a cap is reached. A waiter blocked only
 * by its own tenant's cap does not hold back the requests of other tenants
 * behind it. GATE_OK means the caller must gate_leave(ticket) later. */
enum gate_verdict gate_enter(struct serve_gate *g, const char *tenant, uint32_t tenant_cap,
			     const struct gate_wait *how, struct gate_ticket *ticket);
void gate_leave(struct serve_gate *g, struct gate_ticket *ticket);
/* Seconds until the first running request is due to end, 1..60. */
unsigned gate_retry_after_s(struct serve_gate *g);

/* Refuse new requests and wake every waiter with GATE_CLOSED. */
void gate_close(struct serve_gate *g);
void gate_counts(struct serve_gate *g, uint32_t *running, uint32_t *waiting);

/* ---- languages (serve_lang.c, serve_lang_find.c) ---------------------- */

enum serve_lang_id {
	LANG_PYTHON = 0,
	LANG_CPP,
	LANG_JAVA,
	LANG_NODEJS,
	LANG_GO,
	LANG_RUST,
	LANG_BASH,
	LANG__COUNT
};

#define SERVE_LANG_TOOLS 10
#define SERVE_LANG_ARGV  16

/* What this node runs each language with, found once at start. */
struct serve_langs {
	bool enabled[LANG__COUNT];
	char python[PATH_MAX], bash[PATH_MAX], node[PATH_MAX], java[PATH_MAX];
	char cxx[PATH_MAX], rustc[PATH_MAX], go[PATH_MAX];
	char cc[PATH_MAX];     /* rustc's linker, resolved (not /etc/alternatives) */
	char env[PATH_MAX];    /* /usr/bin/env: sets a toolchain's variables */
	char loader[PATH_MAX]; /* runs a compiled program (see serve_lang.c) */
	/* The libraries SandboxFusion's images ship, where this node has
	 * them (serve_lang_find.c): "" when it has none. */
	char java_libs[PATH_MAX];   /* jars for javac's and java's class path, ':' */
	char node_path[PATH_MAX];   /* "NODE_PATH=<Debian's node modules>" */
	char python_path[PATH_MAX]; /* "PYTHONPATH=<requests and its imports>" */
	/* Every program a language execs, for the exec.allow check. */
	char tools[LANG__COUNT][SERVE_LANG_TOOLS][PATH_MAX];
	int n_tools[LANG__COUNT];
};

/* One request's steps: argv for each sandbox, built for its limits. */
struct lang_plan {
	char *compile[SERVE_LANG_ARGV]; /* compile[0] NULL: no compile step */
	char *run[SERVE_LANG_ARGV];
	const char *source;   /* where the code goes: "main.py", "Main.java" */
	const char *artifact; /* what the compile step leaves for the run */
	unsigned artifact_mode;
	struct sandbox_file setup[2]; /* files the compile step needs too */
	size_t n_setup;
	char text[8][64]; /* storage of the formatted arguments */
	char linker[PATH_MAX + 8];
	char classpath[PATH_MAX + 16]; /* java's run: main.jar and the node's jars */
};

/* `list`: comma-separated names ("python,cpp"). Finds each language's
 * programs. 0, or -EINVAL / -ENOENT with `err` set. */
int serve_langs_init(struct serve_langs *l, const char *list, char *err, size_t err_len);
/* Find `id`'s programs (serve_lang_find.c). 0, or -ENOENT with `err`. */
int serve_lang_find(struct serve_langs *l, enum serve_lang_id id, char *err, size_t err_len);
const char *serve_lang_name(enum serve_lang_id id);
const char *serve_lang_source(enum serve_lang_id id); /* "main.py", "Main.java" */
bool serve_lang_compiled(enum serve_lang_id id);      /* has a compile step */
/* The least limits.output_bytes the language's programs fit in. */
uint64_t serve_lang_min_output(enum serve_lang_id id);
/* LANG_* for a request's "language" (SandboxFusion's names and aliases),
 * or -1 when sandguard knows no such language. */
int serve_lang_lookup(const char *name);
/* The steps of `id` for a run with memory_mb of memory and cpus cores,
 * for a tenant with policy `policy` (NULL: one that may exec anything). */
void serve_lang_plan(const struct serve_langs *l, enum serve_lang_id id,
		     const struct sg_policy *policy, uint64_t memory_mb, unsigned cpus,
		     struct lang_plan *p);
/* python's argv up to the script: "<env> PYTHONPATH=<dir> <python3>" when
 * this node has the runtime libraries and the policy (NULL: any) lets
 * its tenant run env, else "<python3>". Sets argv[0..], returns how many. */
int serve_lang_python(const struct serve_langs *l, const struct sg_policy *policy, char **argv);
/* The scratch paths the language writes itself (the source, what the
 * compiler leaves, its setup files): a request's files may not use them. */
#define SERVE_LANG_PATHS 5
size_t serve_lang_paths(enum serve_lang_id id, const char *paths[SERVE_LANG_PATHS]);
/* NULL when every program the language execs is allowed by the policy's
 * exec.allow; else the first one that is not. */
const char *serve_lang_denied(const struct serve_langs *l, enum serve_lang_id id,
			      const struct sg_policy *p);
/* An exec.allow glob matches `path` or the file it resolves to. */
bool serve_exec_allowed(const struct sg_policy *p, const char *path);

/* ---- requests and replies (serve_route.c) ----------------------------- */

struct serve_http;

struct serve {
	struct serve_config cfg;
	char policy_dir[PATH_MAX];
	struct serve_gate *gate;
	struct serve_langs langs;
	struct serve_tokens *tokens; /* NULL: no authentication */
	char host[256];              /* executor_pod_name */
	uint32_t id_prefix;          /* request ids: sg-<prefix>-<seq> */
	atomic_ulong seq;
	atomic_bool draining;
	struct serve_http *http;
	uint16_t port;
	/* Every run's connection to the agent, and the sandboxes prepared
	 * ahead of demand (NULL when cfg.run is a test's fake). */
	struct agent_shared agent;
	struct pool *pool;
	struct session_mgr *sessions;        /* environments' sessions (NULL with a fake cfg.run) */
	struct run_build_cache *build_cache; /* NULL: off (run_build_cache.h) */
	/* Counters for /healthz (and the tests). */
	atomic_ulong n_unauthorized; /* 401 and 403 for credentials */
	atomic_ulong n_late;         /* /run_code refused 504: could not start in time */
	atomic_ulong n_gone;         /* dropped from the queue: the client left */
};

struct serve_request {
	const char *method;
	const char *url;   /* the path, after any /t/<token> prefix */
	const char *token; /* from /t/<token>/ or Authorization: Bearer; never logged */
	size_t token_len;
	bool token_in_path;        /* the access log shows "/t/..." before url */
	const char *tenant_header; /* NULL when absent */
	const char *run_id_header;
	const char *request_id_header;
	const char *body;
	size_t body_len;
	uint64_t arrived_ms;            /* CLOCK_MONOTONIC when the headers were in; 0: now */
	bool (*client_gone)(void *arg); /* NULL: cannot tell */
	void *gone_arg;
};

struct serve_reply {
	unsigned status;
	json_t *body;                   /* owned; sent as application/json */
	unsigned retry_after_s;         /* 0: no Retry-After */
	const char *allow;              /* 405: the Allow header */
	bool challenge;                 /* 401: WWW-Authenticate: Bearer */
	bool no_reply;                  /* the client is gone: close without a reply */
	int real_digits;                /* significant digits of reals; 0: round-trip exact */
	char request_id[SG_ID_MAX + 1]; /* echoed as X-Sandguard-Request-Id; "" none */
};

/* When a /run_code request is still worth starting. */
struct serve_budget {
	uint64_t latest_start_ms; /* CLOCK_MONOTONIC; 0: no bound */
	uint64_t run_latest_ms;   /* the same for the run step (after a compile) */
	uint64_t client_ms;       /* what the client waits, from its arrival */
	uint64_t client_end_ms;   /* CLOCK_MONOTONIC: when the client gives up, less the margin */
	uint64_t worst_ms;        /* the longest the request can run once started */
};

/* Everything a POST handler knows about its request once the body parsed,
 * the tenant is known and its policy loaded. */
struct serve_call {
	struct serve *srv;
	const struct serve_request *rq;
	char tenant[SG_TENANT_MAX];
	char request_id[SG_ID_MAX + 1];
	const char *run_id; /* NULL when none */
	const struct sg_policy *policy;
	struct agent_conn *agent; /* set for execute(); NULL: none answers */
	struct serve_budget budget;
	/* CLOCK_MONOTONIC ms: admitted by the server's gate, and done
	 * executing (0: not reached); the access log shows where time went. */
	uint64_t admitted_ms, executed_ms;
};

/* One POST endpoint: validate (4xx, never booked), then run admitted. */
struct serve_endpoint {
	const char *mode; /* booking mode: "run", "batch", "verify" */
	bool body_tenant; /* the body may name the tenant */
	/* The status of every "not now" (caps, queue, the node's admission,
	 * shutting down): 504 for /run_code, which verl retries; 0 for 429
	 * (the tenant's cap) or 503 (the server's). */
	unsigned busy_status;
	/* 0 with *plan set, or -1 with the 4xx reply filled in. */
	int (*prepare)(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp);
	/* Optional: fill c->budget (when the request stops being worth it). */
	void (*budget)(struct serve_call *c, void *plan);
	void (*execute)(struct serve_call *c, void *plan, struct serve_reply *rp);
	/* The tenant's policy could not be loaded (a platform error). */
	void (*policy_error)(struct serve_call *c, const char *detail, struct serve_reply *rp);
	void (*free_plan)(void *plan);
};

extern const struct serve_endpoint serve_runcode_endpoint;
extern const struct serve_endpoint serve_score_endpoint;
extern const struct serve_endpoint serve_verify_endpoint;
extern const struct serve_endpoint serve_session_endpoint; /* /v1/sessions... (serve_session.c) */
extern const struct serve_endpoint serve_openrlhf_endpoint;
extern const struct serve_endpoint serve_tci_endpoint;
/* The paths the together SDK posts a TCI call to (serve_tci.c). */
bool serve_tci_path(const char *url);

/* What the headers alone decide: which handler, and whose request. */
enum serve_route_kind { ROUTE_HEALTHZ, ROUTE_READYZ, ROUTE_POST };

struct serve_route {
	enum serve_route_kind kind;
	const struct serve_endpoint *ep;
	char tenant[SG_TENANT_MAX]; /* the token's, or the path's; "" none */
	bool authenticated;         /* tenant comes from a token */
};

/* Phase 1, from the headers: route, method, credentials. 0 to go on (read
 * the body, then phase 2), or -1 with the reply to send (4xx, /healthz):
 * such a request is never booked and touches no tenant state. */
int serve_route(struct serve *s, const struct serve_request *rq, struct serve_route *rt,
		struct serve_reply *rp);
/* Phase 2: parse, validate, admit, run (or /readyz). */
void serve_handle_routed(struct serve *s, const struct serve_route *rt,
			 const struct serve_request *rq, struct serve_reply *rp);
/* Both phases: the whole request, without sockets (the unit tests). */
void serve_handle(struct serve *s, const struct serve_request *rq, struct serve_reply *rp);
void serve_reply_free(struct serve_reply *rp);
/* The path as the access log shows it: "/t/..." for a token in the path. */
void serve_shown_url(const struct serve_request *rq, char *buf, size_t len);

/* /healthz and /readyz (serve.c). */
void serve_healthz(struct serve *s, struct serve_reply *rp);
void serve_readyz(struct serve *s, struct serve_reply *rp);

/* {"error": msg} with `status`. */
void serve_error(struct serve_reply *rp, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Retry-After for a refusal: the tenant's deadline (a running request
 * frees its place by then), in seconds, 1..SERVE_RETRY_AFTER_MAX_S. */
unsigned serve_retry_after(const struct sg_policy *p);
/* The answer to "not now" for this endpoint: `status` (429/503) unless
 * the endpoint answers busy_status (504) to everything of the kind. */
void serve_busy(struct serve_call *c, const struct serve_endpoint *ep, unsigned status,
		unsigned retry_after_s, struct serve_reply *rp, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* Request fields the endpoints share: optional strings of 1 to
 * SG_ID_MAX bytes, and a positive integer timeout within the policy's.
 * Return 0, or -1 with a 400 in rp. */
int serve_opt_id(json_t *body, const char *key, const char **out, struct serve_reply *rp);
int serve_opt_timeout(json_t *body, const struct sg_policy *p, uint64_t *ms,
		      struct serve_reply *rp);
/* Reject keys outside `known` (NULL-terminated), naming them all. */
int serve_known_keys(json_t *body, const char *const *known, struct serve_reply *rp);

/* ---- /run_code internals, for unit tests (serve_runcode*.c) ----------- */

#define RUNCODE_MAX_FILES 256
#define RUNCODE_MAX_FETCH 16

struct runcode_plan {
	enum serve_lang_id lang;
	double compile_timeout_s; /* as the client sent them (it waits for their sum) */
	double run_timeout_s;
	uint64_t compile_timeout_ms; /* after the policy's clamp */
	uint64_t run_timeout_ms;
	uint64_t memory_mb; /* 0: the policy's */
	const char *code;   /* points into the body */
	size_t code_len;
	const char *stdin_data;
	size_t stdin_len;
	struct sandbox_file *files; /* the code file first, then the request's */
	size_t n_files;
	const char **fetch;                    /* scratch-relative, what the sandbox reads back */
	const char **fetch_names;              /* as the request named them, the reply's keys */
	char *fetch_mapped[RUNCODE_MAX_FETCH]; /* owned: absolute names mapped */
	size_t n_fetch;
	json_t *body;   /* holds the strings above */
	char *fn_name;  /* call-based (serve_runcode_call.c); NULL: a plain run */
	uint8_t grader; /* enum sg_grader, with fn_name */
};


/* The request's "language": known, enabled here, allowed by the tenant's
 * exec.allow, fits its output cap; plan->lang set. 0, or -1 with a 400. */
int runcode_parse_language(const struct serve_langs *langs, const struct sg_policy *p,
			   const char *tenant, json_t *body, struct runcode_plan *plan,
			   struct serve_reply *rp);
/* Parse and check a /run_code body. 0, or -1 with a 400 in rp. */
int runcode_parse(const struct serve_langs *langs, const struct sg_policy *p, const char *tenant,
		  json_t *body, struct runcode_plan *plan, struct serve_reply *rp);
void runcode_plan_free(struct runcode_plan *plan);
/* "fn_name" and "grader" (serve_runcode_call.c): 0, or -1 with a 400. */
int runcode_call_parse(const struct sg_policy *p, json_t *body, struct runcode_plan *plan,
		       struct serve_reply *rp);
/* The run's command under the harness, and its stdout without the
 * harness's first line; both do nothing without fn_name. */
void runcode_call_argv(const struct runcode_plan *plan, struct lang_plan *lp);
void runcode_call_stdout(const struct runcode_plan *plan, struct exec_run_result *r);
/* When a request arriving at arrived_ms stops being worth starting. */
void runcode_budget(const struct runcode_plan *plan, uint64_t arrived_ms, struct serve_budget *b);
/* Compile (when the language has that step) and run (serve_runcode_run.c). */
void runcode_execute(struct serve_call *c, void *plan, struct serve_reply *rp);
/* The response skeleton, and the SandboxError of an unloadable policy. */
json_t *runcode_response_new(struct serve_call *c, const char *status, const char *message);

/* run_result / compile_result: {status, execution_time, return_code,
 * stdout, stderr, stdout_truncated, stderr_truncated}. */
json_t *runcode_result_json(const struct exec_run_result *r);
/* "Success", "Failed" or "SandboxError" for a run's cause. */
const char *runcode_status(enum sg_cause cause);

/* ---- /v1/verify in any language (serve_verify_lang.c) ----------------- */

/* How a verifier request's code is built and run: ctx.build, and
 * lp.run as its argv. */
struct verify_lang {
	struct lang_plan lp;
	struct sandbox_file files[3]; /* the source, then the language's setup */
	struct exec_build build;
};

/* For "code" with a "language" other than python. 0 with *out
 * (free()), or -1 with a 4xx in rp. */
int verify_lang_plan(struct serve_call *c, json_t *body, struct verify_lang **out,
		     struct serve_reply *rp);

#endif
