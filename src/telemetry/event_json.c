/* Encoding events as JSON lines (see src/telemetry/event_json.h for the format).
 * The decoder is in event_decode.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include "event_json.h"
#include "lib/rule_names.h"
#include "lib/array_len.h"
#include "lib/utf8.h"

static const char *const type_names[SG_EV__COUNT] = {
	[SG_EV_EGRESS_DENIED] = "egress_denied",
	[SG_EV_FORK_LIMIT] = "fork_limit",
	[SG_EV_EXEC] = "exec",
	[SG_EV_EXEC_DENIED] = "exec_denied",
	[SG_EV_FILE_DENIED] = "file_denied",
	[SG_EV_FILE_TRIPPED] = "file_tripped",
	[SG_EV_EXIT] = "exit",
	[SG_EV_SANDBOX_KILLED] = "sandbox_killed",
	[SG_EV_HEALTH] = "health",
};

static const char *const action_names[] = {
	[SG_ACTION_ALLOWED] = "allowed",
	[SG_ACTION_DENIED] = "denied",
	[SG_ACTION_KILLED] = "killed",
	[SG_ACTION_LOGGED] = "logged",
};

static const char *const hook_names[] = {
	[SG_HOOK_CONNECT4] = "connect4",           [SG_HOOK_CONNECT6] = "connect6",
	[SG_HOOK_SENDMSG4] = "sendmsg4",           [SG_HOOK_SENDMSG6] = "sendmsg6",
	[SG_HOOK_CONNECT_UNIX] = "connect_unix",   [SG_HOOK_SENDMSG_UNIX] = "sendmsg_unix",
	[SG_HOOK_SKB_EGRESS] = "skb_egress",       [SG_HOOK_LSM_UNIX_CONNECT] = "lsm_unix_connect",
	[SG_HOOK_LSM_UNIX_SEND] = "lsm_unix_send", [SG_HOOK_LSM_UNIX_BIND] = "lsm_unix_bind",
};

const char *event_type_name(uint32_t type)
{
	return type < ARRAY_LEN(type_names) ? type_names[type] : NULL;
}

int event_type_from_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_LEN(type_names); i++)
		if (type_names[i] && name && !strcmp(type_names[i], name))
			return (int)i;
	return -1;
}

const char *event_action_name(uint32_t action)
{
	return action < ARRAY_LEN(action_names) ? action_names[action] : NULL;
}

static const char *mode_name(uint32_t mode)
{
	switch (mode) {
	case SG_MODE_LSM:
		return "lsm";
	case SG_MODE_FALLBACK:
		return "fallback";
	default:
		return NULL;
	}
}

int event_clock_offset(int64_t *offset_ns)
{
	struct timespec b1, r, b2;

	/* Bracket the realtime read with two boottime reads and use their
	 * midpoint, so a preemption between the calls costs little. */
	if (clock_gettime(CLOCK_BOOTTIME, &b1) || clock_gettime(CLOCK_REALTIME, &r) ||
	    clock_gettime(CLOCK_BOOTTIME, &b2))
		return -errno;
	int64_t boot1 = (int64_t)b1.tv_sec * 1000000000 + b1.tv_nsec;
	int64_t boot2 = (int64_t)b2.tv_sec * 1000000000 + b2.tv_nsec;
	int64_t real = (int64_t)r.tv_sec * 1000000000 + r.tv_nsec;
	*offset_ns = real - (boot1 + (boot2 - boot1) / 2);
	return 0;
}

int event_format_ts(int64_t epoch_ms, char *buf, size_t len)
{
	struct tm tm;
	time_t secs;
	int ms;

	if (epoch_ms < 0 || len < 25)
		return -ERANGE;
	secs = (time_t)(epoch_ms / 1000);
	ms = (int)(epoch_ms % 1000);
	if (!gmtime_r(&secs, &tm) || tm.tm_year + 1900 > 9999)
		return -ERANGE;
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
	return 0;
}

/* A JSON string of n untrusted bytes: valid UTF-8 is kept, every other
 * byte becomes the text \xNN (JSON escaping of control characters is
 * jansson's). NULL only when out of memory. */
static json_t *json_bytes(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	char *clean = malloc(n * 4 + 1);
	size_t o = 0;
	json_t *j;

	if (!clean)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq_len(u + i, n - i);
		if (l) {
			memcpy(clean + o, u + i, l);
			o += l;
			i += l;
		} else {
			o += (size_t)sprintf(clean + o, "\\x%02x", u[i]);
			i++;
		}
	}
	j = json_stringn(clean, o);
	free(clean);
	return j;
}

/* A fixed-size, possibly unterminated char array from the kernel. */
static json_t *json_field(const char *s, size_t size)
{
	return json_bytes(s, strnlen(s, size));
}

