/* The agent suite's children and listeners (agent_children.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "agent_children.h"

/* ---- listeners (outside every sandbox) ---- */

int listen_on(int family, int type, int *port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, len) || (type == SOCK_STREAM && listen(fd, 16)) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len)) {
		close(fd);
		return -1;
	}
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static int unix_socket_at(int type, const char *path, bool abstract)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (abstract) {
		a.sun_path[0] = 0;
		snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "%s", path);
		len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(path);
	} else {
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
		len = sizeof(a);
	}
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) ||
	    (type == SOCK_STREAM && listen(fd, 4)))
		return -1;
	return fd;
}

int listen_unix(const char *path, bool abstract)
{
	return unix_socket_at(SOCK_STREAM, path, abstract);
}

int bind_unix_dgram(const char *path, bool abstract)
{
	return unix_socket_at(SOCK_DGRAM, path, abstract);
}

/* A listener "saw nothing": no connection is pending. */
bool saw_nothing(int fd, bool stream)
{
	char b;
	int c = stream ? accept(fd, NULL, NULL) : (int)recv(fd, &b, 1, MSG_DONTWAIT);

	if (c >= 0 && stream)
		close(c);
	return c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* ---- what children do inside a sandbox: return errno (0 = success) ---- */


/* A unix socket for child_net: a fresh one, or one end of a socketpair
 * (the other end in *peer), after connect(AF_UNSPEC) if asked. */
static int unix_socket_for(const struct net_arg *n, int *peer)
{
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	int sv[2];

	*peer = -1;
	if (!n->from_pair && !n->to_pair_peer)
		return socket(AF_UNIX, n->type, 0);
	if (socketpair(AF_UNIX, n->type, 0, sv))
		return -1;
	*peer = sv[1];
	if (n->unspec_first)
		connect(sv[0], &unspec, sizeof(unspec));
	return sv[0];
}

int child_net(void *p)
{
	struct net_arg *n = p;
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd, peer = -1, rc;
	char b;

	fd = n->family == AF_UNIX ? unix_socket_for(n, &peer) : socket(n->family, n->type, 0);
	if (fd < 0)
		return 100;
	if (n->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(n->port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	} else if (n->family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(n->port);
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	} else {
		struct sockaddr_un *a = (struct sockaddr_un *)&ss;
		a->sun_family = AF_UNIX;
		if (n->abstract) {
			snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "%s", n->unix_name);
			len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(n->unix_name);
		} else {
			snprintf(a->sun_path, sizeof(a->sun_path), "%s", n->unix_name ?: "");
			len = sizeof(*a);
		}
	}
	if (n->to_pair_peer)
		rc = send(fd, "x", 1, 0) != 1               ? errno
		     : recv(peer, &b, 1, MSG_DONTWAIT) == 1 ? 0
							    : EIO;
	else if (n->bind_only)
		rc = bind(fd, (struct sockaddr *)&ss, len) ? errno : 0;
	else if (n->sendto)
		rc = sendto(fd, "x", 1, 0, (struct sockaddr *)&ss, len) == 1 ? 0 : errno;
	else
		rc = connect(fd, (struct sockaddr *)&ss, len) ? errno : 0;
	close(fd);
	if (peer >= 0)
		close(peer);
	if (n->then_sleep)
		sleep(30);
	return rc;
}

int child_open(void *p)
{
	struct open_arg *o = p;
	int fd;

	if (o->cwd && chdir(o->cwd))
		return 101;
	if (o->uid && (setgid(o->uid) || setuid(o->uid)))
		return 102;
	fd = open(o->path, o->flags, 0600);
	return fd >= 0 ? 0 : errno;
}


int child_open_bound(void *p)
{
	struct bind_arg *b = p;
	char path[4096];
	int fd;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 103;
	if ((mkdir(b->dst, 0755) && errno != EEXIST) || mount(b->src, b->dst, NULL, MS_BIND, NULL))
		return 104;
	snprintf(path, sizeof(path), "%s/%s", b->dst, b->file);
	fd = open(path, b->flags, 0600);
	return fd >= 0 ? 0 : errno;
}

int child_exec(void *p)
{
	struct exec_arg *x = p;
	char *argv[] = { "busybox", "touch", (char *)x->marker, NULL };

	execv(x->exe, argv);
	return errno;
}

int child_fork_bomb(void *p)
{
	int v1_fd = *(int *)p;

	/* A safety net beneath the agent: a v1 pids limit well above the
	 * policy's max_tasks, so the agent's limit is the one that trips. */
	if (v1_fd >= 0 && write(v1_fd, "0", 1) != 1)
		return 102;
	for (;;)
		fork();
	return 0;
}

/* Thousands of denied sendto()s, then a kill-class file trip: the kill
 * must happen although the flood could fill the ring buffer. */
int child_flood_then_trip(void *p)
{
	struct net_arg udp = {
		.family = AF_INET, .type = SOCK_DGRAM, .port = *(int *)p, .sendto = true
	};
	int fd;

	for (int i = 0; i < 50000; i++)
		child_net(&udp);
	fd = open("/etc/hostname", O_RDONLY);
	sleep(20); /* LSM mode refused the open: wait for the agent's kill */
	return fd >= 0 ? 0 : errno;
}

int child_fork_some(void *p)
{
	for (int i = 0; i < 40; i++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0)
			return errno;
		waitpid(pid, NULL, 0);
	}
	return 0;
}

/* io_uring IORING_OP_OPENAT, by raw syscalls (no liburing). */
int child_uring_open(void *p)
{
	const char *path = p;
	struct io_uring_params prm = { 0 };
	int ring = syscall(__NR_io_uring_setup, 4, &prm);
	void *sq, *cq;
	struct io_uring_sqe *sqes;
	unsigned *tail, *array, *ctail;
	struct io_uring_cqe *cqes;

	if (ring < 0)
		return 200 + (errno & 31);
	sq = mmap(NULL, prm.sq_off.array + prm.sq_entries * sizeof(unsigned),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
	cq = mmap(NULL, prm.cq_off.cqes + prm.cq_entries * sizeof(struct io_uring_cqe),
		  PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
	sqes = mmap(NULL, prm.sq_entries * sizeof(*sqes), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
		return 230;
	memset(&sqes[0], 0, sizeof(sqes[0]));
	sqes[0].opcode = IORING_OP_OPENAT;
	sqes[0].fd = AT_FDCWD;
	sqes[0].addr = (unsigned long)path;
	sqes[0].open_flags = O_RDONLY;
	array = (unsigned *)((char *)sq + prm.sq_off.array);
	tail = (unsigned *)((char *)sq + prm.sq_off.tail);
	array[*tail & (prm.sq_entries - 1)] = 0;
	__atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return 231;
	ctail = (unsigned *)((char *)cq + prm.cq_off.tail);
	if (__atomic_load_n(ctail, __ATOMIC_ACQUIRE) == 0)
		return 232;
	cqes = (struct io_uring_cqe *)((char *)cq + prm.cq_off.cqes);
	return cqes[0].res >= 0 ? 0 : -cqes[0].res;
}
