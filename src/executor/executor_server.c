/* The long-lived executor's local socket (see src/executor/executor_server.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include "lib/array_len.h"
#include "lib/first_trace.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "control/agent_shared.h"
#include "pool/pool.h"
#include "executor_proto.h"
#include "executor_server.h"
#include "pool/pool_stack.h"

#define MAX_CLIENTS 4096
/* Threads that finished a client wait for the next one, up to this many
 * (see take_client()). */
#define KEEP_IDLE 8
/* `sandguard exec` sends its request as soon as it connects and reads its
 * answer as it comes: a client silent for this long (each wait for its
 * request's bytes) or not reading (each wait to send it its answer) is
 * broken. Without a bound one holds its thread, and a stop that waits for
 * every client, for ever. */
#define REQUEST_WAIT_S 10
#define ANSWER_WAIT_S  60

extern char **environ;

struct executor_server {
	int listen_fd;
	int stop_pipe[2]; /* wakes the acceptor */
	char path[PATH_MAX];
	struct pool *pool;
	struct agent_shared *agent;
	char *env; /* our shared environment: sorted entries, NUL-separated */
	size_t env_len;
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t idle;  /* active or threads reached 0 */
	pthread_cond_t work;  /* a client queued for a waiting thread, or stopping */
	struct client *queue; /* taken, for the waiting threads, first come first */
	unsigned active;      /* clients taken and not yet answered */
	unsigned threads;     /* client threads alive */
	unsigned waiting;     /* of them, waiting for a client and not promised one */
	unsigned max_active;
	bool stopping;
};

/* One client's request, as received. */
struct client {
	struct executor_server *s;
	int fd;
	int cwd, in; /* -1 when not sent */
	struct executor_request h;
	char *strings;
	struct exec_request req; /* its strings in `strings`, its argv in `vec` */
	char **vec;
	struct client *next; /* in the server's queue */
};

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries executor_env_shared() keeps, sorted, NUL-separated: the same
 * text for the same environment, whatever its order. */
static char *env_text(char **entries, size_t n, size_t *len)
{
	char **keep = calloc(n + 1, sizeof(*keep)), *text = NULL;
	size_t k = 0, off = 0;

	*len = 0;
	if (!keep)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (executor_env_shared(entries[i]))
			keep[k++] = entries[i];
	qsort(keep, k, sizeof(*keep), by_string);
	for (size_t i = 0; i < k; i++)
		*len += strlen(keep[i]) + 1;
	text = malloc(*len + 1);
	for (size_t i = 0; text && i < k; i++) {
		memcpy(text + off, keep[i], strlen(keep[i]) + 1);
		off += strlen(keep[i]) + 1;
	}
	free(keep);
	return text;
}

static int receive(struct client *c)
{
	int fds[2] = { -1, -1 };
	char cbuf[CMSG_SPACE(sizeof(fds))];
	struct iovec iov = { .iov_base = &c->h, .iov_len = sizeof(c->h) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n;

	do
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	cm = CMSG_FIRSTHDR(&mh);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fds, CMSG_DATA(cm), cm->cmsg_len - CMSG_LEN(0));
	c->cwd = fds[0];
	c->in = fds[1];
	if (n != (ssize_t)sizeof(c->h) || c->h.magic != EXECUTOR_MAGIC ||
	    c->h.len > EXECUTOR_MAX_STRINGS || c->cwd < 0 || (c->h.has_stdin && c->in < 0))
		return -EPROTO;
	c->strings = malloc(c->h.len + 1);
	if (!c->strings)
		return -ENOMEM;
	return executor_recv_all(c->fd, c->strings, c->h.len);
}

