/* The event-pipeline generator: inside a sandbox whose policy says
 * "file": "log", every open of a file outside the allowlist is one
 * logged file event (and the open succeeds), so a loop of open+close is
 * the cheapest steady source of events. Paced to RATE opens per second
 * (0: as fast as it goes) for SECONDS.
 *
 * The kernel side sends at most SG_EVENTS_PER_SANDBOX events per sandbox
 * (include/abi/maps.h) and only counts the rest, so a node's event rate comes
 * from many sandboxes: the generator moves itself to the next sandbox
 * cgroup of LIST (one directory per line) after every PER opens, and stops
 * early if LIST runs out.
 *
 *   eventgen --cgroups LIST --per PER PATH RATE SECONDS
 *
 * Output, one line: "opens <n> seconds <s> rate <opens/s> sandboxes <used>".
 * Nothing but PATH is opened after joining the first sandbox: every
 * cgroup.procs is opened beforehand. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BURST 64 /* opens between clock reads */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Opens DIR/cgroup.procs for every line of LIST; returns the fds. */
static int *open_cgroups(const char *list, int *count)
{
	char line[4096], path[4200];
	struct rlimit rl;
	int *fds = NULL, n = 0, cap = 0;
	FILE *f = fopen(list, "re");

	if (!f) {
		fprintf(stderr, "eventgen: %s: %s\n", list, strerror(errno));
		exit(1);
	}
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0])
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			fds = realloc(fds, cap * sizeof(*fds));
			if (!fds)
				exit(1);
		}
		snprintf(path, sizeof(path), "%s/cgroup.procs", line);
		fds[n] = open(path, O_WRONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			fprintf(stderr, "eventgen: %s: %s\n", path, strerror(errno));
			exit(1);
		}
		n++;
	}
	fclose(f);
	if (!n) {
		fprintf(stderr, "eventgen: no cgroups in %s\n", list);
		exit(1);
	}
	*count = n;
	return fds;
}

static void join(int fd)
{
	if (write(fd, "0", 1) != 1) {
		fprintf(stderr, "eventgen: cannot join a sandbox cgroup: %s\n", strerror(errno));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *path;
	double rate, seconds, start, elapsed = 0;
	uint64_t opens = 0, per, in_this = 0;
	int *cg, n_cg, used = 1, fd;

	if (argc != 8 || strcmp(argv[1], "--cgroups") || strcmp(argv[3], "--per")) {
		fprintf(stderr, "usage: eventgen --cgroups LIST --per PER PATH RATE SECONDS\n");
		return 64;
	}
	per = strtoull(argv[4], NULL, 10);
	path = argv[5];
	rate = atof(argv[6]);
	seconds = atof(argv[7]);
	if (!per)
		return 64;
	cg = open_cgroups(argv[2], &n_cg);
	join(cg[0]);

	start = now_s();
	while (elapsed < seconds) {
		for (int i = 0; i < BURST; i++) {
			if (in_this == per) {
				if (used == n_cg)
					goto out; /* no fresh sandbox left */
				join(cg[used++]);
				in_this = 0;
			}
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				fprintf(stderr, "eventgen: %s: %s\n", path, strerror(errno));
				return 1;
			}
			close(fd);
			opens++;
			in_this++;
		}
		elapsed = now_s() - start;
		if (rate > 0) {
			/* Ahead of schedule: sleep until the next burst is due. */
			double ahead = opens / rate - elapsed;

			if (ahead > 0) {
				struct timespec ts = { (time_t)ahead,
						       (long)((ahead - (time_t)ahead) * 1e9) };
				nanosleep(&ts, NULL);
				elapsed = now_s() - start;
			}
		}
	}
out:
	elapsed = now_s() - start;
	printf("opens %llu seconds %.3f rate %.0f sandboxes %d\n", (unsigned long long)opens,
	       elapsed, opens / elapsed, used);
	return 0;
}