static json_t *json_cstr_or_null(const char *s)
{
	return s ? json_bytes(s, strlen(s)) : json_null();
}

static json_t *json_name_or_null(const char *name)
{
	return name ? json_string(name) : json_null();
}

/* Adds v under key; reports a failed allocation (v NULL) as -1, so that
 * a whole object is built with `err |= put(...)` and checked once. */
static int put(json_t *obj, const char *key, json_t *v)
{
	if (!v)
		return -1;
	return json_object_set_new(obj, key, v) ? -1 : 0;
}

static json_t *egress_detail(const struct sg_net_detail *n)
{
	json_t *d = json_object();
	char addr[INET6_ADDRSTRLEN], dst[SG_UNIX_PATH_LEN + 64], num[16];
	const char *family, *proto;
	json_t *dst_j;
	int err = 0;

	if (!d)
		return NULL;
	switch (n->family) {
	case AF_INET:
		family = "inet";
		inet_ntop(AF_INET, n->addr, addr, sizeof(addr));
		snprintf(dst, sizeof(dst), "%s:%u", addr, n->port);
		dst_j = json_string(dst);
		break;
	case AF_INET6:
		family = "inet6";
		inet_ntop(AF_INET6, n->addr, addr, sizeof(addr));
		snprintf(dst, sizeof(dst), "[%s]:%u", addr, n->port);
		dst_j = json_string(dst);
		break;
	case AF_UNIX:
		family = "unix";
		if (n->unix_path[0]) {
			dst_j = json_field(n->unix_path, sizeof(n->unix_path));
		} else {
			/* Abstract socket: a leading NUL, shown as '@' like ss(8). */
			size_t l = strnlen(n->unix_path + 1, sizeof(n->unix_path) - 1);
			dst[0] = '@';
			memcpy(dst + 1, n->unix_path + 1, l);
			dst_j = json_bytes(dst, l + 1);
		}
		break;
	default:
		snprintf(num, sizeof(num), "%u", n->family);
		family = num;
		dst_j = json_null();
		break;
	}
	err |= put(d, "family", json_string(family));
	err |= put(d, "dst", dst_j);

	switch (n->proto) {
	case 0:
		proto = NULL;
		break;
	case IPPROTO_TCP:
		proto = "tcp";
		break;
	case IPPROTO_UDP:
		proto = "udp";
		break;
	case IPPROTO_ICMP:
		proto = "icmp";
		break;
	case IPPROTO_ICMPV6:
		proto = "icmpv6";
		break;
	default:
		snprintf(num, sizeof(num), "%u", n->proto);
		proto = num;
	}
	err |= put(d, "proto", json_name_or_null(proto));
	err |= put(d, "hook",
		   json_name_or_null(n->hook < ARRAY_LEN(hook_names) ? hook_names[n->hook] : NULL));
	if (err) {
		json_decref(d);
		return NULL;
	}
	return d;
}

static json_t *fork_detail(const struct sg_fork_detail *f)
{
	json_t *d = json_object();
	const char *which = f->which == 1 ? "max_tasks" : f->which == 2 ? "max_forks" : NULL;
	int err = 0;

	if (!d)
		return NULL;
	err |= put(d, "forks", json_integer(f->forks));
	err |= put(d, "tasks", json_integer(f->tasks));
	err |= put(d, "limit", json_integer(f->limit));
	err |= put(d, "which", json_name_or_null(which));
	if (err) {
		json_decref(d);
		return NULL;
	}
	return d;
}

/* argv: the bytes the kernel copied, arguments separated by NULs. The
 * BPF side may report the full argument area length in args_len; more
 * than it kept, or a kept area that does not end in a NUL, is truncation. */
static json_t *argv_array(const struct sg_exec_detail *x, bool *truncated)
{
	size_t n = x->args_len < SG_ARGS_LEN ? x->args_len : SG_ARGS_LEN;
	json_t *argv = json_array();

	*truncated = x->args_len > SG_ARGS_LEN || (n == SG_ARGS_LEN && x->args[n - 1] != '\0');
	if (!argv)
		return NULL;
	for (size_t start = 0; start < n;) {
		const char *nul = memchr(x->args + start, '\0', n - start);
		size_t end = nul ? (size_t)(nul - x->args) : n;
		if (json_array_append_new(argv, json_bytes(x->args + start, end - start))) {
			json_decref(argv);
			return NULL;
		}
		start = end + 1;
	}
	return argv;
}

static json_t *exec_detail(const struct sg_exec_detail *x)
{
	json_t *d = json_object();
	bool truncated;
	int err = 0;

	if (!d)
		return NULL;
	err |= put(d, "filename", json_field(x->filename, sizeof(x->filename)));
	err |= put(d, "argv", argv_array(x, &truncated));
	err |= put(d, "truncated", json_boolean(truncated));
	err |= put(d, "mode", json_name_or_null(mode_name(x->mode)));
	if (err) {
		json_decref(d);
		return NULL;
	}
	return d;
}