/* The request, and whether the client's environment is ours. */
static int unpack(struct client *c, char *why, size_t len)
{
	char **env, *text;
	size_t env_len;
	int err = executor_request_unpack(&c->h, c->strings, &c->req, &env, &c->vec);

	if (err)
		return err;
	text = env_text(env, c->h.envc, &env_len);
	if (!text)
		err = -ENOMEM;
	else if (env_len != c->s->env_len || memcmp(text, c->s->env, env_len)) {
		snprintf(
			why, len,
			"the client's SANDGUARD_* environment is not the executor's: it runs cold\n");
		err = -EXDEV;
	}
	free(text);
	return err;
}

static void answer(struct client *c, int code, const char *out, size_t out_len, const char *err,
		   size_t err_len)
{
	struct executor_reply r = {
		.magic = EXECUTOR_MAGIC, .code = code, .out_len = out_len, .err_len = err_len
	};
	struct iovec iov[] = { { &r, sizeof(r) },
			       { (void *)out, out_len },
			       { (void *)err, err_len } };

	if (executor_send_iov(c->fd, iov, ARRAY_LEN(iov)))
		sg_debug("executor: a client went away before its answer");
}

/* first_trace_now(): the client's run may be owed from here on. */
static void started(void *arg)
{
	answer(arg, EXECUTOR_STARTED, "", 0, "", 0);
}

/* The command, in the client's directory, its output captured. fs_err:
 * why this thread could not have a working directory of its own (0: it
 * has). */
static void run_command(struct client *c, int fs_err)
{
	struct exec_io io = { .in_fd = c->in,
			      .path = "warm",
			      .agent = agent_shared_get(c->s->agent),
			      .sandboxes = pool_source(c->s->pool),
			      .reap_elsewhere = true,
			      .caller_fd = c->fd };
	char *out = NULL, *err = NULL;
	size_t out_len = 0, err_len = 0;
	int code;

	/* This thread's own working directory (client_thread()): the
	 * client's. */
	if (fs_err || fchdir(c->cwd)) {
		char why[128];

		snprintf(why, sizeof(why), "cannot enter the client's directory: %s\n",
			 strerror(fs_err ? fs_err : errno));
		answer(c, EXECUTOR_NOT_SERVED, "", 0, why, strlen(why));
		return;
	}
	io.out = open_memstream(&out, &out_len);
	io.err = open_memstream(&err, &err_len);
	if (!io.out || !io.err) {
		answer(c, EXECUTOR_NOT_SERVED, "", 0, "out of memory\n", 14);
		if (io.out)
			fclose(io.out);
		if (io.err)
			fclose(io.err);
		return;
	}
	/* The client hears EXECUTOR_STARTED just before the request leaves its
	 * first trace that outlives us (its run's record, a booking): until
	 * then nothing of it is owed, and were we killed the client would run
	 * it cold, once; from then on it never does. Not before: a request
	 * may wait here for minutes (an admission line, a sandbox prepared
	 * for it), and a kill then must not cost it its run. */
	first_trace_arm(started, c);
	sg_log_to(io.err);
	code = exec_command_run(&c->req, &io);
	sg_log_to(NULL);
	first_trace_disarm();
	fclose(io.out);
	fclose(io.err);
	answer(c, code, out, out_len, err, err_len);
	free(out);
	free(err);
}

static int bound_waits(int fd)
{
	struct timeval request = { .tv_sec = REQUEST_WAIT_S }, answer = { .tv_sec = ANSWER_WAIT_S };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &request, sizeof(request)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &answer, sizeof(answer)))
		return -errno;
	return 0;
}

/* One client, from its request to its answer; then it is forgotten. */
static void serve_client(struct client *c, int fs_err)
{
	struct executor_server *s = c->s;
	char why[160] = "";
	int err = bound_waits(c->fd);

	err = err ?: receive(c);

	if (!err)
		err = unpack(c, why, sizeof(why));
	if (err == -EXDEV)
		answer(c, EXECUTOR_NOT_SERVED, "", 0, why, strlen(why));
	else if (err)
		sg_debug("executor: a bad request: %s", strerror(-err));
	else
		run_command(c, fs_err);
	/* Answered (or given up on): the pool's own work may go on. */
	pool_answered(s->pool);
	fs_close(&c->fd);
	fs_close(&c->cwd);
	fs_close(&c->in);
	free(c->strings);
	free(c->vec);
	free(c);
}

