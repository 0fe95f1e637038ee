/* The node's idle CPU time (see src/lib/node_idle.h). */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "node_idle.h"

void node_idle_read(struct node_idle *s)
{
	unsigned long long user, nice, sys, idle, iowait;
	long hz = sysconf(_SC_CLK_TCK);
	char line[512];
	cpu_set_t set;
	unsigned cpu;
	FILE *f;

	memset(s, 0, sizeof(*s));
	if (hz <= 0 || sched_getaffinity(0, sizeof(set), &set))
		return;
	f = fopen("/proc/stat", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		/* "cpuN user nice system idle iowait ...": the total "cpu "
		 * line has no number and is skipped; so is any CPU this
		 * process may not run on. */
		if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle,
			   &iowait) != 6)
			continue;
		if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set))
			continue;
		s->idle_us += (idle + iowait) * 1000000ull / (unsigned long long)hz;
		s->cpus++;
	}
	fclose(f);
	s->known = s->cpus > 0;
}

bool node_idle_between(const struct node_idle *a, const struct node_idle *b, uint64_t *idle_ms)
{
	if (!a->known || !b->known || a->cpus != b->cpus)
		return false;
	/* iowait can go backwards on a CPU (the kernel's own caveat): a
	 * negative total is no evidence, not a huge number. */
	*idle_ms = b->idle_us > a->idle_us ? (b->idle_us - a->idle_us) / 1000 : 0;
	return true;
}
