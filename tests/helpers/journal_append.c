/* Measure what booking costs an executor: N outcome records appended to
 * the journal of a state directory, the way exec_book() does it (encode,
 * lock, write, fdatasync), from P processes at once. Prints one JSON object
 * with the per-append latency in microseconds (mean, p50, p99, max) over
 * every append of every process.
 *
 *   journal_append --state DIR [--n N] [--procs P]
 *
 * For `make bench` and by hand; the journal's disk decides the figure (one
 * fdatasync per record). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "telemetry/journal.h"
#include "telemetry/journal_record.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One process's appends; latencies (ns) into lat[0..n). */
static int run(const struct journal *j, int n, int proc, uint64_t *lat)
{
	for (int i = 0; i < n; i++) {
		struct sg_outcome o = {
			.cause = SG_CAUSE_OK, .rule = -1, .attempt = 1, .final = true
		};
		char *line;
		size_t len;
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
		int err;

		snprintf(o.id, sizeof(o.id), "bench-%d-%d-%d", (int)getpid(), proc, i);
		snprintf(o.tenant, sizeof(o.tenant), "bench");
		snprintf(o.batch_id, sizeof(o.batch_id), "b-%d", i);
		o.ts_ms = clock_ms(CLOCK_REALTIME);
		o.n_scores = 4;
		o.score_mean = 0.5;
		o.score_var = 0.1;
		err = journal_record_encode(&o, NULL, &line, &len);
		if (!err)
			err = journal_append(j, line, len, NULL);
		free(line);
		if (err) {
			fprintf(stderr, "journal_append: %s\n", strerror(-err));
			return 1;
		}
		lat[i] = clock_ns(CLOCK_MONOTONIC) - t0;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "state", required_argument, NULL, 's' },
					      { "n", required_argument, NULL, 'n' },
					      { "procs", required_argument, NULL, 'p' },
					      { 0 } };
	const char *state = NULL;
	int n = 1000, procs = 1, c, failed = 0;
	struct journal j;
	uint64_t *lat, sum = 0, total;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's')
			state = optarg;
		else if (c == 'n')
			n = atoi(optarg);
		else if (c == 'p')
			procs = atoi(optarg);
		else
			return 64;
	}
	if (!state || n < 1 || procs < 1 || journal_init(&j, state)) {
		fprintf(stderr, "usage: journal_append --state DIR [--n N] [--procs P]\n");
		return 64;
	}
	total = (uint64_t)n * procs;
	lat = mmap(NULL, total * sizeof(*lat), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (lat == MAP_FAILED)
		return 1;
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(run(&j, n, p, lat + (uint64_t)p * n));
		if (pid < 0)
			return 1;
	}
	for (int p = 0; p < procs; p++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	if (failed)
		return 1;
	qsort(lat, total, sizeof(*lat), cmp_u64);
	for (uint64_t i = 0; i < total; i++)
		sum += lat[i];
	printf("{\"appends\": %llu, \"procs\": %d, \"mean_us\": %.1f, \"p50_us\": %.1f, "
	       "\"p99_us\": %.1f, \"max_us\": %.1f}\n",
	       (unsigned long long)total, procs, sum / 1e3 / total, lat[total / 2] / 1e3,
	       lat[total * 99 / 100] / 1e3, lat[total - 1] / 1e3);
	return 0;
}
