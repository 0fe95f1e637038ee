/* The executor's side of the control socket: one connection per executor
 * process, one JSON line per request and per reply, matched by request id.
 * Every failure is reported to the caller, who decides; nothing here fails
 * a batch. */
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
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/rule_names.h"

/* One connection per executor; the verifier's test threads share it, so a
 * request and its reply are one critical section. */
struct agent_conn {
	int fd; /* -1 between a broken connection and the next call */
	pthread_mutex_t lock;
	bool files_lsm; /* the agent refuses opens itself (LSM mode) */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int64_t next_id;
	char *in; /* received bytes not yet taken as a reply */
	size_t in_len, in_cap;
};

static int dial(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, err;

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

struct agent_conn *agent_connect(const char *sock_path)
{
	struct agent_conn *c;
	int fd;

	if (!sock_path)
		sock_path = getenv("SANDGUARD_AGENT_SOCK");
	if (!sock_path || !*sock_path)
		sock_path = SG_AGENT_SOCK;
	if (strlen(sock_path) >= sizeof(c->path))
		return NULL;
	fd = dial(sock_path);
	if (fd < 0) {
		sg_debug("no agent at %s: %s", sock_path, strerror(-fd));
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	snprintf(c->path, sizeof(c->path), "%s", sock_path);
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

static void hang_up(struct agent_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->in_len = 0; /* what was half-read belongs to the dead connection */
}

void agent_close(struct agent_conn *c)
{
	if (!c)
		return;
	hang_up(c);
	free(c->in);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

enum { LINE_TIMEOUT = 0, LINE_OK = 1, LINE_BROKEN = -1 };

/* The next reply line (parsed) within the deadline. LINE_BROKEN when the
 * connection is closed, fails, or carries something that is not a JSON
 * line: it cannot be trusted any more. */
static int read_reply(struct agent_conn *c, uint64_t deadline_ms, json_t **reply)
{
	for (;;) {
		char *nl = c->in ? memchr(c->in, '\n', c->in_len) : NULL;
		uint64_t now = clock_ms(CLOCK_MONOTONIC);
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t r;
		int ready;

		if (nl) {
			*reply = json_loadb(c->in, nl - c->in, 0, NULL);
			c->in_len -= nl + 1 - c->in;
			memmove(c->in, nl + 1, c->in_len);
			return *reply && json_is_object(*reply) ? LINE_OK : LINE_BROKEN;
		}
		if (c->in_len >= SG_AGENT_REPLY_MAX)
			return LINE_BROKEN;
		if (now >= deadline_ms)
			return LINE_TIMEOUT;
		ready = poll(&p, 1, (int)(deadline_ms - now));
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready == 0)
			return LINE_TIMEOUT;
		if (c->in_cap - c->in_len < 4096) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
			char *grown = realloc(c->in, cap);
			if (!grown)
				return LINE_BROKEN;
			c->in = grown;
			c->in_cap = cap;
		}
		r = ready < 0 ? -1 : read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return LINE_BROKEN;
		c->in_len += r;
	}
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= n;
	}
	return 0;
}

/* Send one request with a fresh id and wait for the reply with that id;
 * replies to earlier requests are skipped. A broken connection is opened
 * again and the request sent once more. NULL when there is no answer
 * (warned about). Lock held. */
static json_t *call_locked(struct agent_conn *c, json_t *req, int timeout_ms)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	const char *why = "the connection broke";

	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t deadline = clock_ms(CLOCK_MONOTONIC) + (uint64_t)timeout_ms;
		int64_t id = ++c->next_id;
		json_t *reply = NULL;
		char *text;
		int got;

		if (c->fd < 0 && (c->fd = dial(c->path)) < 0) {
			why = strerror(-c->fd);
			c->fd = -1;
			break;
		}
		json_object_set_new(req, "id", json_integer(id));
		text = json_dumps(req, JSON_COMPACT);
		if (!text) {
			why = "out of memory";
			break;
		}
		got = send_all(c->fd, text, strlen(text)) || send_all(c->fd, "\n", 1) ? LINE_BROKEN
										      : LINE_OK;
		free(text);
		while (got == LINE_OK && (got = read_reply(c, deadline, &reply)) == LINE_OK) {
			json_t *rid = json_object_get(reply, "id");
			if (!rid || json_integer_value(rid) == id)
				return reply; /* an agent that echoes no id answers in order */
			json_decref(reply);   /* a late reply to an earlier request */
			reply = NULL;
		}
		json_decref(reply);
		if (got == LINE_TIMEOUT) {
			sg_warn("the agent at %s did not answer %s within %d ms", c->path,
				op ? op : "a request", timeout_ms);
			return NULL; /* the connection stays: a late reply will be skipped */
		}
		hang_up(c);
	}
	sg_warn("no answer from the agent at %s to %s: %s", c->path, op ? op : "a request", why);
	return NULL;
}

/* Send one request (taken over) and read its reply within timeout_ms. */
static json_t *call(struct agent_conn *c, json_t *req, int timeout_ms)
{
	json_t *reply;

	if (!c || !req) {
		json_decref(req);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	reply = call_locked(c, req, timeout_ms);
	pthread_mutex_unlock(&c->lock);
	json_decref(req);
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
		sg_warn("no verdict from the agent for cgroup %llu: reading the kernel's record",
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

int agent_query(struct agent_conn *c, const char *op, int timeout_ms, char **json_text)
{
	json_t *reply;
	int err = 0;

	if (!c)
		return -ENOTCONN;
	reply = call(c, json_pack("{s:s}", "op", op), timeout_ms);
	if (!reply)
		return -ECOMM;
	if (!json_is_true(json_object_get(reply, "ok")))
		err = -EPROTO;
	json_object_del(reply, "id");
	*json_text = err ? NULL : json_dumps(reply, JSON_INDENT(2));
	json_decref(reply);
	return err ? err : *json_text ? 0 : -ENOMEM;
}

int agent_status(struct agent_conn *c, char **json_text)
{
	return agent_query(c, "status", 5000, json_text);
}
