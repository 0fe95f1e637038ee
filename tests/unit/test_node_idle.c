/* node_idle_read(): the idle time of the CPUs this process may run on,
 * from /proc/stat's per-CPU lines, read through one descriptor kept open
 * (pread at offset 0): every read is the file as it is now, the same as a
 * fresh parse of it, never the first read's again. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "lib/node_idle.h"

/* The same sum, by a parse of a fresh open of /proc/stat. */
static uint64_t fresh_idle_us(unsigned *cpus)
{
	unsigned long long user, nice, sys, idle, iowait, total = 0;
	long hz = sysconf(_SC_CLK_TCK);
	char line[8192];
	cpu_set_t set;
	unsigned cpu;
	FILE *f = fopen("/proc/stat", "re");

	*cpus = 0;
	assert_non_null(f);
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle,
			   &iowait) == 6 &&
		    CPU_ISSET(cpu, &set)) {
			total += (idle + iowait) * 1000000ull / (unsigned long long)hz;
			(*cpus)++;
		}
	fclose(f);
	return total;
}

static void test_reads_are_current(void **state)
{
	struct node_idle a, b;
	struct timespec nap = { 0, 30 * 1000000 };
	unsigned cpus;
	uint64_t fresh, idle_ms;

	(void)state;
	for (int round = 0; round < 5; round++) {
		node_idle_read(&a);
		nanosleep(&nap, NULL);
		fresh = fresh_idle_us(&cpus);
		nanosleep(&nap, NULL);
		node_idle_read(&b);
		assert_true(a.known && b.known);
		assert_int_equal(a.cpus, cpus);
		assert_int_equal(b.cpus, cpus);
		/* Counters only grow (iowait may step back a tick: 10 ms). */
		assert_true(a.idle_us <= fresh + 10000 * cpus);
		assert_true(fresh <= b.idle_us + 10000 * cpus);
		assert_true(node_idle_between(&a, &b, &idle_ms));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_are_current),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
