/* The kernel's own accounting of the agent's programs (bpf_stats): for
 * every link pinned under PIN_ROOT/gen-N/ (and the on-demand links under
 * gen-N/ondemand/link/), the program behind it and its run count and run
 * time. The counts only move while kernel.bpf_stats_enabled is 1 (the
 * caller switches it on and restores it). For the hook-cost scenarios, on
 * the host and in the VM (which has no bpftool).
 *
 *   progstats PIN_ROOT
 *
 * Output, one line per program: "<link name> <run_cnt> <run_time_ns>". */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

static void print_link(const char *path, const char *name)
{
	struct bpf_link_info link = { 0 };
	struct bpf_prog_info prog = { 0 };
	__u32 len = sizeof(link);
	int fd = bpf_obj_get(path), pfd;

	if (fd < 0)
		return;
	if (bpf_obj_get_info_by_fd(fd, &link, &len) == 0 && link.prog_id) {
		pfd = bpf_prog_get_fd_by_id(link.prog_id);
		len = sizeof(prog);
		if (pfd >= 0 && bpf_obj_get_info_by_fd(pfd, &prog, &len) == 0)
			printf("%s %llu %llu\n", name, (unsigned long long)prog.run_cnt,
			       (unsigned long long)prog.run_time_ns);
		if (pfd >= 0)
			close(pfd);
	}
	close(fd);
}

/* The links of one directory, and the on-demand links below it. */
static void walk(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_type != DT_DIR)
			print_link(path, de->d_name);
		else if (!strcmp(de->d_name, "ondemand"))
			walk(strcat(path, "/link"));
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (argc != 2) {
		fprintf(stderr, "usage: progstats PIN_ROOT\n");
		return 64;
	}
	d = opendir(argv[1]);
	if (!d) {
		fprintf(stderr, "progstats: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "gen-", 4)) {
			snprintf(path, sizeof(path), "%s/%s", argv[1], de->d_name);
			walk(path);
		}
	closedir(d);
	return 0;
}
