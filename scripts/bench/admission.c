/* Scenario 18's helper: the node's CPU admission line (src/node/node_cpu.c)
 * with many commitments held, against the same line empty. Each round
 * holds `held` commitments in this process (as serve holds one per running
 * request), then times `ops` admissions and releases of one more; the
 * counts take turns, round by round. Prints {"<held>": [µs per op, a round
 * each], ...}.
 *
 *   admission RUN_DIR ROUNDS OPS HELD... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "node/node_cpu.h"

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* µs per admission + release with `held` held, or a negative errno. */
static double round_of(int held, int ops)
{
	struct node_cpu_commit *h = calloc((size_t)held + 1, sizeof(*h)), c;
	uint32_t used, cap;
	double start, us = -1;
	int err = 0, n = 0;

	for (; h && n < held && !err; n++)
		err = node_cpu_commit(0.5, 0, &h[n], &used, &cap);
	start = now_us();
	for (int i = 0; h && i < ops && !err; i++) {
		err = node_cpu_commit(0.5, 0, &c, &used, &cap);
		if (!err && used != (uint32_t)held * 500)
			err = -1000; /* miscounted: the figure would be meaningless */
		node_cpu_release(&c);
	}
	if (h && !err)
		us = (now_us() - start) / ops;
	for (int i = 0; h && i < n; i++)
		node_cpu_release(&h[i]);
	free(h);
	return err ? err : us;
}

int main(int argc, char **argv)
{
	int rounds, ops, counts = argc - 4;
	double *us;

	if (argc < 5) {
		fprintf(stderr, "usage: admission RUN_DIR ROUNDS OPS HELD...\n");
		return 2;
	}
	setenv("SANDGUARD_RUN_DIR", argv[1], 1);
	setenv("SANDGUARD_NODE_CPUS", "60000", 1); /* room for every count */
	rounds = atoi(argv[2]);
	ops = atoi(argv[3]);
	us = calloc((size_t)(rounds * counts) + 1, sizeof(*us));
	if (!us || rounds < 1 || ops < 1)
		return 2;
	for (int r = 0; r < rounds; r++) /* the counts in turn, round by round */
		for (int k = 0; k < counts; k++) {
			us[r * counts + k] = round_of(atoi(argv[4 + k]), ops);
			if (us[r * counts + k] < 0) {
				fprintf(stderr, "admission: %s held: error %.0f\n", argv[4 + k],
					us[r * counts + k]);
				return 1;
			}
		}
	printf("{");
	for (int k = 0; k < counts; k++) {
		printf("%s\"%s\": [", k ? ", " : "", argv[4 + k]);
		for (int r = 0; r < rounds; r++)
			printf("%s%.2f", r ? ", " : "", us[r * counts + k]);
		printf("]");
	}
	printf("}\n");
	free(us);
	return 0;
}
