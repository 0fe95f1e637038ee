/* Tight loops over the operations the agent hooks, for the hook-overhead
 * scenarios: open+close of a file, fork+exec+wait of a program, TCP
 * connect+close to a loopback listener. Prints the time per operation.
 *
 *   hookloop [--cgroup DIR] open     ITER PATH
 *   hookloop [--cgroup DIR] forkexec ITER PROGRAM
 *   hookloop [--cgroup DIR] connect  ITER PORT
 *   hookloop [--cgroup DIR] getppid  ITER -
 *   hookloop --cgroup DIR   violate  1    PORT
 *
 * getppid is a system call no program hooks: what it costs more with the
 * agent attached is the syscall slow path a syscall tracepoint puts every
 * task of the node on. violate (for the kill-latency scenario) connects
 * once to PORT on loopback, which the sandbox's policy does not allow,
 * then waits to be killed; it prints the errno of the connect.
 *
 * --cgroup DIR: join the v2 cgroup DIR (write to DIR/cgroup.procs) before
 * the loop, so that the loop runs inside a sandbox. The connect listener is
 * forked before that, so it stays outside (a sandbox's replies to an
 * ephemeral port would be egress the policy does not allow).
 *
 * Output, one line: "<mode> <iterations> <total_ns> <ns_per_op> <fastest_ns_per_op>",
 * the last one the fastest of CHUNKS equal chunks of the timed pass.
 * A tenth of ITER runs first, untimed, to warm caches. Exit 1 if any
 * operation failed (the loop would measure an error path otherwise). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNKS 40

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "hookloop: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void join_cgroup(const char *dir)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		die(path);
	close(fd);
}

static void open_loop(long n, const char *path)
{
	for (long i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			die(path);
		close(fd);
	}
}

static void forkexec_loop(long n, const char *prog)
{
	char *const argv[] = { (char *)prog, NULL };
	char *const envp[] = { NULL };

	for (long i = 0; i < n; i++) {
		int status;
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			execve(prog, argv, envp);
			_exit(127);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			die("child failed");
	}
}

/* The acceptor: accept and close until killed. */
static pid_t start_listener(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	if (s < 0)
		die("socket");
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 4096))
		die("bind/listen");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;) {
			int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0)
				close(c);
			else if (errno != EINTR && errno != ECONNABORTED)
				_exit(0);
		}
	}
	close(s);
	return pid;
}

static void getppid_loop(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
}

/* One denied connect, then wait for the agent to empty the sandbox. */
static int violate(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	err = s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) ? errno : 0;
	printf("violate %d\n", err);
	fflush(stdout);
	for (int i = 0; i < 30; i++)
		sleep(1);
	return 2; /* not killed */
}

static void connect_loop(long n, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	/* Reset on close: no TIME_WAIT, so ephemeral ports never run out. */
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	for (long i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0)
			die("socket");
		setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		if (connect(s, (struct sockaddr *)&a, sizeof(a)))
			die("connect");
		close(s);
	}
}

static void run_loop(const char *mode, long iters, const char *arg)
{
	if (!strcmp(mode, "open"))
		open_loop(iters, arg);
	else if (!strcmp(mode, "forkexec"))
		forkexec_loop(iters, arg);
	else if (!strcmp(mode, "connect"))
		connect_loop(iters, atoi(arg));
	else
		getppid_loop(iters);
}

int main(int argc, char **argv)
{
	const char *cgroup = NULL, *mode, *arg;
	double fastest = 1e18;
	pid_t listener = 0;
	uint64_t t0, t1;
	long n;

	if (argc > 2 && !strcmp(argv[1], "--cgroup")) {
		cgroup = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 4) {
		fprintf(stderr,
			"usage: hookloop [--cgroup DIR] open|forkexec|connect|getppid|violate ITER ARG\n");
		return 64;
	}
	mode = argv[1];
	n = atol(argv[2]);
	arg = argv[3];
	if (n <= 0)
		return 64;
	if (!strcmp(mode, "connect"))
		listener = start_listener(atoi(arg));
	if (cgroup)
		join_cgroup(cgroup);
	if (!strcmp(mode, "violate"))
		return violate(atoi(arg));

	if (strcmp(mode, "open") && strcmp(mode, "forkexec") && strcmp(mode, "connect") &&
	    strcmp(mode, "getppid")) {
		fprintf(stderr, "hookloop: unknown mode %s\n", mode);
		return 64;
	}
	run_loop(mode, n / 10 > 0 ? n / 10 : 1, arg); /* warm-up, untimed */
	/* The timed pass in CHUNKS chunks: the whole pass's mean, and the
	 * fastest chunk, which a preemption on this shared machine cannot
	 * inflate (a mean takes every one of them in). */
	t0 = now_ns();
	for (int c = 0; c < CHUNKS; c++) {
		long iters = n / CHUNKS + (c < n % CHUNKS ? 1 : 0);
		uint64_t c0 = now_ns(), c1;

		if (iters == 0)
			continue;
		run_loop(mode, iters, arg);
		c1 = now_ns();
		if ((double)(c1 - c0) / iters < fastest)
			fastest = (double)(c1 - c0) / iters;
	}
	t1 = now_ns();
	if (listener > 0) {
		kill(listener, SIGKILL);
		waitpid(listener, NULL, 0);
	}
	printf("%s %ld %llu %.1f %.1f\n", mode, n, (unsigned long long)(t1 - t0),
	       (double)(t1 - t0) / n, fastest);
	return 0;
}