/* The path of a file event, from the components the kernel walked:
 * comps[0] is the file, comps[kept-1] the outermost kept. When the walk
 * kept every component it reached the root, so the path is absolute;
 * otherwise the outer part is lost and shown as ".../". A component named
 * "/" is a root (of the namespace or of a mount) and adds no name. */
static json_t *file_path(const struct sg_file_detail *f)
{
	char path[SG_PATH_COMPS * (SG_COMP_LEN + 1) + 8];
	size_t kept = f->depth < SG_PATH_COMPS ? f->depth : SG_PATH_COMPS;
	size_t o = 0;

	if (f->depth == 0)
		return json_null();
	o += (size_t)snprintf(path, sizeof(path), "%s", f->depth > SG_PATH_COMPS ? "..." : "");
	for (size_t i = kept; i-- > 0;) {
		const char *c = f->comps[i];
		size_t cl = strnlen(c, SG_COMP_LEN);
		if (cl == 0 || (cl == 1 && c[0] == '/'))
			continue;
		path[o++] = '/';
		memcpy(path + o, c, cl);
		o += cl;
	}
	if (o == 0)
		path[o++] = '/';
	return json_bytes(path, o);
}

static json_t *file_detail(const struct sg_file_detail *f)
{
	json_t *d = json_object();
	int err = 0;

	if (!d)
		return NULL;
	if (f->requested) {
		/* Refused before resolution (Landlock, in fallback mode): the
		 * path as requested, possibly relative. */
		err |= put(d, "path",
			   json_bytes((const char *)f->comps,
				      strnlen((const char *)f->comps, sizeof(f->comps))));
		err |= put(d, "requested", json_true());
	} else {
		err |= put(d, "path", file_path(f));
	}
	err |= put(d, "write", json_boolean(f->write));
	err |= put(d, "flags", json_integer(f->flags));
	err |= put(d, "mode", json_name_or_null(mode_name(f->mode)));
	if (err) {
		json_decref(d);
		return NULL;
	}
	return d;
}

static json_t *exit_detail(const struct sg_exit_detail *x)
{
	json_t *d = json_object();
	int err = 0;

	if (!d)
		return NULL;
	err |= put(d, "exit_code", json_integer(x->exit_code));
	err |= put(d, "signal", json_integer(x->signal));
	err |= put(d, "core", json_boolean(x->core));
	err |= put(d, "oom_killed", json_boolean(x->oom_killed));
	if (err) {
		json_decref(d);
		return NULL;
	}
	return d;
}

/* Everything but detail, in the line's key order; detail and action are
 * appended by finish(). */
