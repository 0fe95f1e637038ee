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
#include "lib/json_out.h"

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
	[SG_EV_EVENTS_DROPPED] = "events_dropped",
	[SG_EV_ARTIFACT_REFUSED] = "artifact_refused",
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

bool event_type_agents_own(uint32_t type)
{
	return type == SG_EV_SANDBOX_KILLED || type == SG_EV_HEALTH ||
	       type == SG_EV_EVENTS_DROPPED || type == SG_EV_ARTIFACT_REFUSED;
}

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

/* The timestamp of an event line: ms since the epoch. gmtime_r() and a
 * formatted print cost more than the rest of a line, and a stream of
 * events shares its second, so the text up to the seconds is kept per
 * thread and only the milliseconds are written per line. */
static void line_ts(int64_t epoch_ms, char out[25])
{
	static __thread int64_t cached_sec = -2;
	static __thread bool cached_ok;
	static __thread char cached[25];
	int64_t sec = epoch_ms >= 0 ? epoch_ms / 1000 : -1;
	int ms = epoch_ms >= 0 ? (int)(epoch_ms % 1000) : 0;

	if (sec != cached_sec) {
		cached_ok = event_format_ts(sec * 1000, cached, sizeof(cached)) == 0;
		if (!cached_ok)
			snprintf(cached, sizeof(cached), "1970-01-01T00:00:00.000Z");
		cached_sec = sec;
	}
	memcpy(out, cached, 25);
	if (cached_ok) {
		out[20] = (char)('0' + ms / 100);
		out[21] = (char)('0' + ms / 10 % 10);
		out[22] = (char)('0' + ms % 10);
	}
}

/* A fixed-size, possibly unterminated char array from the kernel. */
static void out_field(struct json_out *o, const char *s, size_t size)
{
	json_out_bytes(o, s, strnlen(s, size));
}

static void out_name_or_null(struct json_out *o, const char *name)
{
	json_out_str_or_null(o, name);
}

/* "a.b.c.d:port" or "[v6]:port" into buf (at least 64 bytes). */
static size_t format_dst(const struct sg_net_detail *n, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN];

	if (n->family == AF_INET) {
		const uint8_t *a = n->addr;
		return (size_t)snprintf(buf, len, "%u.%u.%u.%u:%u", a[0], a[1], a[2], a[3],
					n->port);
	}
	inet_ntop(AF_INET6, n->addr, addr, sizeof(addr));
	return (size_t)snprintf(buf, len, "[%s]:%u", addr, n->port);
}

static void egress_detail(struct json_out *o, const struct sg_net_detail *n)
{
	char dst[SG_UNIX_PATH_LEN + 64], num[16];
	const char *proto;

	switch (n->family) {
	case AF_INET:
	case AF_INET6:
		json_out_lit(o, "{\"family\":");
		if (n->family == AF_INET)
			json_out_lit(o, "\"inet\"");
		else
			json_out_lit(o, "\"inet6\"");
		json_out_lit(o, ",\"dst\":");
		json_out_bytes(o, dst, format_dst(n, dst, sizeof(dst)));
		break;
	case AF_UNIX:
		json_out_lit(o, "{\"family\":\"unix\",\"dst\":");
		if (n->unix_path[0]) {
			out_field(o, n->unix_path, sizeof(n->unix_path));
		} else {
			/* Abstract socket: a leading NUL, shown as '@' like ss(8). */
			size_t l = strnlen(n->unix_path + 1, sizeof(n->unix_path) - 1);
			dst[0] = '@';
			memcpy(dst + 1, n->unix_path + 1, l);
			json_out_bytes(o, dst, l + 1);
		}
		break;
	default:
		json_out_lit(o, "{\"family\":");
		snprintf(num, sizeof(num), "%u", n->family);
		json_out_str_or_null(o, num);
		json_out_lit(o, ",\"dst\":null");
		break;
	}

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
	json_out_lit(o, ",\"proto\":");
	out_name_or_null(o, proto);
	json_out_lit(o, ",\"hook\":");
	out_name_or_null(o, n->hook < ARRAY_LEN(hook_names) ? hook_names[n->hook] : NULL);
	json_out_lit(o, "}");
}

