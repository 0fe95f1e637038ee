/* `sandguard serve`'s lifecycle: configuration checks, start, drain and
 * stop, and the two probes.
 *
 * Without --tokens anyone who reaches the port acts as any tenant, so the
 * server then refuses to listen anywhere but loopback. The descriptor
 * limit is raised to its hard limit, and the connection cap lowered (with
 * a warning) if the sandboxes' own descriptors would not fit beside it.
 *
 * GET /healthz (liveness): 200 while the process answers, with counts.
 * GET /readyz (readiness): 503 while draining, while no token is loaded,
 * while the outcome journal's disk is below its reserve (the executor
 * refuses every run then), and while the node's agent is not enforcing
 * (no agent answers, or it has no programs attached) if any policy in the
 * policy directory requires it (require_agent): a Service then sends the
 * trainer's requests to nodes that can run them. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>
#include "control/agent_client.h"
#include "lib/http_listen.h"
#include "lib/log.h"
#include "serve_http.h"
#include "serve_internal.h"
#include "telemetry/journal.h"
#include "session/session.h"
#include "run_build_cache.h"
#include "pool/pool.h"

#define FDS_RESERVED    64 /* logs, policy files, the agent socket, ... */
#define FDS_PER_SANDBOX 32 /* pipes, cgroup files, the slot lock, scratch */
#define LISTEN_BACKLOG  1024
#define REPLY_GRACE_S   10 /* after the last worker, for replies still going out */

static bool loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* Tokens, or loopback only. 0 or -EINVAL with a message logged. */
static int setup_auth(struct serve *s)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[600];
	int ret;

	if (s->cfg.tokens_dir) {
		ret = serve_tokens_open(s->cfg.tokens_dir, &s->tokens, err, sizeof(err));
		if (ret)
			sg_error("serve: --tokens: %s", err);
		return ret ? -EINVAL : 0;
	}
	ret = http_parse_addr(s->cfg.listen, &ss, &len);
	if (ret)
		return ret;
	if (!loopback(&ss)) {
		sg_error("serve: refusing to serve %s without authentication: anyone who reaches "
			 "it could act as any tenant. Give --tokens DIR (one file of tokens per "
			 "tenant; in Kubernetes a Secret, see deploy/README.md), or listen on "
			 "127.0.0.1 / [::1]",
			 s->cfg.listen);
		return -EINVAL;
	}
	sg_warn("serve: no --tokens: every client on this host may act as any tenant");
	return 0;
}

/* Every connection is a descriptor, and so are each running sandbox's
 * pipes and cgroup files: make room, or lower the connection cap. */
static void fit_descriptors(struct serve_config *cfg)
{
	uint64_t need_sandboxes = FDS_RESERVED + (uint64_t)FDS_PER_SANDBOX * cfg->max_concurrency;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur >= need_sandboxes + cfg->max_connections)
		return;
	if (rl.rlim_cur <= need_sandboxes + 16) {
		sg_warn("serve: the descriptor limit %llu leaves no room for connections beside "
			"%u running sandboxes; keeping --max-connections 16",
			(unsigned long long)rl.rlim_cur, cfg->max_concurrency);
		cfg->max_connections = 16;
		return;
	}
	sg_warn("serve: --max-connections %u lowered to %llu: the descriptor limit is %llu "
		"(ulimit -n), and %llu go to running sandboxes",
		cfg->max_connections, (unsigned long long)(rl.rlim_cur - need_sandboxes),
		(unsigned long long)rl.rlim_cur, (unsigned long long)need_sandboxes);
	cfg->max_connections = (uint32_t)(rl.rlim_cur - need_sandboxes);
}