/* A client thread: serves the client it was made for, then waits for the
 * next one take_client() queues, while no more than KEEP_IDLE wait.
 *
 * Why threads stay: a page fault costs 20-60 us on the VMs this runs on,
 * and a new thread faults its stack and malloc arena in again (glibc gives
 * an ended thread's stack back with MADV_DONTNEED; the policy alone is 35
 * KB, copied on the stack), and sets up its tcache. Its stack is kept out
 * of the pool's forks for the same reason (src/pool/pool_stack.h).
 *
 * What a client leaves in the thread: its working directory (the next
 * fchdir()s to its own) and nothing else: the log stream, the caller
 * watched by the admission lines and the pool's quiet count are reset at
 * each answer, and everything a run opens is closed by it
 * (tests/integration/36-warm-threads.py serves clients one after another
 * in the same thread). */
static void *client_thread(void *arg)
{
	struct client *c = arg;
	struct executor_server *s = c->s;
	/* Its own working directory, from the first client on. */
	int fs_err = unshare(CLONE_FS) ? errno : 0;

	pool_stack_keep_out();

	for (;;) {
		serve_client(c, fs_err);
		pthread_mutex_lock(&s->lock);
		if (--s->active == 0)
			pthread_cond_broadcast(&s->idle);
		if (s->stopping || s->waiting >= KEEP_IDLE)
			break;
		s->waiting++;
		while (!s->queue && !s->stopping)
			pthread_cond_wait(&s->work, &s->lock);
		if (!s->queue) /* stopping, and not promised a client */
			break;
		c = s->queue;
		s->queue = c->next;
		pthread_mutex_unlock(&s->lock);
	}
	if (--s->threads == 0)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	/* A stack glibc would hand to a thread that forks: never given back
	 * (the process's exit ends this thread). */
	if (pool_stack_release()) {
		sg_warn("executor: a client thread's stack stays out of forks: the thread stays");
		for (;;)
			pause();
	}
	return NULL;
}

/* Root only, as the agent's control socket. */
static bool peer_is_root(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) && cred.uid == 0;
}

/* To a thread that waits for a client, or a new one. */
static void take_client(struct executor_server *s, int fd)
{
	struct client *c = calloc(1, sizeof(*c));
	pthread_attr_t attr;
	pthread_t t;
	int err = -ENOMEM;

	if (c)
		*c = (struct client){ .s = s, .fd = fd, .cwd = -1, .in = -1 };
	pthread_mutex_lock(&s->lock);
	if (c && s->active < s->max_active) {
		s->active++;
		if (s->waiting) {
			struct client **end = &s->queue;

			/* Promised: this one leaves the waiting count now, so
			 * the next client finds it taken. */
			s->waiting--;
			while (*end) /* no longer than KEEP_IDLE */
				end = &(*end)->next;
			*end = c;
			pthread_cond_signal(&s->work);
			pthread_mutex_unlock(&s->lock);
			return;
		}
		s->threads++;
		err = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (!err) {
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = -pthread_create(&t, &attr, client_thread, c);
		pthread_attr_destroy(&attr);
		if (!err)
			return;
		pthread_mutex_lock(&s->lock);
		s->threads--;
		if (--s->active == 0)
			pthread_cond_broadcast(&s->idle);
		pthread_mutex_unlock(&s->lock);
	}
	free(c);
	/* No room: the client runs cold (it sent nothing that ran). */
	answer(&(struct client){ .fd = fd }, EXECUTOR_NOT_SERVED, "", 0, "the executor is full\n",
	       21);
	close(fd);
}

static void *acceptor(void *arg)
{
	struct executor_server *s = arg;

	for (;;) {
		struct pollfd pfd[2] = { { .fd = s->listen_fd, .events = POLLIN },
					 { .fd = s->stop_pipe[0], .events = POLLIN } };
		int fd;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (!pfd[0].revents)
			continue;
		fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (!peer_is_root(fd)) {
			close(fd);
			continue;
		}
		take_client(s, fd);
	}
	return NULL;
}

/* Bind <run>/executor.sock, replacing a stale one but never a live one. */
static int listen_on(struct executor_server *s, char *detail, size_t len)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	mode_t old;
	int probe, err;

	err = executor_socket_path(s->path, sizeof(s->path));
	if (!err)
		err = fs_run_subdir("", 0755, addr.sun_path, sizeof(addr.sun_path));
	if (err || strlen(s->path) >= sizeof(addr.sun_path)) {
		snprintf(detail, len, "no usable socket path under the run directory: %s",
			 strerror(err ? -err : ENAMETOOLONG));
		return err ? err : -ENAMETOOLONG;
	}
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", s->path);
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && !connect(probe, (struct sockaddr *)&addr, sizeof(addr))) {
		close(probe);
		snprintf(detail, len, "another executor listens on %s", s->path);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(s->path);
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	old = umask(0177); /* 0600: root's alone */
	err = s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) ||
			      listen(s->listen_fd, 1024)
		      ? -errno
		      : 0;
	umask(old);
	if (err)
		snprintf(detail, len, "cannot listen on %s: %s", s->path, strerror(-err));
	return err;
}

