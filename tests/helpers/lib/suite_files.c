/* The agent suite: files and execs. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/fs.h>
#include <bpf/bpf.h>
#include "abi/events.h"
#include "agent_suite.h"
#include "control/agent_client.h"
#include "control/pinned.h"
#include "lib/cgroup.h"
#include "abi/maps.h"
#include "control/enroll.h"

void test_files(void)
{
	struct at_sandbox sb;
	char link[PATH_MAX], scratch_file[PATH_MAX], outside[PATH_MAX + 32], locked[PATH_MAX + 32],
		flags[32];
	int st;

	/* A sandbox per case: in fallback mode a refused open kills the task. */
	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, "files: sandbox", "cannot create/register a sandbox");
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = "/etc/hostname", .flags = O_RDONLY });
	at_result(refused(st), "files: open /etc/hostname is refused", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, lsm ? "\"file_denied\"" : "\"file_tripped\"",
				"/etc/hostname", NULL),
		  "files: the refusal is evented with the resolved path", "no event");
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .cwd = sb.scratch,
					.path = "../../../../../../../../../etc/hostname",
					.flags = O_RDONLY });
	at_result(refused(st), "files: relative ../ path to /etc/hostname is refused", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(link, sizeof(link), "%s/link", sb.scratch);
	if (symlink("/etc/hostname", link))
		at_result(false, "files: symlink", "cannot create %s", link);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .cwd = sb.scratch, .path = "link", .flags = O_RDONLY });
	at_result(refused(st), "files: a symlink in scratch to /etc/hostname is refused", "%s",
		  describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "/etc/hostname", NULL),
		  "files: the symlink's target (not the link) is in the event",
		  "no event naming /etc/hostname");
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(scratch_file, sizeof(scratch_file), "%s/out.txt", sb.scratch);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = scratch_file, .flags = O_WRONLY | O_CREAT });
	at_result(returned(st, 0),
		  "files: scratch is writable (a file created after the policy loaded)", "%s",
		  describe(st));
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_RDONLY });
	at_result(returned(st, 0), "files: the read-only allowlist is readable", "%s",
		  describe(st));
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_WRONLY });
	at_result(refused(st), "files: the read-only allowlist is not writable", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	/* A write outside the scratch is reported as a write, with its flags. */
	at_sandbox_new(&env, "acme", &sb);
	snprintf(outside, sizeof(outside), "%s/created-outside", env.dir);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = outside, .flags = O_WRONLY | O_CREAT });
	at_result(refused(st), "files: an O_CREAT|O_WRONLY open outside the scratch is refused",
		  "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "created-outside", "\"write\":true", NULL),
		  "files: ... and evented as a write", "no event with write true");
	at_sandbox_free(&sb);
	if (!lsm) {
		/* Refused before the agent saw a file (here by DAC; the
		 * executor's Landlock in production): the request's flags. */
		at_sandbox_new(&env, "acme", &sb);
		snprintf(locked, sizeof(locked), "%s/locked", env.dir);
		close(open(locked, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
		st = run_in(&sb, child_open,
			    &(struct open_arg){
				    .path = locked, .flags = O_WRONLY | O_CREAT, .uid = 65534 });
		snprintf(flags, sizeof(flags), "\"flags\":%d", O_WRONLY | O_CREAT);
		at_result(returned(st, EACCES) &&
				  at_event_seen(&env, 3000, sb.name, "\"file_denied\"", "locked",
						"\"requested\":true", "\"write\":true", flags,
						NULL),
			  "files: an open another layer refused is evented as the write it asked",
			  "%s, or no event with write true and %s", describe(st), flags);
		at_sandbox_free(&sb);
	}

	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_uring_open, "/etc/hostname");
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) >= 200)
		at_skipped("files: io_uring openat",
			   "io_uring unavailable here (setup failed, code %d)", WEXITSTATUS(st));
	else if (lsm)
		at_result(returned(st, EACCES),
			  "files: io_uring openat of /etc/hostname gets EACCES", "%s",
			  describe(st));
	else
		at_skipped("files: io_uring openat",
			   "fallback mode does not see io_uring opens (%s); "
			   "the executor's seccomp filter blocks io_uring, LSM mode refuses them",
			   describe(st));
	at_sandbox_free(&sb);
}

/* The fallback's open programs come in two sets, the file read by plain
 * loads (bpf_rdonly_cast) or by helper calls (src/agent/bpf/files.bpf.c);
 * the agent must load the set its probe chose, for all five open
 * syscalls. The other cases then judge through that set: 40-agent's
 * first pass the loads where the kernel has the kfunc, its second pass
 * (rdonly_cast disabled) the helper calls. */