static void defaults(struct serve_config *cfg)
{
	if (!cfg->max_body)
		cfg->max_body = SERVE_MAX_BODY_DEFAULT;
	if (!cfg->max_buffered)
		cfg->max_buffered = SERVE_MAX_BUFFERED_DEFAULT;
	if (!cfg->max_concurrency)
		cfg->max_concurrency = 2;
	if (!cfg->max_connections)
		cfg->max_connections = SERVE_MAX_CONNECTIONS_DEFAULT;
	if (!cfg->max_tests)
		cfg->max_tests = SERVE_MAX_TESTS_DEFAULT;
	if (!cfg->header_timeout_s)
		cfg->header_timeout_s = SERVE_HEADER_TIMEOUT_S;
	if (!cfg->body_timeout_s)
		cfg->body_timeout_s = SERVE_BODY_TIMEOUT_S;
	if (!cfg->idle_timeout_s)
		cfg->idle_timeout_s = SERVE_IDLE_TIMEOUT_S;
	if (!cfg->languages)
		cfg->languages = SERVE_LANGUAGES_DEFAULT;
}

static void serve_free(struct serve *s)
{
	session_mgr_stop(s->sessions);
	pool_stop(s->pool);
	agent_shared_close(&s->agent);
	run_build_cache_free(s->build_cache);
	serve_tokens_free(s->tokens);
	gate_free(s->gate);
	free(s);
}

