/* Launch breakdown: what it costs a new process to get into a fresh
 * cgroup, the way a process is moved there (write "0" to cgroup.procs
 * after fork) and the way clone3(CLONE_INTO_CGROUP) does it (born inside,
 * no migration); with a v1 parent (hybrid nodes), also the two ways a new
 * process joins a v1 cgroup itself: "0" to its cgroup.procs (the whole
 * process: the global threadgroup rwsem) and "0" to its `tasks` (the
 * calling thread alone: no rwsem; what a sandbox's init does). Each trial
 * makes new cgroups, like a sandbox launch, and waits GAP_MS before each
 * join, as launches are spaced out in real use (back-to-back migrations
 * share one RCU grace period and look cheaper than they are).
 *
 *   cgjoin PARENT TRIALS GAP_MS [V1_PARENT]
 *
 * Output: one line per trial, "migrate_ms <x> clone_into_ms <y>" and,
 * with V1_PARENT, " v1_procs_ms <z> v1_tasks_ms <w>": each the child's
 * write, or clone3 until the child runs (it reports through a pipe). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "cgjoin: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* fork; the child writes "0" to dir/file and sends back how long that
 * took. */
static double migrate(const char *dir, const char *file)
{
	char path[4096];
	double took = -1;
	int p[2], fd, status;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pipe2(p, O_CLOEXEC))
		die(path);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		double t0 = now_ms(), dt;

		if (write(fd, "0", 1) != 1)
			_exit(1);
		dt = now_ms() - t0;
		_exit(write(p[1], &dt, sizeof(dt)) == sizeof(dt) ? 0 : 1);
	}
	close(p[1]);
	if (read(p[0], &took, sizeof(took)) != sizeof(took))
		took = -1;
	waitpid(pid, &status, 0);
	close(p[0]);
	close(fd);
	return took;
}

/* clone3 straight into the cgroup: time until the child has run. */
static double clone_into(const char *dir)
{
	struct clone_args ca;
	double t0, took = -1;
	int p[2], dfd, status;
	char c;
	long pid;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || pipe2(p, O_CLOEXEC))
		die(dir);
	memset(&ca, 0, sizeof(ca));
	ca.flags = CLONE_INTO_CGROUP;
	ca.exit_signal = SIGCHLD;
	ca.cgroup = dfd;
	t0 = now_ms();
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0)
		die("clone3(CLONE_INTO_CGROUP)");
	if (pid == 0)
		_exit(write(p[1], "x", 1) == 1 ? 0 : 1);
	close(p[1]);
	if (read(p[0], &c, 1) == 1)
		took = now_ms() - t0;
	waitpid(pid, &status, 0);
	close(p[0]);
	close(dfd);
	return took;
}

/* A fresh cgroup PARENT/<prefix><i>, GAP_MS, then one join through file. */
static double fresh_join(const char *parent, const char *prefix, int i, int gap, const char *file)
{
	char dir[4096];
	double took;

	snprintf(dir, sizeof(dir), "%s/%s%d", parent, prefix, i);
	if (mkdir(dir, 0755))
		die(dir);
	sleep_ms(gap);
	took = file ? migrate(dir, file) : clone_into(dir);
	rmdir(dir);
	return took;
}

int main(int argc, char **argv)
{
	const char *v1 = argc == 5 ? argv[4] : NULL;
	int trials, gap;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: cgjoin PARENT TRIALS GAP_MS [V1_PARENT]\n");
		return 64;
	}
	trials = atoi(argv[2]);
	gap = atoi(argv[3]);
	for (int i = 0; i < trials; i++) {
		printf("migrate_ms %.3f", fresh_join(argv[1], "m", i, gap, "cgroup.procs"));
		printf(" clone_into_ms %.3f", fresh_join(argv[1], "c", i, gap, NULL));
		if (v1) {
			printf(" v1_procs_ms %.3f", fresh_join(v1, "p", i, gap, "cgroup.procs"));
			printf(" v1_tasks_ms %.3f", fresh_join(v1, "t", i, gap, "tasks"));
		}
		printf("\n");
		fflush(stdout);
	}
	return 0;
}
