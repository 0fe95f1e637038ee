/* The control socket's server side (see control_server.h). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "control_server.h"
#include "lib/clock.h"
#include "lib/log.h"

/* Past this many queued reply bytes a client's further requests wait in
 * its input buffer until it reads: its own backlog, nobody else's. */
#define OUT_HIGH_WATER (256u << 10)

struct client {
	int fd;
	uint32_t id;        /* tells a reused slot from the client an event was for */
	bool want_out;      /* EPOLLOUT armed */
	bool reading;       /* EPOLLIN armed */
	uint64_t active_ms; /* last request or reply progress */
	char *in;           /* CONTROL_LINE_MAX + 1 bytes */
	size_t in_len;
	char *out;
	size_t out_len, out_off, out_cap;
};

struct control_server {
	const struct control_op *ops;
	size_t n_ops;
	void *ctx;
	int listen_fd, epoll_fd;
	uint32_t next_id;
	size_t n_clients;
	char path[PATH_MAX];
	struct client *clients[CONTROL_MAX_CLIENTS];
};

json_t *control_error(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
}

static uint64_t epoll_tag(int slot, uint32_t id)
{
	return (uint64_t)id << 32 | (uint32_t)(slot + 1);
}

static void arm(struct control_server *cs, int slot)
{
	struct client *c = cs->clients[slot];
	bool reading = c->out_len - c->out_off < OUT_HIGH_WATER;
	bool want_out = c->out_len > c->out_off;
	struct epoll_event ev = { .events = (reading ? EPOLLIN : 0) | (want_out ? EPOLLOUT : 0),
				  .data.u64 = epoll_tag(slot, c->id) };

	if (reading == c->reading && want_out == c->want_out)
		return;
	c->reading = reading;
	c->want_out = want_out;
	epoll_ctl(cs->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void drop_client(struct control_server *cs, int slot)
{
	struct client *c = cs->clients[slot];

	epoll_ctl(cs->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	cs->clients[slot] = NULL;
	cs->n_clients--;
}

/* Write what the socket takes now. -1 when the client is gone. */
static int flush_client(struct control_server *cs, int slot)
{
	struct client *c = cs->clients[slot];

	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			drop_client(cs, slot);
			return -1;
		}
		c->out_off += n;
		c->active_ms = clock_ms(CLOCK_MONOTONIC);
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	return 0;
}

/* Queue one reply line. -1 when the client was dropped. */
static int queue_reply(struct control_server *cs, int slot, json_t *reply)
{
	struct client *c = cs->clients[slot];
	char *text;
	size_t len;

	if (!reply)
		reply = control_error("out of memory");
	text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
	json_decref(reply);
	if (!text) {
		sg_warn("control: cannot encode a reply; client dropped");
		drop_client(cs, slot);
		return -1;
	}
	len = strlen(text);
	if (c->out_len - c->out_off + len + 1 > CONTROL_OUT_MAX) {
		sg_warn("control: a client left %zu bytes of replies unread; dropped",
			c->out_len - c->out_off);
		free(text);
		drop_client(cs, slot);
		return -1;
	}
	if (c->out_len + len + 1 > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *grown;

		/* Compact first: the sent prefix is dead weight. */
		if (c->out)
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
		while (cap < c->out_len + len + 1)
			cap *= 2;
		grown = realloc(c->out, cap);
		if (!grown) {
			free(text);
			drop_client(cs, slot);
			return -1;
		}
		c->out = grown;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, text, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	free(text);
	return flush_client(cs, slot);
}

static json_t *dispatch(struct control_server *cs, const char *line)
{
	json_error_t jerr;
	json_t *req = json_loads(line, 0, &jerr), *reply = NULL;
	const char *op = req ? json_string_value(json_object_get(req, "op")) : NULL;

	if (!op) {
		reply = control_error("expected a JSON object with \"op\"");
	} else {
		size_t i;

		for (i = 0; i < cs->n_ops && strcmp(cs->ops[i].op, op); i++)
			;
		reply = i < cs->n_ops ? cs->ops[i].fn(cs->ctx, req)
				      : control_error("unknown op %.64s", op);
	}
	if (!reply)
		reply = control_error("out of memory");
	/* The client matches replies to requests by the id it chose. */
	if (reply && json_is_object(reply) && json_is_integer(json_object_get(req, "id")))
		json_object_set(reply, "id", json_object_get(req, "id"));
	json_decref(req);
	return reply;
}

/* Answer the complete lines in the input buffer, while this client's
 * reply queue is short. -1 when the client was dropped. */
static int serve_lines(struct control_server *cs, int slot)
{
	struct client *c = cs->clients[slot];
	char *nl;

	while (c->out_len - c->out_off < OUT_HIGH_WATER && (nl = memchr(c->in, '\n', c->in_len))) {
		*nl = 0;
		if (queue_reply(cs, slot, dispatch(cs, c->in)))
			return -1;
		c->in_len -= nl + 1 - c->in;
		memmove(c->in, nl + 1, c->in_len);
		c->active_ms = clock_ms(CLOCK_MONOTONIC);
	}
	return 0;
}

static void read_client(struct control_server *cs, int slot)
{
	struct client *c = cs->clients[slot];
	ssize_t n;

	if (c->in_len == CONTROL_LINE_MAX)
		return; /* full of lines that wait for this client to read */
	n = recv(c->fd, c->in + c->in_len, CONTROL_LINE_MAX - c->in_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		drop_client(cs, slot);
		return;
	}
	c->in_len += n;
	if (serve_lines(cs, slot))
		return;
	if (c->in_len == CONTROL_LINE_MAX && !memchr(c->in, '\n', c->in_len)) {
		sg_warn("control: request over %d bytes, client dropped", CONTROL_LINE_MAX);
		drop_client(cs, slot);
		return;
	}
	arm(cs, slot);
}

static void write_client(struct control_server *cs, int slot)
{
	if (flush_client(cs, slot) || serve_lines(cs, slot))
		return;
	arm(cs, slot);
}

/* The slot of the client idle longest, to make room for a newcomer: a
 * stuck or forgotten client must not lock executors out. */
static int idlest_client(struct control_server *cs)
{
	int best = 0;

	for (int i = 1; i < CONTROL_MAX_CLIENTS; i++)
		if (cs->clients[i]->active_ms < cs->clients[best]->active_ms)
			best = i;
	return best;
}

static void accept_client(struct control_server *cs)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct client *c;
	int fd, slot;

	fd = accept4(cs->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.uid != 0) {
		sg_warn("control: refused a peer with uid %d (only root may talk to the agent)",
			len == sizeof(cred) ? (int)cred.uid : -1);
		close(fd);
		return;
	}
	for (slot = 0; slot < CONTROL_MAX_CLIENTS && cs->clients[slot]; slot++)
		;
	if (slot == CONTROL_MAX_CLIENTS) {
		slot = idlest_client(cs);
		sg_warn("control: %d clients connected; dropping the one idle longest",
			CONTROL_MAX_CLIENTS);
		drop_client(cs, slot);
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->in = malloc(CONTROL_LINE_MAX + 1);
	if (!c || !c->in) {
		sg_warn("control: out of memory for a client");
		if (c)
			free(c);
		close(fd);
		return;
	}
	c->fd = fd;
	c->id = ++cs->next_id;
	c->reading = true;
	c->active_ms = clock_ms(CLOCK_MONOTONIC);
	cs->clients[slot] = c;
	cs->n_clients++;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = epoll_tag(slot, c->id) };
	if (epoll_ctl(cs->epoll_fd, EPOLL_CTL_ADD, fd, &ev))
		drop_client(cs, slot);
}

void control_handle(struct control_server *cs)
{
	struct epoll_event evs[64];
	int n = epoll_wait(cs->epoll_fd, evs, 64, 0);

	for (int i = 0; i < n; i++) {
		uint32_t slot_1 = (uint32_t)evs[i].data.u64, id = evs[i].data.u64 >> 32;
		struct client *c;

		if (slot_1 == 0) {
			for (int k = 0; k < 16; k++) /* a burst, without starving the rest */
				accept_client(cs);
			continue;
		}
		c = cs->clients[slot_1 - 1];
		if (!c || c->id != id)
			continue; /* dropped (or replaced) earlier in this batch */
		if (evs[i].events & (EPOLLERR | EPOLLHUP) && !(evs[i].events & EPOLLIN)) {
			drop_client(cs, slot_1 - 1);
			continue;
		}
		if (evs[i].events & EPOLLOUT) {
			write_client(cs, slot_1 - 1);
			c = cs->clients[slot_1 - 1];
			if (!c || c->id != id)
				continue;
		}
		if (evs[i].events & EPOLLIN)
			read_client(cs, slot_1 - 1);
	}
}

int control_fd(struct control_server *cs)
{
	return cs->epoll_fd;
}

size_t control_clients(const struct control_server *cs)
{
	return cs->n_clients;
}

static int listen_on(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char dir[PATH_MAX], *slash;
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		sg_error("control socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) && errno != EEXIST)
			sg_warn("cannot create %s: %s", dir, strerror(errno));
	}
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path); /* a stale socket of a previous agent */
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) || chmod(path, 0600) ||
	    listen(fd, 512)) {
		int err = -errno;
		sg_error("cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return err;
	}
	return fd;
}

