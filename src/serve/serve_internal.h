/* Shared by the HTTP server's files (serve*.c) and their unit tests. Not
 * an API: see src/serve/serve.h.
 *
 *   serve.c          libmicrohttpd: connections, bodies, lifecycle
 *   serve_route.c    routing, tenant, policy, admission, replies
 *   serve_gate.c     the concurrency caps and the bounded queue
 *   serve_lang.c     languages: what each one runs and execs
 *   serve_runcode.c  POST /run_code
 *   serve_native.c   POST /v1/score, /v1/verify */
#ifndef SG_SERVE_INTERNAL_H
#define SG_SERVE_INTERNAL_H
#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"
#include "policy/policy.h"
#include "serve.h"
#include "lib/ids.h"

#define SERVE_TENANT_HEADER     "X-Sandguard-Tenant"
#define SERVE_RUN_ID_HEADER     "X-Sandguard-Run-Id"
#define SERVE_REQUEST_ID_HEADER "X-Sandguard-Request-Id"
#define SERVE_RETRY_AFTER_MAX_S 60

/* ---- admission (serve_gate.c) ----------------------------------------- */

enum gate_verdict {
	GATE_OK = 0,
	GATE_TENANT_FULL,  /* the tenant's cap, no place within its wait: 429 */
	GATE_TENANT_QUEUE, /* the tenant's share of the queue is full: 429 */
	GATE_SERVER_FULL,  /* the server's cap, no place within the wait: 503 */
	GATE_SERVER_QUEUE, /* the server's queue is full: 503 */
	GATE_CLOSED,       /* shutting down: 503 */
};

struct serve_gate;

struct serve_gate *gate_new(uint32_t max_running, uint32_t max_waiting, uint32_t tenant_queue);
void gate_free(struct serve_gate *g);

/* Take a running place for `tenant` (whose cap is tenant_cap), waiting in
 * FIFO order up to wait_ms when a cap is reached. A waiter blocked only by
 * its own tenant's cap does not hold back the requests of other tenants
 * behind it. GATE_OK means the caller must gate_leave() later. */
enum gate_verdict gate_enter(struct serve_gate *g, const char *tenant, uint32_t tenant_cap,
			     uint64_t wait_ms);
void gate_leave(struct serve_gate *g, const char *tenant);

/* Refuse new requests and wake every waiter with GATE_CLOSED. */
void gate_close(struct serve_gate *g);
void gate_counts(struct serve_gate *g, uint32_t *running, uint32_t *waiting);

/* ---- languages (serve_lang.c) ----------------------------------------- */

enum serve_lang_id { LANG_PYTHON = 0, LANG_CPP, LANG__COUNT };

#define SERVE_LANG_TOOLS 8

struct serve_langs {
	bool enabled[LANG__COUNT];
	char python[PATH_MAX]; /* the interpreter */
	char cxx[PATH_MAX];    /* the C++ compiler driver */
	char loader[PATH_MAX]; /* runs a compiled program (see serve_lang.c) */
	/* Every program a language execs, for the exec.allow check. */
	char tools[LANG__COUNT][SERVE_LANG_TOOLS][PATH_MAX];
	int n_tools[LANG__COUNT];
};

/* `list`: comma-separated names ("python,cpp"). Finds the interpreter,
 * the compiler and its helpers. 0, or -EINVAL / -ENOENT with `err` set. */
int serve_langs_init(struct serve_langs *l, const char *list, char *err, size_t err_len);
const char *serve_lang_name(enum serve_lang_id id);
/* LANG_* for a request's "language", or -1 when sandguard knows no such
 * language (whether or not this server enables it). */
int serve_lang_lookup(const char *name);
/* NULL when every program the language execs is allowed by the policy's
 * exec.allow; else the first one that is not. */
const char *serve_lang_denied(const struct serve_langs *l, enum serve_lang_id id,
			      const struct sg_policy *p);
/* An exec.allow glob matches `path` or the file it resolves to. */
bool serve_exec_allowed(const struct sg_policy *p, const char *path);

/* ---- requests and replies (serve_route.c) ----------------------------- */

