/* Scenario 11's event source: runs scripts/bench/ringgen.bpf.c with
 * BPF_PROG_TEST_RUN, which writes logged file events for one registered
 * sandbox into the agent's pinned ring buffer, paced to RATE events per
 * second (0: as fast as it goes) for SECONDS. Each run writes up to BATCH
 * events; the clock is read between runs and the generator sleeps when
 * it is ahead.
 *
 *   ringgen OBJECT PIN_ROOT SANDBOX_CGROUP_DIR RATE SECONDS
 *
 * The object's maps are the agent's (reused from PIN_ROOT): ringgen
 * refuses to run unless every one of them is pinned there already, so it
 * never creates a map in the agent's pin root.
 *
 * Output, one line: "events <offered> seconds <s> rate <offered/s> written <n>"
 * (written: the events the ring buffer took; the rest found it full and
 * were counted as drops in sg_drops, which the agent reports). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define BATCH 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* Every map of the object must be pinned under pin_root already. */
static void check_pinned(struct bpf_object *obj, const char *pin_root)
{
	struct bpf_map *m;
	char path[PATH_MAX];

	bpf_object__for_each_map(m, obj)
	{
		if (!bpf_map__is_internal(m)) {
			snprintf(path, sizeof(path), "%s/%s", pin_root, bpf_map__name(m));
			if (access(path, F_OK)) {
				fprintf(stderr,
					"ringgen: %s: %s (is the agent running with this pin root?)\n",
					path, strerror(errno));
				exit(1);
			}
		}
	}
}

/* One test run: up to `count` events; returns how many the ring took. */
static long run_batch(int prog_fd, unsigned long long cgid, unsigned long long count)
{
	unsigned long long args[2] = { cgid, count };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(args));

	if (bpf_prog_test_run_opts(prog_fd, &opts)) {
		fprintf(stderr, "ringgen: test run: %s\n", strerror(errno));
		exit(1);
	}
	if ((int)opts.retval < 0) {
		fprintf(stderr, "ringgen: cgroup %llu is not a registered sandbox\n", cgid);
		exit(1);
	}
	return (int)opts.retval;
}

int main(int argc, char **argv)
{
	unsigned long long offered = 0, written = 0, want, cgid;
	double rate, seconds, t0, elapsed;
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct stat st;

	if (argc != 6) {
		fprintf(stderr, "usage: ringgen OBJECT PIN_ROOT SANDBOX_CGROUP_DIR RATE SECONDS\n");
		return 64;
	}
	rate = atof(argv[4]);
	seconds = atof(argv[5]);
	if (rate < 0 || seconds <= 0) {
		fprintf(stderr, "ringgen: RATE must be >= 0 and SECONDS > 0\n");
		return 64;
	}
	if (stat(argv[3], &st)) {
		fprintf(stderr, "ringgen: %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	cgid = st.st_ino; /* a cgroup v2 directory's inode is its id */

	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = argv[2]);
	obj = bpf_object__open_file(argv[1], &oo);
	if (!obj) {
		fprintf(stderr, "ringgen: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	check_pinned(obj, argv[2]);
	if (bpf_object__load(obj)) {
		fprintf(stderr, "ringgen: load %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "sg_ringgen");
	if (!prog) {
		fprintf(stderr, "ringgen: no sg_ringgen in %s\n", argv[1]);
		return 1;
	}

	t0 = now_s();
	while ((elapsed = now_s() - t0) < seconds) {
		want = rate > 0 ? (unsigned long long)(rate * elapsed) + 1 : offered + BATCH;
		if (want <= offered) {
			sleep_s((double)BATCH / 2 / rate);
			continue;
		}
		if (want - offered > BATCH)
			want = offered + BATCH;
		written += run_batch(bpf_program__fd(prog), cgid, want - offered);
		offered = want;
	}
	elapsed = now_s() - t0;
	printf("events %llu seconds %.3f rate %.0f written %llu\n", offered, elapsed,
	       offered / elapsed, written);
	bpf_object__close(obj);
	return 0;
}
