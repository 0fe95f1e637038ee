/* Accepting connections, the connection cap and the header deadline (see
 * serve_conn.h). One thread polls the listening socket, a wake-up pipe
 * and the sockets being closed gracefully; every SWEEP_MS it also shuts
 * the connections whose headers are overdue.
 *
 * A shutdown() is safe against libmicrohttpd closing the socket at the
 * same time: libmicrohttpd notifies the close (conns_closed, which takes
 * our lock) before it closes the descriptor, and we only shut down
 * sockets still in our table, under that lock. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/log.h"
#include "serve_conn.h"

#define SWEEP_MS     250
#define LINGER_MAX   256  /* refused sockets being closed gracefully */
#define LINGER_MS    2000 /* how long we read what a refused client still sends */
#define WARN_EVERY_S 10

struct conn_entry {
	int fd;
	uint64_t deadline_ms; /* headers due; 0 while a request is being handled */
	uint64_t opened_ms;   /* when it was accepted */
	bool answered;        /* a response went out on it */
	bool shut;
	struct conn_entry *prev, *next;
};

struct closing {
	int fd;
	uint64_t until_ms;
};

struct serve_conns {
	int listen_fd, wake[2], reserve_fd;
	uint32_t max_connections;
	uint64_t header_timeout_ms;
	conn_hand_over hand_over;
	void *arg;
	pthread_t thread;
	bool started;
	atomic_bool stopping;
	atomic_uint live;
	atomic_ullong timed_out, refused;
	uint64_t last_warn_ms;
	pthread_mutex_t lock; /* over the list */
	struct conn_entry *head;
	struct closing lingering[LINGER_MAX];
	int n_lingering;
	char refusal[512]; /* the whole 503 response */
	size_t refusal_len;
};

#define REFUSAL_BODY                                                         \
	"{\"error\":\"the server is at its connection cap (sandguard serve " \
	"--max-connections); retry later\"}"

struct serve_conns *conns_new(int listen_fd, uint32_t max_connections, uint32_t header_timeout_s,
			      conn_hand_over hand_over, void *arg)
{
	struct serve_conns *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK)) {
		free(c);
		return NULL;
	}
	c->listen_fd = listen_fd;
	c->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	c->max_connections = max_connections;
	c->header_timeout_ms = (uint64_t)header_timeout_s * 1000;
	c->hand_over = hand_over;
	c->arg = arg;
	c->refusal_len = (size_t)snprintf(c->refusal, sizeof(c->refusal),
					  "HTTP/1.1 503 Service Unavailable\r\n"
					  "Content-Type: application/json\r\n"
					  "Retry-After: 1\r\n"
					  "Connection: close\r\n"
					  "Content-Length: %zu\r\n\r\n%s",
					  sizeof(REFUSAL_BODY) - 1, REFUSAL_BODY);
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

/* Answer 503 and close gracefully: shut our side, then read and drop what
 * the client still sends until it closes or LINGER_MS pass. Closing with
 * its request unread would send a reset, and the client would never read
 * the 503. */
static void refuse(struct serve_conns *c, int fd)
{
	ssize_t n = send(fd, c->refusal, c->refusal_len, MSG_NOSIGNAL | MSG_DONTWAIT);

	atomic_fetch_add(&c->refused, 1);
	if (n == (ssize_t)c->refusal_len && !shutdown(fd, SHUT_WR) && c->n_lingering < LINGER_MAX) {
		c->lingering[c->n_lingering++] =
			(struct closing){ fd, clock_ms(CLOCK_MONOTONIC) + LINGER_MS };
		return;
	}
	close(fd);
}

static void warn_sometimes(struct serve_conns *c, const char *what)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC);

	if (now - c->last_warn_ms < WARN_EVERY_S * 1000ull && c->last_warn_ms)
		return;
	c->last_warn_ms = now;
	sg_warn("serve: %s (%llu refused with 503 so far)", what,
		(unsigned long long)atomic_load(&c->refused));
}

/* Out of descriptors: free the reserve to take one connection off the
 * backlog and refuse it properly, then take the reserve back. */
static void refuse_without_fds(struct serve_conns *c)
{
	int fd;

	if (c->reserve_fd < 0)
		return;
	close(c->reserve_fd);
	fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd >= 0) {
		send(fd, c->refusal, c->refusal_len, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd); /* no descriptor to spare for a graceful close */
		atomic_fetch_add(&c->refused, 1);
	}
	c->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	warn_sometimes(c, "out of file descriptors: new connections are refused");
}

static void accept_all(struct serve_conns *c)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(c->listen_fd, (struct sockaddr *)&ss, &len,
				 SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				refuse_without_fds(c);
			else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				warn_sometimes(c, strerror(errno));
			if (errno != ECONNABORTED && errno != EINTR)
				return;
			continue;
		}
		if (atomic_load(&c->live) >= c->max_connections) {
			refuse(c, fd);
			warn_sometimes(c, "at the connection cap: new connections are refused");
			continue;
		}
		atomic_fetch_add(&c->live, 1);
		if (c->hand_over(c->arg, fd, (struct sockaddr *)&ss, len))
			atomic_fetch_sub(&c->live, 1); /* refused and closed by the taker */
	}
}

