/* The vmtest plumbing payload: run inside the vmtest guest (scripts/vmtest),
 * it checks that the guest gives the agent what LSM mode needs (bpf in the
 * active LSM list, cgroup2, bpffs, tracefs, kernel BTF, loopback) and that a
 * BPF LSM program really loads, attaches and denies on this kernel.
 * It links libbpf dynamically on purpose, which also proves the initramfs
 * carries the binary's shared libraries.
 *
 * Prints one line per case: "PASS: name", "FAIL: name: why",
 * "SKIP: name: why". Exits 1 if any case failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

static int failures;

static void pass(const char *name)
{
	printf("PASS: %s\n", name);
}

static void report(const char *verdict, const char *name, const char *fmt, va_list ap)
{
	printf("%s: %s: ", verdict, name);
	vprintf(fmt, ap);
	printf("\n");
}

static void fail(const char *name, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	report("FAIL", name, fmt, ap);
	va_end(ap);
	failures++;
}

static void skip(const char *name, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	report("SKIP", name, fmt, ap);
	va_end(ap);
}

/* Reads a small text file into buf, without the trailing newline. */
static int read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static void check_lsm_list(void)
{
	const char *name = "lsm-list-has-bpf";
	char list[512];
	int err = read_text("/sys/kernel/security/lsm", list, sizeof(list));
	if (err) {
		fail(name, "cannot read /sys/kernel/security/lsm: %s", strerror(-err));
		return;
	}
	char copy[sizeof(list)];
	strcpy(copy, list);
	for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "bpf") == 0) {
			pass(name);
			return;
		}
	}
	fail(name, "active LSMs are '%s' (boot with lsm=...,bpf)", list);
}

static void check_fs_magic(const char *name, const char *path, long magic, const char *what)
{
	struct statfs st;
	if (statfs(path, &st) != 0)
		fail(name, "statfs %s: %s", path, strerror(errno));
	else if ((long)st.f_type != magic)
		fail(name, "%s is not %s (f_type 0x%lx)", path, what, (long)st.f_type);
	else
		pass(name);
}

