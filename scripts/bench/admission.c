/* Scenario 18's helper: admission with many holders, against none. Two
 * lines, each as serve uses it, one commitment or slot per running request:
 *  - cpu:  the node's CPU line (src/node/node_cpu.c, as the memory line);
 *  - slot: a tenant's concurrency slots (src/node/tenant_state.c).
 * Each round holds `held` of them in this process, then times `ops`
 * admissions and releases of one more; the counts take turns, round by
 * round. Prints {"cpu": {"<held>": [µs per op, a round each], ...},
 * "slot": {...}}.
 *
 *   admission RUN_DIR ROUNDS OPS HELD... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "node/node_cpu.h"
#include "node/tenant_state.h"

#define SLOTS 4096 /* the tenant's concurrency: room for every count */

enum line { LINE_CPU, LINE_SLOT, LINE__COUNT };
static const char *const line_name[] = { "cpu", "slot" };

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

struct held {
	struct node_cpu_commit cpu;
	struct tenant_slot slot;
};

/* Takes one more of the line: 0, or an error. The CPU line checks its
 * count: a miscounted line would make the figure meaningless. */
static int take(enum line l, struct held *h, int held)
{
	uint32_t used, cap;
	int err;

	if (l == LINE_SLOT)
		return tenant_slot_acquire("bench", SLOTS, 0, &h->slot);
	err = node_cpu_commit(0.5, 0, &h->cpu, &used, &cap);
	return err ? err : used != (uint32_t)held * 500 ? -1000 : 0;
}

static void give_back(enum line l, struct held *h)
{
	if (l == LINE_SLOT)
		tenant_slot_release(&h->slot);
	else
		node_cpu_release(&h->cpu);
}

/* µs per admission + release with `held` held, or a negative error. */
static double round_of(enum line l, int held, int ops)
{
	struct held *h = calloc((size_t)held + 1, sizeof(*h)), one;
	double start, us = -1;
	int err = 0, n = 0;

	for (; h && n < held && !err; n++)
		err = take(l, &h[n], n);
	if (err)
		n--; /* the failed one holds nothing */
	start = now_us();
	for (int i = 0; h && i < ops && !err; i++) {
		err = take(l, &one, held);
		give_back(l, &one);
	}
	if (h && !err)
		us = (now_us() - start) / ops;
	for (int i = 0; h && i < n; i++)
		give_back(l, &h[i]);
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
	us = calloc((size_t)(LINE__COUNT * rounds * counts) + 1, sizeof(*us));
	if (!us || rounds < 1 || ops < 1)
		return 2;
	for (int r = 0; r < rounds; r++) /* the counts in turn, round by round */
		for (int l = 0; l < LINE__COUNT; l++)
			for (int k = 0; k < counts; k++) {
				double *u = &us[(l * rounds + r) * counts + k];

				*u = round_of(l, atoi(argv[4 + k]), ops);
				if (*u < 0) {
					fprintf(stderr, "admission: %s, %s held: error %.0f\n",
						line_name[l], argv[4 + k], *u);
					return 1;
				}
			}
	printf("{");
	for (int l = 0; l < LINE__COUNT; l++) {
		printf("%s\"%s\": {", l ? ", " : "", line_name[l]);
		for (int k = 0; k < counts; k++) {
			printf("%s\"%s\": [", k ? ", " : "", argv[4 + k]);
			for (int r = 0; r < rounds; r++)
				printf("%s%.2f", r ? ", " : "", us[(l * rounds + r) * counts + k]);
			printf("]");
		}
		printf("}");
	}
	printf("}\n");
	free(us);
	return 0;
}