/* Read and drop what refused clients send; close them at EOF or time. */
static void tend_lingering(struct serve_conns *c, const struct pollfd *pfd, uint64_t now)
{
	char buf[4096];
	int kept = 0;

	for (int i = 0; i < c->n_lingering; i++) {
		struct closing *l = &c->lingering[i];
		bool done = now >= l->until_ms;

		if (!done && pfd && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);

			done = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
		}
		if (done)
			close(l->fd);
		else
			c->lingering[kept++] = *l;
	}
	c->n_lingering = kept;
}

/* Shut the connections whose headers are overdue; libmicrohttpd then
 * sees the socket fail and closes it. */
static void sweep(struct serve_conns *c, uint64_t now)
{
	pthread_mutex_lock(&c->lock);
	for (struct conn_entry *e = c->head; e; e = e->next) {
		if (e->shut || !e->deadline_ms || now < e->deadline_ms)
			continue;
		shutdown(e->fd, SHUT_RDWR);
		e->shut = true;
		atomic_fetch_add(&c->timed_out, 1);
	}
	pthread_mutex_unlock(&c->lock);
}

static void *acceptor(void *arg)
{
	struct serve_conns *c = arg;
	struct pollfd pfd[2 + LINGER_MAX];
	uint64_t next_sweep = 0;

	while (!atomic_load(&c->stopping)) {
		uint64_t now;
		int n = 2;

		pfd[0] = (struct pollfd){ .fd = c->listen_fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = c->wake[0], .events = POLLIN };
		for (int i = 0; i < c->n_lingering; i++)
			pfd[n++] = (struct pollfd){ .fd = c->lingering[i].fd, .events = POLLIN };
		if (poll(pfd, n, SWEEP_MS) < 0 && errno != EINTR)
			break;
		now = clock_ms(CLOCK_MONOTONIC);
		tend_lingering(c, &pfd[2], now);
		if (pfd[0].revents & POLLIN)
			accept_all(c);
		if (now >= next_sweep) {
			sweep(c, now);
			next_sweep = now + SWEEP_MS;
		}
	}
	return NULL;
}

int conns_start(struct serve_conns *c)
{
	int ret = pthread_create(&c->thread, NULL, acceptor, c);

	if (ret)
		return -ret;
	c->started = true;
	return 0;
}

void conns_stop(struct serve_conns *c)
{
	if (!c || atomic_exchange(&c->stopping, true))
		return;
	if (c->started) {
		(void)!write(c->wake[1], "x", 1);
		pthread_join(c->thread, NULL);
	}
	tend_lingering(c, NULL, UINT64_MAX); /* closes them all */
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	c->listen_fd = -1;
}

void conns_free(struct serve_conns *c)
{
	if (!c)
		return;
	conns_stop(c);
	while (c->head) {
		struct conn_entry *e = c->head;
		c->head = e->next;
		free(e);
	}
	close(c->wake[0]);
	close(c->wake[1]);
	if (c->reserve_fd >= 0)
		close(c->reserve_fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

struct conn_entry *conns_opened(struct serve_conns *c, int fd)
{
	struct conn_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->fd = fd;
	e->opened_ms = clock_ms(CLOCK_MONOTONIC);
	e->deadline_ms = e->opened_ms + c->header_timeout_ms;
	pthread_mutex_lock(&c->lock);
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	pthread_mutex_unlock(&c->lock);
	return e;
}

void conns_closed(struct serve_conns *c, struct conn_entry *e)
{
	atomic_fetch_sub(&c->live, 1);
	if (!e)
		return;
	pthread_mutex_lock(&c->lock);
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	pthread_mutex_unlock(&c->lock);
	free(e);
}

void conns_headers_in(struct serve_conns *c, struct conn_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&c->lock);
	e->deadline_ms = 0;
	pthread_mutex_unlock(&c->lock);
}

void conns_request_done(struct serve_conns *c, struct conn_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&c->lock);
	e->deadline_ms = clock_ms(CLOCK_MONOTONIC) + c->header_timeout_ms;
	e->answered = true;
	pthread_mutex_unlock(&c->lock);
}

uint64_t conns_first_request_ms(struct serve_conns *c, struct conn_entry *e)
{
	uint64_t ms;

	if (!e)
		return 0;
	pthread_mutex_lock(&c->lock);
	ms = e->answered ? 0 : e->opened_ms;
	pthread_mutex_unlock(&c->lock);
	return ms;
}

uint32_t conns_live(struct serve_conns *c)
{
	return atomic_load(&c->live);
}

uint64_t conns_timed_out(struct serve_conns *c)
{
	return atomic_load(&c->timed_out);
}

uint64_t conns_refused(struct serve_conns *c)
{
	return atomic_load(&c->refused);
}