/* The fork-bomb limit needs the pids controller in a child cgroup. */
static void check_cgroup_pids(void)
{
	const char *name = "cgroup2-pids-controller";
	const char *dir = "/sys/fs/cgroup/vmtest-selftest";
	int fd = open("/sys/fs/cgroup/cgroup.subtree_control", O_WRONLY);
	if (fd < 0 || write(fd, "+pids", 5) != 5) {
		fail(name, "cannot enable pids in the root cgroup: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	if (mkdir(dir, 0755) != 0) {
		fail(name, "mkdir %s: %s", dir, strerror(errno));
		return;
	}
	if (access("/sys/fs/cgroup/vmtest-selftest/pids.max", W_OK) != 0)
		fail(name, "%s/pids.max: %s", dir, strerror(errno));
	else
		pass(name);
	rmdir(dir);
}

/* libbpf resolves tracepoint ids through tracefs. */
static void check_tracefs(void)
{
	const char *name = "tracefs-tracepoint-id";
	const char *path = "/sys/kernel/tracing/events/sched/sched_process_fork/id";
	char id[32];
	int err = read_text(path, id, sizeof(id));
	if (err)
		fail(name, "%s: %s", path, strerror(-err));
	else if (atoi(id) <= 0)
		fail(name, "%s holds '%s'", path, id);
	else
		pass(name);
}

/* The egress tests connect over loopback, which init brings up. */
static void check_loopback(void)
{
	const char *name = "loopback-tcp-connect";
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int srv = socket(AF_INET, SOCK_STREAM, 0);
	int cli = socket(AF_INET, SOCK_STREAM, 0);
	if (srv < 0 || cli < 0)
		fail(name, "socket: %s", strerror(errno));
	else if (bind(srv, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(srv, 1) != 0 ||
		 getsockname(srv, (struct sockaddr *)&addr, &len) != 0)
		fail(name, "listen on 127.0.0.1: %s", strerror(errno));
	else if (connect(cli, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		fail(name, "connect to 127.0.0.1:%d: %s", ntohs(addr.sin_port), strerror(errno));
	else
		pass(name);
	if (srv >= 0)
		close(srv);
	if (cli >= 0)
		close(cli);
}

/* The file-access tests open through io_uring where the kernel has it. */
static void check_io_uring(void)
{
	const char *name = "io-uring-setup";
	struct io_uring_params params;
	memset(&params, 0, sizeof(params));
	int fd = (int)syscall(__NR_io_uring_setup, 4, &params);
	if (fd >= 0) {
		close(fd);
		pass(name);
	} else if (errno == ENOSYS) {
		skip(name, "kernel built without io_uring (ENOSYS)");
	} else if (errno == EPERM) {
		skip(name, "io_uring disabled by sysctl kernel.io_uring_disabled (EPERM)");
	} else {
		fail(name, "io_uring_setup: %s", strerror(errno));
	}
}

static struct bpf_insn insn(__u8 code, __u8 dst, __u8 src, __s16 off, __s32 imm)
{
	struct bpf_insn i = { .code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm };
	return i;
}

/* Loads an lsm/file_open program that denies file opens by this process
 * with EPERM, attaches it, and checks an open fails and then, once the link
 * is closed, succeeds again. That is LSM mode's mechanism end to end. */
static void check_bpf_lsm_deny(void)
{
	const char *name = "bpf-lsm-file-open-deny";
	struct btf *vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux) {
		fail(name, "cannot load kernel BTF: %s", strerror(errno));
		return;
	}
	int btf_id = btf__find_by_name_kind(vmlinux, "bpf_lsm_file_open", BTF_KIND_FUNC);
	btf__free(vmlinux);
	if (btf_id < 0) {
		fail(name, "no bpf_lsm_file_open in kernel BTF");
		return;
	}

	const struct bpf_insn prog[] = {
		insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_current_pid_tgid),
		insn(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_0, 0, 0, 32),     /* r0 = tgid */
		insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 2, getpid()), /* not us: allow */
		insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, -EPERM),
		insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
		insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	static char log[8192];
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_LSM_MAC,
		    .attach_btf_id = btf_id, .log_buf = log, .log_size = sizeof(log),
		    .log_level = 1);
	int prog_fd = bpf_prog_load(BPF_PROG_TYPE_LSM, "vmtest_open", "GPL", prog,
				    sizeof(prog) / sizeof(prog[0]), &opts);
	if (prog_fd < 0) {
		fail(name, "BPF_PROG_LOAD lsm/file_open: %s; verifier: %.200s", strerror(errno),
		     log);
		return;
	}
	int link_fd = bpf_raw_tracepoint_open(NULL, prog_fd);
	if (link_fd < 0) {
		fail(name, "attach lsm/file_open: %s", strerror(errno));
		close(prog_fd);
		return;
	}

	int fd = open("/proc/self/status", O_RDONLY);
	int open_errno = errno;
	close(link_fd);
	close(prog_fd);
	if (fd >= 0) {
		close(fd);
		fail(name, "open succeeded while the LSM program was attached");
		return;
	}
	if (open_errno != EPERM) {
		fail(name, "open failed with %s, want EPERM", strerror(open_errno));
		return;
	}
	fd = open("/proc/self/status", O_RDONLY);
	if (fd < 0) {
		fail(name, "open still fails after detaching: %s", strerror(errno));
		return;
	}
	close(fd);
	pass(name);
}

int main(void)
{
	/* Line-buffered: a guest that hangs later still delivers earlier lines. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	libbpf_set_print(NULL);
	/* It changes the root cgroup and attaches an LSM program: guest only. */
	if (access("/vmtest/cmd", F_OK) != 0) {
		fprintf(stderr,
			"selftest: runs only inside the vmtest guest (scripts/vmtest/run.sh)\n");
		return 64;
	}

	check_lsm_list();
	check_fs_magic("cgroup2-mounted", "/sys/fs/cgroup", CGROUP2_SUPER_MAGIC, "cgroup2");
	check_fs_magic("bpffs-mounted", "/sys/fs/bpf", BPF_FS_MAGIC, "bpffs");
	check_cgroup_pids();
	check_tracefs();
	check_loopback();
	check_io_uring();
	check_bpf_lsm_deny();
	return failures ? 1 : 0;
}