struct serve {
	struct serve_config cfg;
	char policy_dir[PATH_MAX];
	struct serve_gate *gate;
	struct serve_langs langs;
	char host[256];     /* executor_pod_name */
	uint32_t id_prefix; /* request ids: sg-<prefix>-<seq> */
	atomic_ulong seq;
	atomic_uint in_flight; /* requests begun and not yet answered */
	struct MHD_Daemon *daemon;
	uint16_t port;
};

struct serve_request {
	const char *method;
	const char *url;
	const char *tenant_header; /* NULL when absent */
	const char *run_id_header;
	const char *request_id_header;
	const char *body;
	size_t body_len;
};

struct serve_reply {
	unsigned status;
	json_t *body;           /* owned; sent as application/json */
	unsigned retry_after_s; /* 0: no Retry-After */
	const char *allow;      /* 405: the Allow header */
	int real_digits;        /* significant digits of reals; 0: round-trip exact */
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
};

/* One POST endpoint: validate (4xx, never booked), then run admitted. */
struct serve_endpoint {
	const char *mode; /* booking mode: "run", "batch", "verify" */
	bool body_tenant; /* the body may name the tenant */
	/* 0 with *plan set, or -1 with the 4xx reply filled in. */
	int (*prepare)(struct serve_call *c, json_t *body, void **plan, struct serve_reply *rp);
	void (*execute)(struct serve_call *c, void *plan, struct serve_reply *rp);
	/* The tenant's policy could not be loaded (a platform error). */
	void (*policy_error)(struct serve_call *c, const char *detail, struct serve_reply *rp);
	void (*free_plan)(void *plan);
};

extern const struct serve_endpoint serve_runcode_endpoint;
extern const struct serve_endpoint serve_score_endpoint;
extern const struct serve_endpoint serve_verify_endpoint;

/* Route, validate, admit, run: the whole request, without sockets. */
void serve_handle(struct serve *s, const struct serve_request *rq, struct serve_reply *rp);
void serve_reply_free(struct serve_reply *rp);

/* {"error": msg} with `status`. */
void serve_error(struct serve_reply *rp, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Retry-After for a refusal: the tenant's deadline (a running request
 * frees its place by then), in seconds, 1..SERVE_RETRY_AFTER_MAX_S. */
unsigned serve_retry_after(const struct sg_policy *p);

/* Request fields the endpoints share: optional strings of 1 to
 * SG_ID_MAX bytes, and a positive integer timeout within the policy's.
 * Return 0, or -1 with a 400 in rp. */
int serve_opt_id(json_t *body, const char *key, const char **out, struct serve_reply *rp);
int serve_opt_timeout(json_t *body, const struct sg_policy *p, uint64_t *ms,
		      struct serve_reply *rp);
/* Reject keys outside `known` (NULL-terminated), naming them all. */
int serve_known_keys(json_t *body, const char *const *known, struct serve_reply *rp);

/* ---- /run_code internals, for unit tests (serve_runcode.c) ------------ */

struct runcode_plan {
	enum serve_lang_id lang;
	uint64_t compile_timeout_ms;
	uint64_t run_timeout_ms; /* before the policy's clamp */
	uint64_t memory_mb;      /* 0: the policy's */
	const char *code;        /* points into the body */
	size_t code_len;
	const char *stdin_data;
	size_t stdin_len;
	struct sandbox_file *files; /* the code file first, then the request's */
	size_t n_files;
	const char **fetch;
	size_t n_fetch;
	json_t *body; /* holds the strings above */
};

#define RUNCODE_MAX_FILES 256
#define RUNCODE_MAX_FETCH 16

/* Parse and check a /run_code body. 0, or -1 with a 400 in rp. */
int runcode_parse(const struct serve_langs *langs, const struct sg_policy *p, const char *tenant,
		  json_t *body, struct runcode_plan *plan, struct serve_reply *rp);
void runcode_plan_free(struct runcode_plan *plan);

/* run_result / compile_result: {status, execution_time, return_code,
 * stdout, stderr, stdout_truncated, stderr_truncated}. */
json_t *runcode_result_json(const struct exec_run_result *r);
/* "Success", "Failed" or "SandboxError" for a run's cause. */
const char *runcode_status(enum sg_cause cause);

#endif