static void fork_detail(struct json_out *o, const struct sg_fork_detail *f)
{
	const char *which = f->which == 1 ? "max_tasks" : f->which == 2 ? "max_forks" : NULL;

	json_out_lit(o, "{\"forks\":");
	json_out_uint(o, f->forks);
	json_out_lit(o, ",\"tasks\":");
	json_out_uint(o, f->tasks);
	json_out_lit(o, ",\"limit\":");
	json_out_uint(o, f->limit);
	json_out_lit(o, ",\"which\":");
	out_name_or_null(o, which);
	json_out_lit(o, "}");
}

/* argv: the bytes the kernel copied, arguments separated by NULs. The
 * BPF side may report the full argument area length in args_len; more
 * than it kept, or a kept area that does not end in a NUL, is truncation. */
static void argv_array(struct json_out *o, const struct sg_exec_detail *x, bool *truncated)
{
	size_t n = x->args_len < SG_ARGS_LEN ? x->args_len : SG_ARGS_LEN;

	*truncated = x->args_len > SG_ARGS_LEN || (n == SG_ARGS_LEN && x->args[n - 1] != '\0');
	json_out_lit(o, "[");
	for (size_t start = 0; start < n;) {
		const char *nul = memchr(x->args + start, '\0', n - start);
		size_t end = nul ? (size_t)(nul - x->args) : n;

		if (start)
			json_out_lit(o, ",");
		json_out_bytes(o, x->args + start, end - start);
		start = end + 1;
	}
	json_out_lit(o, "]");
}

static void exec_detail(struct json_out *o, const struct sg_exec_detail *x)
{
	bool truncated;

	json_out_lit(o, "{\"filename\":");
	out_field(o, x->filename, sizeof(x->filename));
	json_out_lit(o, ",\"argv\":");
	argv_array(o, x, &truncated);
	json_out_lit(o, ",\"truncated\":");
	json_out_bool(o, truncated);
	json_out_lit(o, ",\"mode\":");
	out_name_or_null(o, mode_name(x->mode));
	json_out_lit(o, "}");
}

/* The path of a file event, from the components the kernel walked:
 * comps[0] is the file, comps[kept-1] the outermost kept. When the walk
 * kept every component it reached the root, so the path is absolute;
 * otherwise the outer part is lost and shown as ".../". A component named
 * "/" is a root (of the namespace or of a mount) and adds no name. */
static void file_path(struct json_out *o, const struct sg_file_detail *f)
{
	char path[SG_PATH_COMPS * (SG_COMP_LEN + 1) + 8];
	size_t kept = f->depth < SG_PATH_COMPS ? f->depth : SG_PATH_COMPS;
	size_t n = 0;

	if (f->depth == 0) {
		json_out_null(o);
		return;
	}
	if (f->depth > SG_PATH_COMPS) {
		memcpy(path, "...", 3);
		n = 3;
	}
	for (size_t i = kept; i-- > 0;) {
		const char *c = f->comps[i];
		size_t cl = strnlen(c, SG_COMP_LEN);

		if (cl == 0 || (cl == 1 && c[0] == '/'))
			continue;
		path[n++] = '/';
		memcpy(path + n, c, cl);
		n += cl;
	}
	if (n == 0)
		path[n++] = '/';
	json_out_bytes(o, path, n);
}

static void file_detail(struct json_out *o, const struct sg_file_detail *f)
{
	json_out_lit(o, "{\"path\":");
	if (f->requested) {
		/* Refused before resolution (Landlock, in fallback mode): the
		 * path as requested, possibly relative. */
		out_field(o, (const char *)f->comps, sizeof(f->comps));
		json_out_lit(o, ",\"requested\":true");
	} else {
		file_path(o, f);
	}
	json_out_lit(o, ",\"write\":");
	json_out_bool(o, f->write);
	json_out_lit(o, ",\"flags\":");
	json_out_uint(o, f->flags);
	json_out_lit(o, ",\"mode\":");
	out_name_or_null(o, mode_name(f->mode));
	json_out_lit(o, "}");
}