int executor_server_start(const struct executor_server_opts *o, struct executor_server **out,
			  char *detail, size_t len)
{
	struct executor_server *s = calloc(1, sizeof(*s));
	size_t n_env = 0;
	int err;

	*out = NULL;
	if (!s) {
		snprintf(detail, len, "out of memory");
		return -ENOMEM;
	}
	s->listen_fd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
	s->pool = o->pool;
	s->agent = o->agent;
	s->max_active = o->max_clients ? o->max_clients : MAX_CLIENTS;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	pthread_cond_init(&s->work, NULL);
	while (environ && environ[n_env])
		n_env++;
	s->env = env_text(environ, n_env, &s->env_len);
	err = s->env ? 0 : -ENOMEM;
	if (!err && pipe2(s->stop_pipe, O_CLOEXEC))
		err = -errno;
	err = err ?: listen_on(s, detail, len);
	if (!err && (err = -pthread_create(&s->acceptor, NULL, acceptor, s)))
		snprintf(detail, len, "cannot start the executor's thread: %s", strerror(-err));
	if (err) {
		if (s->listen_fd >= 0)
			unlink(s->path);
		fs_close(&s->listen_fd);
		fs_close(&s->stop_pipe[0]);
		fs_close(&s->stop_pipe[1]);
		pthread_cond_destroy(&s->work);
		free(s->env);
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

const char *executor_server_path(const struct executor_server *s)
{
	return s->path;
}

void executor_server_stop(struct executor_server *s)
{
	if (!s)
		return;
	if (write(s->stop_pipe[1], "x", 1) != 1)
		sg_warn("executor: cannot wake the acceptor: %s", strerror(errno));
	pthread_join(s->acceptor, NULL);
	/* Clients that connected from now on find no one, and run cold. */
	unlink(s->path);
	fs_close(&s->listen_fd);
	pthread_mutex_lock(&s->lock);
	while (s->active)
		pthread_cond_wait(&s->idle, &s->lock);
	/* Every client answered, none queued: the waiting threads end. */
	s->stopping = true;
	pthread_cond_broadcast(&s->work);
	while (s->threads)
		pthread_cond_wait(&s->idle, &s->lock);
	pthread_mutex_unlock(&s->lock);
	fs_close(&s->stop_pipe[0]);
	fs_close(&s->stop_pipe[1]);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->idle);
	pthread_cond_destroy(&s->work);
	free(s->env);
	free(s);
}