struct control_server *control_open(const char *path, const struct control_op *ops, size_t n_ops,
				    void *ctx)
{
	struct control_server *cs = calloc(1, sizeof(*cs));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };
	int err;

	if (!cs) {
		errno = ENOMEM;
		return NULL;
	}
	cs->ops = ops;
	cs->n_ops = n_ops;
	cs->ctx = ctx;
	snprintf(cs->path, sizeof(cs->path), "%s", path);
	cs->listen_fd = listen_on(path);
	if (cs->listen_fd < 0) {
		err = -cs->listen_fd;
		free(cs);
		errno = err;
		return NULL;
	}
	cs->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (cs->epoll_fd < 0 || epoll_ctl(cs->epoll_fd, EPOLL_CTL_ADD, cs->listen_fd, &ev)) {
		err = errno;
		sg_error("control: epoll: %s", strerror(err));
		if (cs->epoll_fd >= 0)
			close(cs->epoll_fd);
		close(cs->listen_fd);
		unlink(path);
		free(cs);
		errno = err;
		return NULL;
	}
	return cs;
}

void control_close(struct control_server *cs)
{
	if (!cs)
		return;
	for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
		if (cs->clients[i])
			drop_client(cs, i);
	close(cs->listen_fd);
	close(cs->epoll_fd);
	unlink(cs->path);
	free(cs);
}