void test_open_programs(void)
{
	const char *name = "files: the open programs read the file as the probe chose";
	int loads = at_agent_feature(&env, "rdonly_cast");
	const char *want = loads == 1 ? "sg_cast_" : "sg_exit_";
	char dir[PATH_MAX], path[PATH_MAX + 256], bad[160] = "";
	struct dirent *de;
	int found = 0;
	DIR *d;

	if (lsm)
		return at_skipped(name, "LSM mode: lsm/file_open judges opens, not these programs");
	if (loads < 0)
		return at_result(false, name, "the agent's status has no rdonly_cast feature");
	snprintf(dir, sizeof(dir), "%s/gen-%u/ondemand/prog", sg_pin_root(),
		 sg_pinned_generation());
	d = opendir(dir);
	if (!d)
		return at_result(false, name, "cannot open %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		int fd;

		if (!strstr(de->d_name, ":sys_exit_open") && !strstr(de->d_name, ":sys_exit_creat"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		memset(&info, 0, sizeof(info));
		fd = bpf_obj_get(path);
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			snprintf(bad, sizeof(bad), "%s: %s", de->d_name, strerror(errno));
		else if (strncmp(info.name, want, strlen(want)))
			snprintf(bad, sizeof(bad), "%s is %s", de->d_name, info.name);
		else
			found++;
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	at_result(found == 5 && !bad[0], name, "%d of 5 are %s* (rdonly_cast %s)%s%s", found, want,
		  loads ? "yes" : "no", bad[0] ? ": " : "", bad);
}

/* Opens of /etc/hostname, many: what a task outside every sandbox does
 * all day. */
static int child_open_many(void *arg)
{
	for (int i = 0; i < *(int *)arg; i++) {
		int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return 1;
		close(fd);
	}
	return 0;
}

/* The kernel's count of a program's runs (bpf_stats must be on). */
static bool prog_runs(int prog_fd, __u64 *runs)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return false;
	*runs = info.run_cnt;
	return true;
}

/* LSM mode: where the kernel has BPF_LSM_CGROUP (6.0+), file_open is
 * judged by a program on the sandguard root, which the kernel runs only
 * for tasks below it, so a task outside every sandbox runs no program on
 * its opens. Asserted by the kernel's own count of the program's runs
 * (bpf_stats): 200 opens outside the root add none, one open in a sandbox
 * adds one. Where the kernel lacks it the program sits on the hook, and
 * the same opens outside are each counted. */
void test_lsm_scope(void)
{
	const char *name = "files: lsm_cgroup: opens outside the sandguard root run no program";
	int cg_feature = at_agent_feature(&env, "bpf_lsm_cgroup"), n = 200, st;
	const char *prog_name = cg_feature == 1 ? "sg_cg_file_open" : "sg_file_open";
	int link_fd = -1, prog_fd = -1, stats_fd = -1;
	__u64 before = 0, outside = 0, inside = 0;
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	char path[PATH_MAX];
	struct at_sandbox sb;
	uint64_t root_id = 0;

	if (!lsm)
		return at_skipped(name, "fallback mode: the file programs are syscall tracepoints, "
					"attached only while a sandbox exists (the ondemand rows)");
	if (cg_feature < 0)
		return at_result(false, name, "the agent's status has no bpf_lsm_cgroup feature");
	snprintf(path, sizeof(path), "%s/gen-%u/%s", sg_pin_root(), sg_pinned_generation(),
		 prog_name);
	memset(&info, 0, sizeof(info));
	link_fd = bpf_obj_get(path);
	if (link_fd < 0 || bpf_obj_get_info_by_fd(link_fd, &info, &len)) {
		at_result(false, name, "no pinned link %s: %s", path, strerror(errno));
		goto out;
	}
	if (cg_feature == 1 &&
	    (cgroup_id_of(env.cg_root, &root_id) || info.type != BPF_LINK_TYPE_CGROUP ||
	     info.cgroup.attach_type != BPF_LSM_CGROUP || info.cgroup.cgroup_id != root_id)) {
		at_result(false, name,
			  "%s is not attached as BPF_LSM_CGROUP to the root %s (id %llu): link "
			  "type %u, attach type %u, cgroup %llu",
			  prog_name, env.cg_root, (unsigned long long)root_id, info.type,
			  info.cgroup.attach_type, (unsigned long long)info.cgroup.cgroup_id);
		goto out;
	}
	prog_fd = bpf_prog_get_fd_by_id(info.prog_id);
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (prog_fd < 0 || stats_fd < 0 || !prog_runs(prog_fd, &before)) {
		at_result(false, name, "cannot count %s's runs: %s", prog_name, strerror(errno));
		goto out;
	}
	st = at_run_in(env.outside_cg, child_open_many, &n, 10000);
	if (!returned(st, 0) || !prog_runs(prog_fd, &outside)) {
		at_result(false, name, "the opens outside: %s", describe(st));
		goto out;
	}
	if (at_sandbox_new(&env, "acme", &sb)) {
		at_result(false, name, "cannot create/register a sandbox");
		goto out;
	}
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_RDONLY });
	at_sandbox_free(&sb);
	if (!returned(st, 0) || !prog_runs(prog_fd, &inside)) {
		at_result(false, name, "the allowed open in a sandbox: %s", describe(st));
		goto out;
	}
	if (cg_feature == 1)
		at_result(outside == before && inside > outside, name,
			  "%s ran %llu times for %d opens outside the root, %llu for one open in a "
			  "sandbox",
			  prog_name, (unsigned long long)(outside - before), n,
			  (unsigned long long)(inside - outside));
	else
		at_result(outside - before >= (__u64)n && inside > outside,
			  "files: without lsm_cgroup, lsm/file_open runs for every task's open",
			  "%s ran %llu times for %d opens outside the root, %llu for one open in a "
			  "sandbox",
			  prog_name, (unsigned long long)(outside - before), n,
			  (unsigned long long)(inside - outside));
out:
	if (stats_fd >= 0)
		close(stats_fd);
	if (prog_fd >= 0)
		close(prog_fd);
	if (link_fd >= 0)
		close(link_fd);
}