static json_t *event_head(const struct event_ctx *ctx, int64_t real_ns, const char *type,
			  json_t *pid, json_t *ppid, json_t *uid, json_t *comm, json_t *rule)
{
	json_t *o = json_object();
	char ts[32];
	int err = 0;

	if (event_format_ts(real_ns >= 0 ? real_ns / 1000000 : -1, ts, sizeof(ts)))
		snprintf(ts, sizeof(ts), "1970-01-01T00:00:00.000Z");
	if (!o) {
		json_decref(pid);
		json_decref(ppid);
		json_decref(uid);
		json_decref(comm);
		json_decref(rule);
		return NULL;
	}
	err |= put(o, "ts", json_string(ts));
	err |= put(o, "node", json_cstr_or_null(ctx ? ctx->node : NULL));
	err |= put(o, "tenant", json_cstr_or_null(ctx ? ctx->tenant : NULL));
	err |= put(o, "sandbox", json_cstr_or_null(ctx ? ctx->sandbox : NULL));
	err |= put(o, "pid", pid);
	err |= put(o, "ppid", ppid);
	err |= put(o, "uid", uid);
	err |= put(o, "comm", comm);
	err |= put(o, "type", json_string(type));
	err |= put(o, "rule", rule);
	if (err) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Adds detail and action, dumps the object into buf and drops both. */
static int finish(json_t *o, json_t *detail, const char *action, char *buf, size_t len)
{
	size_t n;
	int err = 0;

	if (!o) {
		json_decref(detail);
		return -ENOMEM;
	}
	err |= put(o, "detail", detail);
	err |= put(o, "action", json_string(action));
	if (err) {
		json_decref(o);
		return -ENOMEM;
	}
	n = json_dumpb(o, buf, len, JSON_COMPACT | JSON_REAL_PRECISION(10));
	json_decref(o);
	if (n == 0)
		return -ENOMEM;
	if (n >= len)
		return -ENOSPC;
	buf[n] = '\0';
	return (int)n;
}

int event_to_json(const struct sg_event *e, const struct event_ctx *ctx, char *buf, size_t len)
{
	const char *type = event_type_name(e->type);
	const char *action = event_action_name(e->action);
	const char *rule = rule_name((int)e->rule);
	json_t *detail;

	if (!type || !action || e->type == SG_EV_SANDBOX_KILLED || e->type == SG_EV_HEALTH)
		return -EINVAL;
	/* An allowed exec and an exit concern no rule; e->rule is 0
	 * (egress) there, so it must not be read. */
	if (e->type == SG_EV_EXIT || e->action == SG_ACTION_ALLOWED)
		rule = NULL;

	switch (e->type) {
	case SG_EV_EGRESS_DENIED:
		detail = egress_detail(&e->net);
		break;
	case SG_EV_FORK_LIMIT:
		detail = fork_detail(&e->fork);
		break;
	case SG_EV_EXEC:
	case SG_EV_EXEC_DENIED:
		detail = exec_detail(&e->exec);
		break;
	case SG_EV_FILE_DENIED:
	case SG_EV_FILE_TRIPPED:
		detail = file_detail(&e->file);
		break;
	default:
		detail = exit_detail(&e->exit);
		break;
	}
	if (!detail)
		return -ENOMEM;

	int64_t real_ns = (int64_t)e->ts_ns + (ctx ? ctx->boot_to_real_ns : 0);
	/* Unknown is null, never a 0 that reads as root (skb_egress events
	 * run in no task; sock_addr programs do not see the parent). */
	bool task = !(e->flags & SG_EVF_NO_TASK);
	bool ppid = task && !(e->flags & SG_EVF_NO_PPID);
	json_t *o = event_head(ctx, real_ns, type, task ? json_integer(e->pid) : json_null(),
			       ppid ? json_integer(e->ppid) : json_null(),
			       task ? json_integer(e->uid) : json_null(),
			       task ? json_field(e->comm, sizeof(e->comm)) : json_null(),
			       json_name_or_null(rule));
	return finish(o, detail, action, buf, len);
}

int event_userspace_json(const struct event_ctx *ctx, uint64_t realtime_ns, uint32_t type,
			 uint32_t action, int rule, json_t *detail, char *buf, size_t len)
{
	const char *type_s = event_type_name(type);
	const char *action_s = event_action_name(action);
	const char *rule_s = rule_name(rule);
	json_t *d;

	if (!type_s || !action_s || (rule != -1 && !rule_s) || (detail && !json_is_object(detail)))
		return -EINVAL;
	if (realtime_ns == 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		realtime_ns = (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec;
	}
	d = detail ? json_deep_copy(detail) : json_object();
	if (!d)
		return -ENOMEM;
	json_t *o = event_head(ctx, (int64_t)realtime_ns, type_s, json_null(), json_null(),
			       json_null(), json_null(), json_name_or_null(rule_s));
	return finish(o, d, action_s, buf, len);
}

int event_kill_json(const struct event_ctx *ctx, uint64_t realtime_ns, const struct event_kill *k,
		    char *buf, size_t len)
{
	json_t *d = json_object();
	int err = 0, ret;

	if (!d)
		return -ENOMEM;
	if (k->extra && !json_is_object(k->extra)) {
		json_decref(d);
		return -EINVAL;
	}
	err |= put(d, "trigger", json_name_or_null(event_type_name(k->trigger)));
	err |= put(d, "trigger_pid", k->trigger_pid ? json_integer(k->trigger_pid) : json_null());
	/* Kept to the microsecond so that the line stays short. */
	err |= put(d, "kill_latency_ms",
		   isfinite(k->latency_ms) && k->latency_ms >= 0
			   ? json_real(round(k->latency_ms * 1000) / 1000)
			   : json_null());
	err |= put(d, "method", json_cstr_or_null(k->method));
	if (!err && k->extra)
		err |= json_object_update_missing(d, k->extra);
	ret = err ? -ENOMEM
		  : event_userspace_json(ctx, realtime_ns, SG_EV_SANDBOX_KILLED, SG_ACTION_KILLED,
					 k->rule, d, buf, len);
	json_decref(d);
	return ret;
}

int event_health_json(const struct event_ctx *ctx, uint64_t realtime_ns, const char *detector,
		      json_t *fields, char *buf, size_t len)
{
	json_t *d = json_object();
	int err = 0, ret;

	if (!d)
		return -ENOMEM;
	if (!detector || (fields && !json_is_object(fields))) {
		json_decref(d);
		return -EINVAL;
	}
	err |= put(d, "detector", json_cstr_or_null(detector));
	if (!err && fields)
		err |= json_object_update_missing(d, fields);
	ret = err ? -ENOMEM
		  : event_userspace_json(ctx, realtime_ns, SG_EV_HEALTH, SG_ACTION_LOGGED, -1, d,
					 buf, len);
	json_decref(d);
	return ret;
}