int serve_start(const struct serve_config *cfg, struct serve **out)
{
	struct serve *s = calloc(1, sizeof(*s));
	char err[512];
	int fd = -1, ret;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	defaults(&s->cfg);
	snprintf(s->policy_dir, sizeof(s->policy_dir), "%s",
		 cfg->policy_dir ? cfg->policy_dir : policy_dir_default());
	s->cfg.policy_dir = s->policy_dir;
	agent_shared_init(&s->agent);
	ret = serve_langs_init(&s->langs, s->cfg.languages, err, sizeof(err));
	if (ret) {
		sg_error("serve: %s", err);
		serve_free(s);
		return ret;
	}
	/* What a killed server left is reaped by the pool's thread, once a
	 * second, from its start. */
	if (!s->cfg.run) {
		ret = pool_start(&(struct pool_opts){ .agent = &s->agent }, &s->pool, err,
				 sizeof(err));
		if (!ret)
			ret = session_mgr_start(&s->agent, &s->sessions, err, sizeof(err));
		if (ret) {
			sg_error("serve: %s", err);
			serve_free(s);
			return ret;
		}
	}
	/* A test's fake runner builds nothing worth keeping. */
	ret = run_build_cache_open(s->cfg.build_cache_dir, s->cfg.run ? 0 : s->cfg.build_cache_mb,
				   &s->build_cache, err, sizeof(err));
	if (ret && !s->cfg.build_cache_dir) { /* the default place: run without */
		sg_warn("serve: no /run_code build cache: %s", err);
	} else if (ret) {
		sg_error("serve: --build-cache: %s", err);
		serve_free(s);
		return ret;
	}
	ret = setup_auth(s);
	if (ret) {
		serve_free(s);
		return ret;
	}
	fit_descriptors(&s->cfg);
	if (gethostname(s->host, sizeof(s->host)))
		snprintf(s->host, sizeof(s->host), "unknown");
	if (getrandom(&s->id_prefix, sizeof(s->id_prefix), 0) != sizeof(s->id_prefix))
		s->id_prefix = (uint32_t)getpid();
	s->gate = gate_new(s->cfg.max_concurrency, s->cfg.queue, s->cfg.tenant_queue);
	if (!s->gate) {
		serve_free(s);
		return -ENOMEM;
	}
	ret = http_listen("serve", s->cfg.listen, LISTEN_BACKLOG, &fd, &s->port);
	if (!ret)
		ret = serve_http_start(s, fd, &s->http);
	if (ret) {
		serve_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

uint16_t serve_port(const struct serve *s)
{
	return s->port;
}

void serve_stop(struct serve *s)
{
	if (!s)
		return;
	atomic_store(&s->draining, true);
	gate_close(s->gate);
	serve_http_stop(s->http, REPLY_GRACE_S);
	serve_free(s);
}

/* ---- probes ------------------------------------------------------------ */

void serve_healthz(struct serve *s, struct serve_reply *rp)
{
	struct serve_http_counts hc = { 0 };
	uint32_t running, waiting;

	gate_counts(s->gate, &running, &waiting);
	if (s->http)
		serve_http_counts(s->http, &hc);
	rp->status = 200;
	rp->body = json_pack("{s:s, s:i, s:i, s:b, s:i, s:I, s:I, s:I, s:I, s:I}", "status", "ok",
			     "running", (int)running, "waiting", (int)waiting, "draining",
			     atomic_load(&s->draining), "connections", (int)hc.connections,
			     "refused_connections", (json_int_t)hc.refused_connections,
			     "header_timeouts", (json_int_t)hc.header_timeouts, "unauthorized",
			     (json_int_t)atomic_load(&s->n_unauthorized), "late",
			     (json_int_t)atomic_load(&s->n_late), "gone",
			     (json_int_t)atomic_load(&s->n_gone));
}

/* The policy (by file name) in the policy directory that requires the
 * agent, if any; an unreadable file counts as requiring it (the safe
 * side: requests of that tenant would fail anyway). */
static bool agent_required(const char *dir, char *which, size_t len)
{
	struct sg_policy *p = malloc(sizeof(*p));
	struct sg_policy_error perr;
	struct dirent *de;
	DIR *d = opendir(dir);
	bool required = false;

	if (!p || !d) {
		free(p);
		if (d)
			closedir(d);
		return false; /* no directory: every tenant has the embedded default */
	}
	while (!required && (de = readdir(d))) {
		size_t n = strlen(de->d_name);
		char path[PATH_MAX];

		if (de->d_name[0] == '.' || n < 6 || strcmp(de->d_name + n - 5, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		required = policy_load_file(path, p, &perr) != 0 || p->require_agent;
		if (required)
			snprintf(which, len, "%s", de->d_name);
	}
	closedir(d);
	free(p);
	return required;
}

/* The agent answers and has programs attached (what `status --check`
 * checks). */
static bool agent_enforcing(char *why, size_t len)
{
	struct agent_conn *a = agent_connect(NULL);
	char *text = NULL;
	json_t *st;
	bool ok;

	if (!a) {
		snprintf(why, len, "no agent answers on its control socket");
		return false;
	}
	if (agent_status(a, &text)) {
		agent_close(a);
		snprintf(why, len, "the agent does not answer its status");
		return false;
	}
	agent_close(a);
	st = json_loads(text, 0, NULL);
	free(text);
	ok = json_integer_value(json_object_get(st, "links")) > 0;
	if (!ok)
		snprintf(why, len, "the agent has no programs attached");
	json_decref(st);
	return ok;
}

/* The outcome journal's disk is below its reserve: the executor refuses
 * every run then (platform_error naming the disk), so take no traffic. */
static bool journal_full(char *why, size_t len)
{
	struct journal j;
	uint64_t free_bytes = 0;

	if (journal_init(&j, NULL) || journal_space(&j, &free_bytes) != -ENOSPC)
		return false;
	journal_space_describe(&j, free_bytes, why, len);
	return true;
}

void serve_readyz(struct serve *s, struct serve_reply *rp)
{
	char which[256], why[512];
	const char *reason = NULL;

	if (atomic_load(&s->draining))
		reason = "draining: shutting down";
	else if (s->tokens && !serve_tokens_count(s->tokens))
		reason = "no tenant token is loaded";
	else if (journal_full(why, sizeof(why)))
		reason = why;
	else if (agent_required(s->policy_dir, which, sizeof(which)) &&
		 !agent_enforcing(why, sizeof(why))) {
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 ", and policy %s requires the agent (require_agent)", which);
		reason = why;
	}
	rp->status = reason ? 503 : 200;
	rp->body = reason ? json_pack("{s:b, s:s}", "ready", 0, "reason", reason)
			  : json_pack("{s:b}", "ready", 1);
}
