/* The executor's side of the control socket: one connection per executor
 * process, one JSON line per request and per reply. Every failure is
 * reported to the caller, who decides; nothing here fails a batch. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <limits.h>
#include <bpf/bpf.h>
#include "pinned.h"
#include "abi/maps.h"
#include "agent_client.h"
#include "abi/events.h"
#include "lib/log.h"
#include "lib/rule_names.h"
#include "outcome_json.h"

/* One connection per executor; the verifier's test threads share it, so a
 * request and its reply are one critical section. */
struct agent_conn {
	int fd;
	pthread_mutex_t lock;
	bool files_lsm; /* the agent refuses opens itself (LSM mode) */
};

struct agent_conn *agent_connect(const char *sock_path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct agent_conn *c;
	int fd;

	if (!sock_path)
		sock_path = getenv("SANDGUARD_AGENT_SOCK");
	if (!sock_path || !*sock_path)
		sock_path = SG_AGENT_SOCK;
	if (strlen(sock_path) >= sizeof(addr.sun_path))
		return NULL;
	strcpy(addr.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		sg_debug("no agent at %s: %s", sock_path, strerror(errno));
		close(fd);
		return NULL;
	}
	c = malloc(sizeof(*c));
	if (!c) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void agent_close(struct agent_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static json_t *call_locked(struct agent_conn *c, json_t *req, int timeout_ms);

/* Send one request and read its one-line reply within timeout_ms. */
static json_t *call(struct agent_conn *c, json_t *req, int timeout_ms)
{
	json_t *reply;

	if (!c) {
		json_decref(req);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	reply = call_locked(c, req, timeout_ms);
	pthread_mutex_unlock(&c->lock);
	return reply;
}

static json_t *call_locked(struct agent_conn *c, json_t *req, int timeout_ms)
{
	char *text = json_dumps(req, JSON_COMPACT), buf[65536];
	size_t len = 0, n;
	json_t *reply = NULL;

	json_decref(req);
	if (!c || c->fd < 0 || !text) {
		free(text);
		return NULL;
	}
	n = strlen(text);
	text[n] = '\n';
	if (send(c->fd, text, n + 1, MSG_NOSIGNAL) != (ssize_t)(n + 1)) {
		free(text);
		return NULL;
	}
	free(text);
	while (len < sizeof(buf) - 1) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, timeout_ms) <= 0)
			break;
		r = read(c->fd, buf + len, sizeof(buf) - 1 - len);
		if (r <= 0)
			break;
		len += r;
		buf[len] = 0;
		if (memchr(buf, '\n', len)) {
			reply = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
			break;
		}
	}
	if (!reply) {
		/* A late reply must never be taken for the next request's:
		 * the connection is done. */
		close(c->fd);
		c->fd = -1;
	}
	return reply;
}

static int reply_status(json_t *reply, const char *what)
{
	int ok = reply && json_is_true(json_object_get(reply, "ok"));
	const char *code = reply ? json_string_value(json_object_get(reply, "code")) : NULL;

	if (code && !strcmp(code, "root_mismatch")) {
		sg_error("agent refused %s: %s", what,
			 json_string_value(json_object_get(reply, "error")));
		json_decref(reply);
		return -EXDEV;
	}

	if (reply && !ok)
		sg_warn("agent refused %s: %s", what,
			json_string_value(json_object_get(reply, "error")) ?: "no reason given");
	json_decref(reply);
	return ok ? 0 : (reply ? -EPROTO : -ECOMM);
}

int agent_register(struct agent_conn *c, const char *tenant, const char *sandbox,
		   const char *run_id, const char *batch_id, uint64_t cgroup_id,
		   const char *scratch, int timeout_ms)
{
	const char *files;
	struct stat root;
	json_t *reply;

	if (!c)
		return -ENOTCONN;
	if (stat("/", &root))
		return -errno;
	reply = call(c,
		     json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:I}", "op", "register",
			       "tenant", tenant, "sandbox", sandbox, "run_id", run_id ?: "",
			       "batch_id", batch_id ?: "", "cgroup_id", (json_int_t)cgroup_id,
			       "scratch", scratch ?: "", "root_dev", (json_int_t)root.st_dev,
			       "root_ino", (json_int_t)root.st_ino),
		     timeout_ms);
	files = reply ? json_string_value(json_object_get(reply, "files")) : NULL;
	c->files_lsm = files && !strcmp(files, "lsm");
	return reply_status(reply, "registration");
}

int agent_compile(struct agent_conn *c, const char *tenant, int timeout_ms, char *why, size_t len)
{
	json_t *reply;
	const char *error;
	int ok;

	snprintf(why, len, "no agent answered");
	if (!c)
		return -ENOTCONN;
	reply = call(c, json_pack("{s:s, s:s}", "op", "compile", "tenant", tenant), timeout_ms);
	if (!reply)
		return -ETIMEDOUT;
	ok = json_is_true(json_object_get(reply, "ok"));
	error = json_string_value(json_object_get(reply, "error"));
	snprintf(why, len, "%s", ok ? "" : error ? error : "no reason given");
	json_decref(reply);
	return ok ? 0 : -EPROTO;
}

int agent_kill_verdict(struct agent_conn *c, uint64_t cgroup_id, int *rule, int timeout_ms)
{
	json_t *reply;
	const char *r;
	int killed;

	if (!c)
		return -ENOTCONN;
	reply = call(c,
		     json_pack("{s:s, s:I}", "op", "verdict", "cgroup_id", (json_int_t)cgroup_id),
		     timeout_ms);
	if (!reply || !json_is_true(json_object_get(reply, "ok"))) {
		json_decref(reply);
		sg_debug("no verdict from the agent for cgroup %llu: reading the kernel's record",
			 (unsigned long long)cgroup_id);
		/* The agent's pinned record of the kills it carried out. */
		return sg_pinned_kill_rule(cgroup_id, rule);
	}
	killed = json_is_true(json_object_get(reply, "killed"));
	r = json_string_value(json_object_get(reply, "rule"));
	*rule = rule_from_name(r);
	json_decref(reply);
	return killed;
}

int agent_report(struct agent_conn *c, const struct sg_outcome *o)
{
	if (!c)
		return -ENOTCONN;
	return reply_status(call(c, outcome_to_json(o), 1000), "an outcome report");
}

int agent_unregister(struct agent_conn *c, uint64_t cgroup_id)
{
	if (!c)
		return -ENOTCONN;
	return reply_status(call(c,
				 json_pack("{s:s, s:I}", "op", "unregister", "cgroup_id",
					   (json_int_t)cgroup_id),
				 1000),
			    "unregistration");
}

bool agent_files_preventive(const struct agent_conn *c)
{
	return c && c->files_lsm;
}

int agent_status(struct agent_conn *c, char **json_text)
{
	json_t *reply;

	if (!c)
		return -ENOTCONN;
	reply = call(c, json_pack("{s:s}", "op", "status"), 2000);
	if (!reply)
		return -ECOMM;
	*json_text = json_dumps(reply, JSON_INDENT(2));
	json_decref(reply);
	return *json_text ? 0 : -ENOMEM;
}
