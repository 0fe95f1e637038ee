/* The node's idle CPU time (see src/lib/node_idle.h). */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "node_idle.h"

/* /proc/stat, opened once per process and read again from offset 0 with
 * pread (procfs generates it afresh for a read at 0): a test's start
 * reads it, and its open and stdio cost more than the parse. The fd is
 * shared by threads, and so is the one snapshot procfs keeps for it: a
 * read at offset 0 makes a new one, a read further on continues the
 * newest. Where the per-CPU lines outgrow one pread (about 70 CPUs),
 * another thread's read from 0 between two of ours would stitch one CPU's
 * line from two snapshots, a wrong idle time that decides whether a
 * timeout gets its confirmation run: so a whole read holds read_lock. */
static pthread_mutex_t read_lock = PTHREAD_MUTEX_INITIALIZER;

static int stat_fd(void)
{
	static int fd = -1;
	int mine;

	if (__atomic_load_n(&fd, __ATOMIC_ACQUIRE) >= 0)
		return fd;
	mine = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (mine < 0)
		return -1;
	int none = -1;
	if (!__atomic_compare_exchange_n(&fd, &none, mine, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		close(mine); /* another thread's is kept */
	return fd;
}

/* One "cpuN user nice system idle iowait ..." line, added to s when the
 * CPU is in `set`; the total "cpu " line has no number and is skipped. */
static void add_cpu(const char *line, const cpu_set_t *set, long hz, struct node_idle *s)
{
	unsigned long long user, nice, sys, idle, iowait;
	unsigned cpu;

	if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle,
		   &iowait) != 6 ||
	    cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, set))
		return;
	s->idle_us += (idle + iowait) * 1000000ull / (unsigned long long)hz;
	s->cpus++;
}

/* The per-CPU lines come first; reading stops at the first line that is
 * not one (the long "intr" line is never parsed). */
static void read_cpu_lines(int fd, const cpu_set_t *set, long hz, struct node_idle *s)
{
	char buf[4096];
	size_t have = 0;
	off_t at = 0;

	for (;;) {
		ssize_t n = pread(fd, buf + have, sizeof(buf) - 1 - have, at);
		char *line = buf, *nl;

		if (n <= 0)
			break;
		at += n;
		have += (size_t)n;
		buf[have] = '\0';
		while ((nl = strchr(line, '\n'))) {
			*nl = '\0';
			if (strncmp(line, "cpu", 3)) {
				s->known = s->cpus > 0;
				return;
			}
			add_cpu(line, set, hz, s);
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			return; /* a line longer than any cpu line: not /proc/stat */
	}
	s->known = s->cpus > 0;
}

void node_idle_read(struct node_idle *s)
{
	long hz = sysconf(_SC_CLK_TCK);
	cpu_set_t set;
	int fd;

	memset(s, 0, sizeof(*s));
	if (hz <= 0 || sched_getaffinity(0, sizeof(set), &set) || (fd = stat_fd()) < 0)
		return;
	pthread_mutex_lock(&read_lock);
	read_cpu_lines(fd, &set, hz, s);
	pthread_mutex_unlock(&read_lock);
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