/* A remembered verdict names a file by (dev, ino, generation): a new
 * file that got an allowed file's inode number (the allowed one deleted,
 * as by a package upgrade) is judged afresh. Made here with
 * FS_IOC_SETVERSION: the allowed file, moved out of the allowlist and
 * given a new generation, is what such a new file is to the kernel. */
void test_reused_inode(void)
{
	const char *name =
		"files: a new file with a remembered file's inode number is judged afresh";
	char allowed[PATH_MAX + 16], moved[PATH_MAX + 16];
	struct sg_sandbox_state st = { 0 };
	struct at_sandbox sb;
	int fd, s1, s2, err = 0;
	long gen = 0; /* the ioctls read and write an int: the low half */
	bool counted;

	snprintf(allowed, sizeof(allowed), "%s/ro/reused", env.dir);
	snprintf(moved, sizeof(moved), "%s/reused-outside", env.dir);
	close(open(allowed, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, name, "cannot create/register a sandbox");
	s1 = run_in(&sb, child_open, &(struct open_arg){ .path = allowed, .flags = O_RDONLY });
	at_sandbox_free(&sb); /* the verdict is the tenant's: it outlives the sandbox */

	fd = rename(allowed, moved) ? -1 : open(moved, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, FS_IOC_GETVERSION, &gen) ||
	    (gen++, ioctl(fd, FS_IOC_SETVERSION, &gen)))
		err = errno;
	if (fd >= 0)
		close(fd);
	if (err == ENOTTY || err == EOPNOTSUPP) {
		unlink(moved);
		return at_skipped(name,
				  "%s cannot set an inode's generation (FS_IOC_SETVERSION: %s)",
				  env.dir, strerror(err));
	}
	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, name, "cannot create/register a sandbox");
	s2 = run_in(&sb, child_open, &(struct open_arg){ .path = moved, .flags = O_RDONLY });
	counted = sandbox_state(&sb, &st);
	at_result(!err && returned(s1, 0) && refused(s2) && counted && st.violations == 1 &&
			  st.first_rule == SG_RULE_FILE + 1,
		  name, "%s; allowed file %s, new file %s, %s %llu violations",
		  err ? strerror(err) : "generation set", describe(s1), describe(s2),
		  counted ? "" : "(sg_state unreadable)", (unsigned long long)st.violations);
	at_sandbox_free(&sb);
	unlink(moved);
}

/* A path `depth` directories deep below dir, made. */
static void make_deep(const char *dir, int depth, char *path, size_t len)
{
	size_t n = (size_t)snprintf(path, len, "%s", dir);

	for (int i = 0; i < depth && n + 3 < len; i++) {
		n += (size_t)snprintf(path + n, len - n, "/d");
		mkdir(path, 0777);
	}
}

/* A scratch of its own (a tmpfs, as the executor mounts it) is judged by
 * its filesystem, at any depth; a directory scratch by its ancestors,
 * which the walk stops looking for after SG_WALK_DEPTH (fail closed). */