static void exit_detail(struct json_out *o, const struct sg_exit_detail *x)
{
	json_out_lit(o, "{\"exit_code\":");
	json_out_int(o, x->exit_code);
	json_out_lit(o, ",\"signal\":");
	json_out_int(o, x->signal);
	json_out_lit(o, ",\"core\":");
	json_out_bool(o, x->core);
	json_out_lit(o, ",\"oom_killed\":");
	json_out_bool(o, x->oom_killed);
	json_out_lit(o, "}");
}

/* Who did it, when the event knows: pid, ppid, uid, comm (null each when
 * unknown, never a 0 that reads as root). */
struct event_who {
	bool pid, ppid; /* known */
	uint32_t pid_v, ppid_v, uid_v;
	const char *comm; /* NULL: null */
	size_t comm_size;
};

/* Everything up to and including "detail": in the line's key order. */
static void event_head(struct json_out *o, const struct event_ctx *ctx, int64_t real_ns,
		       const char *type, const struct event_who *who, const char *rule)
{
	char ts[25];

	line_ts(real_ns >= 0 ? real_ns / 1000000 : -1, ts);
	json_out_lit(o, "{\"ts\":\"");
	json_out_raw(o, ts, 24);
	json_out_lit(o, "\",\"node\":");
	json_out_str_or_null(o, ctx ? ctx->node : NULL);
	json_out_lit(o, ",\"tenant\":");
	json_out_str_or_null(o, ctx ? ctx->tenant : NULL);
	json_out_lit(o, ",\"sandbox\":");
	json_out_str_or_null(o, ctx ? ctx->sandbox : NULL);
	json_out_lit(o, ",\"batch_id\":");
	json_out_str_or_null(o, ctx ? ctx->batch_id : NULL);
	json_out_lit(o, ",\"run_id\":");
	json_out_str_or_null(o, ctx ? ctx->run_id : NULL);
	json_out_lit(o, ",\"pid\":");
	if (who->pid)
		json_out_uint(o, who->pid_v);
	else
		json_out_null(o);
	json_out_lit(o, ",\"ppid\":");
	if (who->ppid)
		json_out_uint(o, who->ppid_v);
	else
		json_out_null(o);
	json_out_lit(o, ",\"uid\":");
	if (who->pid)
		json_out_uint(o, who->uid_v);
	else
		json_out_null(o);
	json_out_lit(o, ",\"comm\":");
	if (who->comm)
		out_field(o, who->comm, who->comm_size);
	else
		json_out_null(o);
	json_out_lit(o, ",\"type\":");
	json_out_str_or_null(o, type);
	json_out_lit(o, ",\"rule\":");
	out_name_or_null(o, rule);
	json_out_lit(o, ",\"detail\":");
}

static int event_tail(struct json_out *o, const char *action)
{
	json_out_lit(o, ",\"action\":");
	json_out_str_or_null(o, action);
	json_out_lit(o, "}");
	return json_out_finish(o);
}

