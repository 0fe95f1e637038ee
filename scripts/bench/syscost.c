/* Scenario 7: what a fallback file hook costs a task outside every
 * sandbox, for each shape it could take (scripts/bench/syscost.bpf.c):
 * the per-syscall exit tracepoint the agent uses, the same with the enter
 * tracepoint it used before, one raw_syscalls program for every system
 * call (raw_tp or tp_btf), and empty programs to show the attachment's own
 * cost. Attaching any syscall tracepoint also puts every system call of
 * every task on the slow path: the getppid() loop (no program hooks it)
 * shows that.
 *
 *   syscost OBJECT ROUNDS OPTION...     (an option: programs, comma-separated)
 *
 * Each round measures, for the baseline and each option attached in turn,
 * the fastest of 20 chunks of each loop (the minimum shrugs off this
 * machine's preemptions; a mean would not); the best of all rounds is
 * printed, one line per option: "<option> open <ns> getppid <ns>", the
 * baseline first as "none". Then one pass with bpf_stats on, a line per
 * option: "stats <option> open <ns> ns_per_run <ns>" (see stats_pass). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define OPEN_PATH "/usr/lib/python3.11/os.py"
#define MAX_OPTS  16

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The fastest of 20 chunks, ns per operation. */
static double fastest(bool open_loop)
{
	double best = 1e18;

	for (int c = 0; c < 20; c++) {
		long n = open_loop ? 500 : 2000;
		double t0 = now_ns(), v;

		for (long i = 0; i < n; i++) {
			if (open_loop)
				close(open(OPEN_PATH, O_RDONLY | O_CLOEXEC));
			else
				syscall(SYS_getppid);
		}
		v = (now_ns() - t0) / n;
		if (v < best)
			best = v;
	}
	return best;
}

static int attach(struct bpf_object *obj, const char *option, struct bpf_link **links)
{
	char list[256], key[80];
	struct bpf_program *p;
	int n = 0;

	snprintf(list, sizeof(list), ",%s,", option);
	bpf_object__for_each_program(p, obj)
	{
		snprintf(key, sizeof(key), ",%s,", bpf_program__name(p));
		if (strstr(list, key) && n < 8 && !(links[n++] = bpf_program__attach(p))) {
			fprintf(stderr, "syscost: cannot attach %s\n", bpf_program__name(p));
			exit(1);
		}
	}
	return n;
}

/* Run time and count, summed over the programs of links[0..n). */
static void prog_stats(struct bpf_link **links, int n, __u64 *cnt, __u64 *ns)
{
	*cnt = *ns = 0;
	for (int k = 0; k < n; k++) {
		struct bpf_link_info link = { 0 };
		struct bpf_prog_info prog = { 0 };
		__u32 len = sizeof(link);
		int fd;

		if (bpf_obj_get_info_by_fd(bpf_link__fd(links[k]), &link, &len))
			continue;
		fd = bpf_prog_get_fd_by_id(link.prog_id);
		len = sizeof(prog);
		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &prog, &len)) {
			*cnt += prog.run_cnt;
			*ns += prog.run_time_ns;
		}
		if (fd >= 0)
			close(fd);
	}
}

/* What the kernel's own accounting says and costs: each option attached
 * once more with kernel.bpf_stats_enabled on (restored after), the
 * fastest open+close chunk and the programs' run time per run as
 * bpf_stats reports it. An empty program's figure is the accounting's
 * floor (its clock reads), part of every program's per-run figure. */
static void stats_pass(struct bpf_object *obj, char **options, int n_opts)
{
	const char *knob = "/proc/sys/kernel/bpf_stats_enabled";
	char before[8] = "0";
	FILE *f = fopen(knob, "r");

	if (!f)
		return;
	if (!fgets(before, sizeof(before), f))
		strcpy(before, "0");
	fclose(f);
	if (!(f = fopen(knob, "w")))
		return;
	fputs("1", f);
	fclose(f);
	for (int i = 0; i < n_opts; i++) {
		struct bpf_link *links[8];
		int n = attach(obj, options[i], links);
		__u64 c0, t0, c1, t1;
		double o;

		prog_stats(links, n, &c0, &t0);
		o = fastest(true);
		prog_stats(links, n, &c1, &t1);
		printf("stats %s open %.1f ns_per_run %.1f\n", options[i], o,
		       c1 > c0 ? (double)(t1 - t0) / (c1 - c0) : 0.0);
		while (n-- > 0)
			bpf_link__destroy(links[n]);
	}
	if ((f = fopen(knob, "w"))) {
		fputs(before, f);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	double open_ns[MAX_OPTS + 1], ppid_ns[MAX_OPTS + 1];
	struct bpf_object *obj;
	int rounds, n_opts = argc - 3;

	if (argc < 4 || n_opts > MAX_OPTS || (rounds = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: syscost OBJECT ROUNDS OPTION...\n");
		return 64;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "syscost: cannot load %s\n", argv[1]);
		return 1;
	}
	for (int i = 0; i <= n_opts; i++)
		open_ns[i] = ppid_ns[i] = 1e18;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i <= n_opts; i++) {
			struct bpf_link *links[8];
			int n = i ? attach(obj, argv[2 + i], links) : 0;
			double o = fastest(true), g = fastest(false);

			if (o < open_ns[i])
				open_ns[i] = o;
			if (g < ppid_ns[i])
				ppid_ns[i] = g;
			while (n-- > 0)
				bpf_link__destroy(links[n]);
		}
	}
	for (int i = 0; i <= n_opts; i++)
		printf("%s open %.1f getppid %.1f\n", i ? argv[2 + i] : "none", open_ns[i],
		       ppid_ns[i]);
	stats_pass(obj, argv + 3, n_opts);
	bpf_object__close(obj);
	return 0;
}