void test_scratch(void)
{
	struct sg_enroll_result res;
	char deep[PATH_MAX], file[PATH_MAX + 8];
	struct at_sandbox sb;
	int st;

	if (at_sandbox_enroll(&env, "acme", &sb, true, &res) || !res.enforced)
		return at_result(false, "scratch: tmpfs sandbox", "not enrolled: %s", res.detail);
	make_deep(sb.scratch, 40, deep, sizeof(deep));
	snprintf(file, sizeof(file), "%s/f", deep);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = file, .flags = O_WRONLY | O_CREAT });
	at_result(returned(st, 0),
		  "scratch: a file 40 directories deep in a tmpfs scratch is written (no walk)",
		  "%s", describe(st));
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = "/etc/hostname", .flags = O_RDONLY });
	at_result(refused(st), "scratch: outside a tmpfs scratch is still refused", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	make_deep(sb.scratch, SG_WALK_DEPTH + 4, deep, sizeof(deep));
	snprintf(file, sizeof(file), "%s/f", deep);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = file, .flags = O_WRONLY | O_CREAT });
	at_result(refused(st),
		  "scratch: in a directory scratch, past the ancestor walk, refused (fail closed)",
		  "%s", describe(st));
	at_sandbox_free(&sb);
}

/* Read-only paths are identities: the same file seen through a bind
 * mount (a sandbox's minimal root is made of them) is the same file. */
void test_bind_mounts(void)
{
	char ro_dir[PATH_MAX + 8], view[PATH_MAX + 16];
	struct at_sandbox sb;
	int st;

	snprintf(ro_dir, sizeof(ro_dir), "%s/ro", env.dir);
	at_sandbox_new(&env, "acme", &sb);
	snprintf(view, sizeof(view), "%s/view", sb.scratch);
	st = run_in(&sb, child_open_bound, &(struct bind_arg){ ro_dir, view, "data", O_RDONLY });
	at_result(returned(st, 0), "bind: a read-only path seen through a bind mount is readable",
		  "%s", describe(st));
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(view, sizeof(view), "%s/etc", sb.scratch);
	st = run_in(&sb, child_open_bound,
		    &(struct bind_arg){ "/etc", view, "hostname", O_RDONLY });
	at_result(refused(st), "bind: /etc bind-mounted into the scratch is still refused", "%s",
		  describe(st));
	at_sandbox_free(&sb);
}

void test_exec(void)
{
	struct at_sandbox sb;
	char marker[PATH_MAX], filename[PATH_MAX + 16], who[96];
	int st;

	at_sandbox_new(&env, "acme", &sb);
	snprintf(marker, sizeof(marker), "%s/allowed-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ busybox, marker });
	at_result(returned(st, 0) && access(marker, F_OK) == 0, "exec: an allowlisted exec runs",
		  "%s", describe(st));
	snprintf(filename, sizeof(filename), "\"filename\":\"%s\"", busybox);
	at_result(at_event_seen(&env, 3000, sb.name, "\"type\":\"exec\"", filename, "\"touch\"",
				NULL),
		  "exec: evented with filename and argv", "no exec event with %s", filename);
	/* Who: the exec and exit programs read the task's fields by plain
	 * loads from their BTF arguments (the parent is this process). */
	snprintf(who, sizeof(who), "\"ppid\":%d,\"uid\":0,\"comm\":\"busybox\"", (int)getpid());
	at_result(at_event_seen(&env, 3000, sb.name, "\"type\":\"exec\"", who, NULL) &&
			  at_event_seen(&env, 3000, sb.name, "\"type\":\"exit\"", who,
					"\"exit_code\":0,\"signal\":0", NULL),
		  "exec: the exec and exit events say who (parent, uid, comm) and how it ended",
		  "no exec and exit events with %s", who);
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(marker, sizeof(marker), "%s/forbidden-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ forbidden_exe, marker });
	at_result(refused(st) && access(marker, F_OK) != 0,
		  lsm ? "exec: a disallowed exec fails at bprm_check with EACCES"
		      : "exec: a disallowed exec is killed before any of its code runs",
		  "%s, marker %s", describe(st), access(marker, F_OK) ? "absent" : "PRESENT");
	at_result(at_event_seen(&env, 3000, sb.name, "\"exec_denied\"",
				lsm ? "\"mode\":\"lsm\"" : "\"mode\":\"fallback\"", NULL),
		  "exec: the refusal is evented with the mode that refused it", "no event");
	at_sandbox_free(&sb);
}
