/* What a cgroup (a sandbox's run) got of the CPU, and how long it waited for it: the
 * executor's evidence that a missed deadline was the node's overload,
 * not the tenant's code (exec_classify()).
 *
 *   CPU time   cgroup2 cpu.stat usage_usec (every cgroup2 has it, with or
 *              without the cpu controller)
 *   waiting    cgroup2 cpu.pressure "some" total: the time at least one
 *              of the sandbox's tasks was runnable and not running (PSI,
 *              Linux 4.20+, CONFIG_PSI, not booted with psi=0);
 *              else the run_delay in /proc/<tid>/schedstat of the tasks
 *              still alive when it is read (a lower bound: tasks that
 *              exited earlier are not counted)
 *   throttled  the sandbox's cpu.stat throttled time over the run
 *              (sb_cgroup_cpu_throttled_us()): PSI counts the time its own
 *              quota held it back as waiting, so the executor takes it
 *              out of the wait. The kernel sums it over CPUs, so it can
 *              exceed the wall time: the wait is clamped at 0, which errs
 *              only where the sandbox had used up its own quota, i.e. got
 *              its share in those periods. */
#ifndef SG_CGROUP_CPU_H
#define SG_CGROUP_CPU_H
#include <stdbool.h>
#include <stdint.h>

struct cgroup_cpu_stats {
	uint64_t usage_us;
	uint64_t wait_us;
	bool usage_known, wait_known;
	bool wait_from_psi; /* false: schedstat of the live tasks */
};

/* Read both for the cgroup2 directory `dir` (a run's cgroup), before it
 * is emptied (schedstat needs live tasks). dir_fd (the directory, open)
 * and cpu_stat_fd (its cpu.stat, open; read from offset 0) spare the walks
 * of the path; either may be -1. */
void cgroup_cpu_read(const char *dir, int dir_fd, int cpu_stat_fd, struct cgroup_cpu_stats *st);

#endif