int event_to_json(const struct sg_event *e, const struct event_ctx *ctx, char *buf, size_t len)
{
	const char *type = event_type_name(e->type);
	const char *action = event_action_name(e->action);
	const char *rule = rule_name((int)e->rule);
	/* Unknown is null, never a 0 that reads as root (skb_egress events
	 * run in no task; sock_addr programs do not see the parent). */
	bool task = !(e->flags & SG_EVF_NO_TASK);
	struct event_who who = {
		.pid = task,
		.ppid = task && !(e->flags & SG_EVF_NO_PPID),
		.pid_v = e->pid,
		.ppid_v = e->ppid,
		.uid_v = e->uid,
		.comm = task ? e->comm : NULL,
		.comm_size = sizeof(e->comm),
	};
	struct json_out o;

	/* The agent's own types never come from the kernel. */
	if (!type || !action || event_type_agents_own(e->type))
		return -EINVAL;
	/* An allowed exec and an exit concern no rule; e->rule is 0
	 * (egress) there, so it must not be read. */
	if (e->type == SG_EV_EXIT || e->action == SG_ACTION_ALLOWED)
		rule = NULL;

	json_out_init(&o, buf, len);
	event_head(&o, ctx, (int64_t)e->ts_ns + (ctx ? ctx->boot_to_real_ns : 0), type, &who, rule);
	switch (e->type) {
	case SG_EV_EGRESS_DENIED:
		egress_detail(&o, &e->net);
		break;
	case SG_EV_FORK_LIMIT:
		fork_detail(&o, &e->fork);
		break;
	case SG_EV_EXEC:
	case SG_EV_EXEC_DENIED:
		exec_detail(&o, &e->exec);
		break;
	case SG_EV_FILE_DENIED:
	case SG_EV_FILE_TRIPPED:
		file_detail(&o, &e->file);
		break;
	default:
		exit_detail(&o, &e->exit);
		break;
	}
	return event_tail(&o, action);
}

/* Adds v under key; reports a failed allocation (v NULL) as -1, so that
 * a whole object is built with `err |= put(...)` and checked once. */
static int put(json_t *obj, const char *key, json_t *v)
{
	if (!v)
		return -1;
	return json_object_set_new(obj, key, v) ? -1 : 0;
}

/* Userspace events are rare (a kill, a detector firing): their detail is
 * the caller's jansson object, dumped as jansson writes it. */
int event_userspace_json(const struct event_ctx *ctx, uint64_t realtime_ns, uint32_t type,
			 uint32_t action, int rule, json_t *detail, char *buf, size_t len)
{
	const char *type_s = event_type_name(type);
	const char *action_s = event_action_name(action);
	const char *rule_s = rule_name(rule);
	struct event_who nobody = { 0 };
	struct json_out o;
	size_t n;

	if (!type_s || !action_s || (rule != -1 && !rule_s) || (detail && !json_is_object(detail)))
		return -EINVAL;
	if (realtime_ns == 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		realtime_ns = (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec;
	}
	json_out_init(&o, buf, len);
	event_head(&o, ctx, (int64_t)realtime_ns, type_s, &nobody, rule_s);
	if (!detail) {
		json_out_lit(&o, "{}");
	} else if (!o.full) {
		n = json_dumpb(detail, o.buf + o.len, o.cap - o.len,
			       JSON_COMPACT | JSON_REAL_PRECISION(10));
		if (n == 0)
			return -ENOMEM;
		if (n >= o.cap - o.len)
			o.full = true;
		else
			o.len += n;
	}
	return event_tail(&o, action_s);
}

static json_t *json_name_or_null(const char *name)
{
	return name ? json_string(name) : json_null();
}

/* A latency (ms, finite, >= 0) kept to the microsecond, rounded half up.
 * Not round(): the binary links no libm (Makefile). From 2^52 us up a
 * double holds whole numbers only, so there is nothing left to round. */
static double to_microsecond(double ms)
{
	double us = ms * 1000;

	return us < 0x1p52 ? (double)(uint64_t)(us + 0.5) / 1000 : ms;
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
			   ? json_real(to_microsecond(k->latency_ms))
			   : json_null());
	err |= put(d, "method", json_name_or_null(k->method));
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
	err |= put(d, "detector", json_name_or_null(detector));
	if (!err && fields)
		err |= json_object_update_missing(d, fields);
	ret = err ? -ENOMEM
		  : event_userspace_json(ctx, realtime_ns, SG_EV_HEALTH, SG_ACTION_LOGGED, -1, d,
					 buf, len);
	json_decref(d);
	return ret;
}
