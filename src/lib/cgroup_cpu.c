/* CPU time and CPU wait of a cgroup (see src/lib/cgroup_cpu.h). */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include "lib/fs_util.h"
#include "cgroup_cpu.h"

/* "some avg10=.. avg60=.. avg300=.. total=N" of cpu.pressure, in us. By
 * read(), not stdio: it is read after every run. */
static bool psi_some(const char *dir, int dir_fd, uint64_t *total)
{
	char path[PATH_MAX], line[256];
	const char *t;
	bool found = false;
	ssize_t n;
	int fd;

	if (dir_fd >= 0) {
		fd = openat(dir_fd, "cpu.pressure", O_RDONLY | O_CLOEXEC);
	} else {
		snprintf(path, sizeof(path), "%s/cpu.pressure", dir);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return false;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 0)
		return false;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0'; /* the "some" line alone */
	if (!strncmp(line, "some ", 5) && (t = strstr(line, "total=")))
		found = sscanf(t + 6, "%" SCNu64, total) == 1;
	return found;
}

/* The sum of run_delay (ns) over the cgroup's live threads, in us. */
static bool live_run_delay(const char *dir, uint64_t *us)
{
	char path[PATH_MAX];
	uint64_t sum = 0;
	int tid;
	bool any = false;
	FILE *threads;

	snprintf(path, sizeof(path), "%s/cgroup.threads", dir);
	threads = fopen(path, "re");
	if (!threads)
		return false;
	while (fscanf(threads, "%d", &tid) == 1) {
		uint64_t run, wait;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/schedstat", tid);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%" SCNu64 " %" SCNu64, &run, &wait) == 2) {
			sum += wait;
			any = true;
		}
		fclose(f);
	}
	fclose(threads);
	*us = sum / 1000;
	return any;
}

void cgroup_cpu_read(const char *dir, int dir_fd, int cpu_stat_fd, struct cgroup_cpu_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!dir || !dir[0])
		return;
	st->usage_known = (cpu_stat_fd >= 0
				   ? fs_pread_keyed(cpu_stat_fd, "usage_usec", &st->usage_us)
				   : fs_read_keyed(dir, "cpu.stat", "usage_usec", &st->usage_us)) ==
			  1;
	st->wait_from_psi = psi_some(dir, dir_fd, &st->wait_us);
	st->wait_known = st->wait_from_psi || live_run_delay(dir, &st->wait_us);
}
