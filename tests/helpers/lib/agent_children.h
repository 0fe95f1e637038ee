/* What the agent suite's children do inside a sandbox (each returns an
 * errno, 0 = success, as its exit code), and the loopback listeners they
 * aim at, which live outside every sandbox. */
#ifndef SG_AGENT_CHILDREN_H
#define SG_AGENT_CHILDREN_H
#include <stdbool.h>

struct net_arg {
	int family, type, port;
	const char *unix_name;
	bool abstract;
	bool sendto;
	bool from_pair;    /* unix: from one end of a socketpair */
	bool unspec_first; /* ... after connect(AF_UNSPEC) on it */
	bool to_pair_peer; /* unix: send to the socketpair's other end (no address) */
	bool bind_only;    /* unix: bind the address, nothing else */
	bool then_sleep;   /* then sleep 30 s (to be killed) */
};
struct open_arg {
	const char *cwd;
	const char *path;
	int flags;
	unsigned uid; /* 0: stay root; else open as this uid (and gid) */
};
struct exec_arg {
	const char *exe;
	const char *marker;
};

/* In a mount namespace of its own: bind-mount src onto dst (made), then
 * open dst/file. */
struct bind_arg {
	const char *src, *dst, *file;
	int flags;
};

int listen_on(int family, int type, int *port);
int listen_unix(const char *path, bool abstract);
int bind_unix_dgram(const char *path, bool abstract);
/* A listener "saw nothing": no connection or datagram is pending. */
bool saw_nothing(int fd, bool stream);

int child_net(void *p);             /* struct net_arg: connect or sendto */
int child_open(void *p);            /* struct open_arg */
int child_open_bound(void *p);      /* struct bind_arg */
int child_exec(void *p);            /* struct exec_arg: busybox touch marker */
int child_fork_bomb(void *p);       /* int *: a v1 pids procs fd or -1 */
int child_flood_then_trip(void *p); /* int *: a UDP port */
int child_fork_some(void *p);
int child_uring_open(void *p); /* const char *: io_uring openat */

#endif
