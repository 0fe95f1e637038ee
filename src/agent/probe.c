/* Feature probes: each one loads (and where it matters attaches) one tiny
 * program from src/agent/bpf/probe.bpf.c and reports the kernel's answer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib/cgroup.h"
#include "abi/events.h"
#include "lib/log.h"
#include "probe.h"
#include "probe.skel.h"
#include "lib/array_len.h"

#define ATTACH_UNIX_CONNECT 49 /* BPF_CGROUP_UNIX_CONNECT, newer than libbpf 1.1 */
#define ATTACH_UNIX_SENDMSG 50 /* BPF_CGROUP_UNIX_SENDMSG */

static const char *const names[SG_FEAT__COUNT] = {
	[SG_FEAT_RINGBUF] = "ringbuf",
	[SG_FEAT_TP_BTF] = "tp_btf",
	[SG_FEAT_SYSCALL_TP] = "syscall_tracepoints",
	[SG_FEAT_LSM] = "bpf_lsm",
	[SG_FEAT_CONNECT4] = "cgroup_connect4",
	[SG_FEAT_CONNECT6] = "cgroup_connect6",
	[SG_FEAT_SENDMSG4] = "cgroup_sendmsg4",
	[SG_FEAT_SENDMSG6] = "cgroup_sendmsg6",
	[SG_FEAT_CONNECT_UNIX] = "cgroup_connect_unix",
	[SG_FEAT_SENDMSG_UNIX] = "cgroup_sendmsg_unix",
	[SG_FEAT_SKB_EGRESS] = "cgroup_skb_egress",
	[SG_FEAT_CGROUP_KILL] = "cgroup_kill",
	[SG_FEAT_ATOMIC_FETCH] = "atomic_fetch",
	[SG_FEAT_TRACING_ANCESTOR] = "tracing_ancestor_cgroup",
	[SG_FEAT_LSM_UNIX] = "bpf_lsm_unix",
	[SG_FEAT_CGROUP_FREEZE] = "cgroup_freeze",
	[SG_FEAT_RDONLY_CAST] = "rdonly_cast",
	[SG_FEAT_LSM_CGROUP] = "bpf_lsm_cgroup",
};

/* What a feature needs, named when the kernel refuses it. */
static const char *const needs[SG_FEAT__COUNT] = {
	[SG_FEAT_RINGBUF] = "Linux 5.8+",
	[SG_FEAT_TP_BTF] = "Linux 5.5+ with BTF",
	[SG_FEAT_SYSCALL_TP] = "BPF links for tracepoints, Linux 5.15+",
	[SG_FEAT_LSM] = "CONFIG_BPF_LSM and bpf in lsm=",
	[SG_FEAT_CONNECT_UNIX] = "Linux 6.7+",
	[SG_FEAT_SENDMSG_UNIX] = "Linux 6.7+",
	[SG_FEAT_ATOMIC_FETCH] = "Linux 5.12+",
	[SG_FEAT_TRACING_ANCESTOR] = "a kernel newer than 5.10",
	[SG_FEAT_LSM_UNIX] = "BPF LSM",
	[SG_FEAT_RDONLY_CAST] = "the bpf_rdonly_cast kfunc, Linux 6.2+",
	[SG_FEAT_LSM_CGROUP] = "BPF_LSM_CGROUP, Linux 6.0+",
};

/* What each feature's absence costs, in the probe table. */
static const char *const fallbacks[SG_FEAT__COUNT] = {
	[SG_FEAT_SYSCALL_TP] = "files judged by lsm/file_open (LSM mode only)",
	[SG_FEAT_LSM] = "files and execs judged by tracepoints (fallback mode)",
	[SG_FEAT_LSM_UNIX] =
		"unix egress: the cgroup unix hooks (6.7+), else the executor's namespaces",
	[SG_FEAT_CONNECT_UNIX] = "unix egress judged by lsm/unix_* (LSM mode)",
	[SG_FEAT_SENDMSG_UNIX] = "unix egress judged by lsm/unix_* (LSM mode)",
	[SG_FEAT_CGROUP_KILL] = "kill = freeze the cgroup, SIGKILL each task",
	[SG_FEAT_ATOMIC_FETCH] = "compat objects: add then read (kernel < 5.12)",
	[SG_FEAT_TRACING_ANCESTOR] = "the sandbox's cgroup read from the task",
	[SG_FEAT_CGROUP_FREEZE] = "kill = SIGKILL over cgroup.procs until empty",
	[SG_FEAT_RDONLY_CAST] = "fallback open programs read the file by helper calls",
	[SG_FEAT_LSM_CGROUP] = "lsm/file_open and lsm/bprm_check_security run for every task of "
			       "the node (a sandbox lookup each)",
};

const char *feature_name(enum sg_feature f)
{
	return (unsigned)f < SG_FEAT__COUNT ? names[f] : "?";
}

const char *enforce_mode_name(int mode)
{
	switch (mode) {
	case SG_MODE_LSM:
		return "lsm";
	case SG_MODE_FALLBACK:
		return "fallback";
	default:
		return "none";
	}
}

int parse_mode_request(const char *s, enum sg_mode_request *out)
{
	if (!strcmp(s, "auto"))
		*out = SG_REQ_AUTO;
	else if (!strcmp(s, "lsm"))
		*out = SG_REQ_LSM;
	else if (!strcmp(s, "fallback"))
		*out = SG_REQ_FALLBACK;
	else
		return -EINVAL;
	return 0;
}

/* libbpf prints its own diagnostics; while probing, a refusal is an answer,
 * not an error, so keep them quiet unless debugging. */
static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* Whether a link is a BPF link (pinnable, outliving the agent) and not a
 * perf event holding the program (tracepoints before 5.15). */
static bool is_bpf_link(struct bpf_link *link)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(bpf_link__fd(link), &info, &len) == 0;
}

/* Whether the attached lsm/file_open probe really runs: an open of ours
 * must have been counted. */
static bool lsm_runs(struct probe_bpf *skel)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return skel->bss->lsm_hits > 0;
}

/* Load `prog` alone (all other programs of the probe object disabled),
 * attach it unless `load_only` (to the cgroup when cgroup_fd >= 0, with
 * attach_type when >= 0), and say what happened. Every program the agent
 * attaches is pinned, so the link must be a BPF link. */
static void probe_one(struct sg_features *f, enum sg_feature feature, const char *prog_name,
		      int attach_type, int cgroup_fd, bool load_only)
{
	struct sg_probe_result *r = &f->f[feature];
	struct probe_bpf *skel = probe_bpf__open();
	struct bpf_program *prog, *target = NULL;
	struct bpf_link *link = NULL;
	libbpf_print_fn_t old;
	int err;

	if (!skel) {
		snprintf(r->why, sizeof(r->why), "cannot open probe object: %s", strerror(errno));
		return;
	}
	bpf_object__for_each_program(prog, skel->obj)
	{
		bool me = !strcmp(bpf_program__name(prog), prog_name);
		bpf_program__set_autoload(prog, me);
		if (me)
			target = prog;
	}
	if (attach_type >= 0)
		bpf_program__set_expected_attach_type(target, attach_type);
	skel->rodata->probe_tgid = getpid();
	old = libbpf_set_print(quiet_print);
	err = probe_bpf__load(skel);
	if (err) {
		snprintf(r->why, sizeof(r->why), "load refused: %s", strerror(-err));
		goto out;
	}
	if (load_only) {
		r->ok = true;
		snprintf(r->why, sizeof(r->why), "loaded");
		goto out;
	}
	if (cgroup_fd >= 0)
		link = bpf_program__attach_cgroup(target, cgroup_fd);
	else
		link = bpf_program__attach(target);
	if (!link) {
		snprintf(r->why, sizeof(r->why), "attach refused: %s", strerror(errno));
		goto out;
	}
	if (!is_bpf_link(link)) {
		snprintf(r->why, sizeof(r->why),
			 "attached through a perf event, not a BPF link (kernel < 5.15): "
			 "cannot be pinned to outlive the agent");
		goto out;
	}
	if (feature == SG_FEAT_LSM && !lsm_runs(skel)) {
		snprintf(r->why, sizeof(r->why),
			 "lsm/file_open loads and attaches but never runs: the bpf LSM is not "
			 "active");
		goto out;
	}
	r->ok = true;
	snprintf(r->why, sizeof(r->why), "loaded and attached");
out:
	if (!r->ok && needs[feature]) {
		size_t n = strlen(r->why);
		snprintf(r->why + n, sizeof(r->why) - n, " (needs %s)", needs[feature]);
	}
	libbpf_set_print(old);
	bpf_link__destroy(link);
	probe_bpf__destroy(skel);
}

/* Tracepoint programs attach through tracefs, which minimal systems (this
 * VM, a fresh container) may not have mounted. */
void ensure_kernel_fs(void)
{
	if (access("/sys/kernel/tracing/events", F_OK) != 0 &&
	    access("/sys/kernel/debug/tracing/events", F_OK) != 0 &&
	    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL) != 0)
		sg_warn("cannot mount tracefs at /sys/kernel/tracing: %s", strerror(errno));
	if (access("/sys/kernel/security/lsm", R_OK) != 0)
		mount("securityfs", "/sys/kernel/security", "securityfs", 0, NULL);
}

static bool lsm_listed(void)
{
	char buf[512] = "";
	int fd;

	fd = open("/sys/kernel/security/lsm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	char *save = NULL;

	for (char *tok = strtok_r(buf, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save))
		if (!strcmp(tok, "bpf"))
			return true;
	return false;
}

/* $SANDGUARD_DISABLE_FEATURES: features to treat as absent. */
static void apply_disabled(struct sg_features *f)
{
	const char *env = getenv("SANDGUARD_DISABLE_FEATURES");
	char list[512], *save = NULL;

	if (!env || !*env)
		return;
	snprintf(list, sizeof(list), "%s", env);
	for (char *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		int i;

		for (i = 0; i < SG_FEAT__COUNT && strcmp(tok, names[i]); i++)
			;
		if (i == SG_FEAT__COUNT) {
			sg_warn("SANDGUARD_DISABLE_FEATURES: no feature named '%s'", tok);
			continue;
		}
		f->f[i].ok = false;
		snprintf(f->f[i].why, sizeof(f->f[i].why),
			 "disabled by SANDGUARD_DISABLE_FEATURES");
	}
}

static void probe_cgroup_file(struct sg_probe_result *r, const char *cg, const char *file,
			      const char *missing)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	r->ok = access(path, W_OK) == 0;
	if (r->ok)
		snprintf(r->why, sizeof(r->why), "%s present", file);
	else
		snprintf(r->why, sizeof(r->why), "%s", missing);
}

const struct sg_features *probe_features(const char *cgroup_root)
{
	static struct sg_features f;
	static bool done;
	char probe_cg[PATH_MAX];
	int cg_fd = -1;

	if (done)
		return &f;
	done = true;
	memset(&f, 0, sizeof(f));
	ensure_kernel_fs();

	snprintf(probe_cg, sizeof(probe_cg), "%s/.probe-%d", cgroup_root, getpid());
	if (mkdir(probe_cg, 0700) == 0 || errno == EEXIST)
		cg_fd = open(probe_cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	probe_one(&f, SG_FEAT_RINGBUF, "probe_ringbuf", -1, -1, true);
	probe_one(&f, SG_FEAT_TP_BTF, "probe_tp_btf", -1, -1, false);
	probe_one(&f, SG_FEAT_SYSCALL_TP, "probe_syscall_tp", -1, -1, false);
	probe_one(&f, SG_FEAT_LSM, "probe_lsm", -1, -1, false);
	probe_one(&f, SG_FEAT_ATOMIC_FETCH, "probe_atomic_fetch", -1, -1, true);
	probe_one(&f, SG_FEAT_TRACING_ANCESTOR, "probe_tracing_ancestor", -1, -1, true);
	probe_one(&f, SG_FEAT_LSM_UNIX, "probe_lsm_unix", -1, -1, false);
	probe_one(&f, SG_FEAT_RDONLY_CAST, "probe_rdonly_cast", -1, -1, true);
	f.lsm_listed = lsm_listed();
	if (!f.f[SG_FEAT_LSM].ok && !f.lsm_listed)
		snprintf(f.f[SG_FEAT_LSM].why, sizeof(f.f[0].why),
			 "'bpf' is not in /sys/kernel/security/lsm: boot with lsm=...,bpf");
	else if (!f.f[SG_FEAT_LSM].ok && strstr(f.f[SG_FEAT_LSM].why, "refused"))
		snprintf(f.f[SG_FEAT_LSM].why, sizeof(f.f[0].why),
			 "lsm/file_open refused to load: 'bpf' is in /sys/kernel/security/lsm but "
			 "this kernel refuses BPF LSM programs (trampolines)");
	if (cg_fd >= 0) {
		probe_one(&f, SG_FEAT_CONNECT4, "probe_connect4", -1, cg_fd, false);
		probe_one(&f, SG_FEAT_CONNECT6, "probe_connect6", -1, cg_fd, false);
		probe_one(&f, SG_FEAT_SENDMSG4, "probe_sendmsg4", -1, cg_fd, false);
		probe_one(&f, SG_FEAT_SENDMSG6, "probe_sendmsg6", -1, cg_fd, false);
		probe_one(&f, SG_FEAT_CONNECT_UNIX, "probe_connect_unix", ATTACH_UNIX_CONNECT,
			  cg_fd, false);
		probe_one(&f, SG_FEAT_SENDMSG_UNIX, "probe_sendmsg_unix", ATTACH_UNIX_SENDMSG,
			  cg_fd, false);
		probe_one(&f, SG_FEAT_SKB_EGRESS, "probe_skb_egress", -1, cg_fd, false);
		probe_one(&f, SG_FEAT_LSM_CGROUP, "probe_lsm_cgroup", -1, cg_fd, false);
		probe_cgroup_file(&f.f[SG_FEAT_CGROUP_KILL], probe_cg, "cgroup.kill",
				  "no cgroup.kill (kernel < 5.14)");
		probe_cgroup_file(&f.f[SG_FEAT_CGROUP_FREEZE], probe_cg, "cgroup.freeze",
				  "no cgroup.freeze (kernel < 5.2)");
		close(cg_fd);
	} else {
		static const enum sg_feature cg_features[] = {
			SG_FEAT_CONNECT4,   SG_FEAT_CONNECT6,     SG_FEAT_SENDMSG4,
			SG_FEAT_SENDMSG6,   SG_FEAT_CONNECT_UNIX, SG_FEAT_SENDMSG_UNIX,
			SG_FEAT_SKB_EGRESS, SG_FEAT_CGROUP_KILL,  SG_FEAT_CGROUP_FREEZE,
			SG_FEAT_LSM_CGROUP,
		};
		for (size_t i = 0; i < ARRAY_LEN(cg_features); i++)
			snprintf(f.f[cg_features[i]].why, sizeof(f.f[0].why),
				 "cannot create a probe cgroup under %.100s", cgroup_root);
	}
	rmdir(probe_cg);
	apply_disabled(&f);
	/* After the features turned off: the unix hooks are BPF LSM programs
	 * too, and run only where it does. */
	if (!f.f[SG_FEAT_LSM].ok && f.f[SG_FEAT_LSM_UNIX].ok) {
		f.f[SG_FEAT_LSM_UNIX].ok = false;
		snprintf(f.f[SG_FEAT_LSM_UNIX].why, sizeof(f.f[0].why),
			 "loads, but BPF LSM programs do not run here (see bpf_lsm)");
	}
	/* So is an lsm_cgroup program, whatever the kernel's version. */
	if (!f.f[SG_FEAT_LSM].ok) {
		f.f[SG_FEAT_LSM_CGROUP].ok = false;
		snprintf(f.f[SG_FEAT_LSM_CGROUP].why, sizeof(f.f[0].why),
			 "BPF LSM programs do not run here (see bpf_lsm)");
	}
	return &f;
}

int choose_modes(const struct sg_features *f, enum sg_mode_request req, struct sg_modes *m,
		 char *err, size_t errlen)
{
	bool lsm = f->f[SG_FEAT_LSM].ok;
	bool fallback_files = f->f[SG_FEAT_SYSCALL_TP].ok && f->f[SG_FEAT_TP_BTF].ok;
	bool fallback_execs = f->f[SG_FEAT_TP_BTF].ok;

	memset(m, 0, sizeof(*m));
	if (req == SG_REQ_LSM && !lsm) {
		snprintf(err, errlen, "--mode lsm needs %s: %s", feature_name(SG_FEAT_LSM),
			 f->f[SG_FEAT_LSM].why);
		return -ENOTSUP;
	}
	if (req == SG_REQ_FALLBACK && (!fallback_files || !fallback_execs)) {
		snprintf(err, errlen, "--mode fallback needs %s (%s) and %s (%s)",
			 feature_name(SG_FEAT_TP_BTF), f->f[SG_FEAT_TP_BTF].why,
			 feature_name(SG_FEAT_SYSCALL_TP), f->f[SG_FEAT_SYSCALL_TP].why);
		return -ENOTSUP;
	}
	if (f->f[SG_FEAT_CONNECT_UNIX].ok && f->f[SG_FEAT_SENDMSG_UNIX].ok)
		m->unix_egress = SG_UNIX_CGROUP;
	else if (lsm && req != SG_REQ_FALLBACK && f->f[SG_FEAT_LSM_UNIX].ok)
		m->unix_egress = SG_UNIX_LSM;
	if (lsm && req != SG_REQ_FALLBACK) {
		m->files = m->execs = SG_MODE_LSM;
		m->lsm_cgroup = f->f[SG_FEAT_LSM_CGROUP].ok;
		snprintf(m->files_why, sizeof(m->files_why), "%s denies with EACCES%s",
			 m->lsm_cgroup ? "lsm_cgroup/file_open" : "lsm/file_open",
			 m->lsm_cgroup ? " (on the sandguard root: tasks outside it run no program)"
				       : "");
		snprintf(m->execs_why, sizeof(m->execs_why), "%s denies",
			 m->lsm_cgroup ? "lsm_cgroup/bprm_check_security"
				       : "lsm/bprm_check_security");
		return 0;
	}
	m->files = fallback_files ? SG_MODE_FALLBACK : SG_MODE_NONE;
	m->execs = fallback_execs ? SG_MODE_FALLBACK : SG_MODE_NONE;
	m->file_loads = fallback_files && f->f[SG_FEAT_RDONLY_CAST].ok;
	if (req == SG_REQ_FALLBACK) {
		snprintf(m->files_why, sizeof(m->files_why), "fallback requested");
		snprintf(m->execs_why, sizeof(m->execs_why), "fallback requested");
	} else {
		snprintf(m->files_why, sizeof(m->files_why), "BPF LSM unavailable: %s",
			 f->f[SG_FEAT_LSM].why);
		snprintf(m->execs_why, sizeof(m->execs_why),
			 "BPF LSM unavailable: killed at sched_process_exec");
	}
	if (fallback_files) {
		size_t n = strlen(m->files_why);
		snprintf(m->files_why + n, sizeof(m->files_why) - n, "; %s",
			 m->file_loads ? "the opened file read by plain loads (bpf_rdonly_cast)"
				       : "the opened file read by helper calls");
	}
	return 0;
}

bool enforcement_degraded(const struct sg_features *f, const struct sg_modes *m, char *why,
			  size_t len)
{
	static const enum sg_feature required[] = { SG_FEAT_RINGBUF,  SG_FEAT_CONNECT4,
						    SG_FEAT_CONNECT6, SG_FEAT_SENDMSG4,
						    SG_FEAT_SENDMSG6, SG_FEAT_SKB_EGRESS,
						    SG_FEAT_TP_BTF };
	size_t n = 0;

	why[0] = 0;
	if (m->files == SG_MODE_NONE)
		n += snprintf(why + n, n < len ? len - n : 0, "files unenforced (%s: %s; %s: %s); ",
			      feature_name(SG_FEAT_LSM), f->f[SG_FEAT_LSM].why,
			      feature_name(SG_FEAT_SYSCALL_TP), f->f[SG_FEAT_SYSCALL_TP].why);
	if (m->execs == SG_MODE_NONE)
		n += snprintf(why + n, n < len ? len - n : 0, "execs unenforced (%s: %s); ",
			      feature_name(SG_FEAT_LSM), f->f[SG_FEAT_LSM].why);
	/* LSM mode promises unix egress on every kernel. */
	if (m->files == SG_MODE_LSM && m->unix_egress == SG_UNIX_NONE)
		n += snprintf(why + n, n < len ? len - n : 0, "unix egress unenforced (%s: %s); ",
			      feature_name(SG_FEAT_LSM_UNIX), f->f[SG_FEAT_LSM_UNIX].why);
	if (!f->f[SG_FEAT_CGROUP_KILL].ok && !f->f[SG_FEAT_CGROUP_FREEZE].ok)
		n += snprintf(why + n, n < len ? len - n : 0,
			      "no way to empty a sandbox (cgroup_kill: %s; cgroup_freeze: %s); ",
			      f->f[SG_FEAT_CGROUP_KILL].why, f->f[SG_FEAT_CGROUP_FREEZE].why);
	for (size_t i = 0; i < ARRAY_LEN(required); i++)
		if (!f->f[required[i]].ok)
			n += snprintf(why + n, n < len ? len - n : 0, "%s: %s; ",
				      feature_name(required[i]), f->f[required[i]].why);
	if (n >= 2 && n < len && !strcmp(why + n - 2, "; "))
		why[n - 2] = 0; /* no separator after the last */
	return n > 0;
}

static const char *unix_mode_name(int m)
{
	return m == SG_UNIX_CGROUP ? "cgroup" : m == SG_UNIX_LSM ? "lsm" : "none";
}

void print_probe_table(FILE *out, const struct sg_features *f, const struct sg_modes *m)
{
	fprintf(out, "%-24s %-4s %s\n", "FEATURE", "OK", "DETAIL");
	for (int i = 0; i < SG_FEAT__COUNT; i++) {
		bool fb = !f->f[i].ok && fallbacks[i];

		fprintf(out, "%-24s %-4s %s%s%s\n", feature_name(i), f->f[i].ok ? "yes" : "no",
			f->f[i].why, fb ? "; fallback: " : "", fb ? fallbacks[i] : "");
	}
	fprintf(out, "\n%-24s %-12s %s\n", "AREA", "MODE", "WHY");
	fprintf(out, "%-24s %-12s %s\n", "files", enforce_mode_name(m->files), m->files_why);
	fprintf(out, "%-24s %-12s %s\n", "execs", enforce_mode_name(m->execs), m->execs_why);
	fprintf(out, "%-24s %-12s %s\n", "egress", f->f[SG_FEAT_CONNECT4].ok ? "cgroup" : "none",
		"inet sock_addr hooks, skb catch-all");
	fprintf(out, "%-24s %-12s %s\n", "egress_unix", unix_mode_name(m->unix_egress),
		m->unix_egress == SG_UNIX_CGROUP ? "cgroup/connect_unix, sendmsg_unix"
		: m->unix_egress == SG_UNIX_LSM
			? "lsm/unix_stream_connect, unix_may_send (no cgroup unix hooks: kernel < 6.7)"
			: "not judged by the agent (no cgroup unix hooks, no BPF LSM): the executor's mount and network namespaces");
	fprintf(out, "%-24s %-12s %s\n", "unix_bind", m->files == SG_MODE_LSM ? "lsm" : "none",
		m->files == SG_MODE_LSM
			? "lsm/socket_bind refuses named unix binds"
			: "no hook without BPF LSM: the executor's network namespace");
	fprintf(out, "%-24s %-12s %s\n", "forks", f->f[SG_FEAT_TP_BTF].ok ? "tp_btf" : "none",
		"bpf_send_signal in the kernel, then the agent empties the sandbox");
	fprintf(out, "%-24s %-12s %s\n", "kill",
		f->f[SG_FEAT_CGROUP_KILL].ok     ? "cgroup.kill"
		: f->f[SG_FEAT_CGROUP_FREEZE].ok ? "freeze"
						 : "procs",
		f->f[SG_FEAT_CGROUP_KILL].ok     ? "cgroup.kill empties the sandbox"
		: f->f[SG_FEAT_CGROUP_FREEZE].ok ? "cgroup.freeze, then SIGKILL each task"
						 : "SIGKILL over cgroup.procs until empty");
	fprintf(out, "%-24s %-12s %s\n", "bpf_objects",
		f->f[SG_FEAT_ATOMIC_FETCH].ok ? "full" : "compat",
		f->f[SG_FEAT_ATOMIC_FETCH].ok
			? "fetching atomics"
			: "no fetching atomics (kernel < 5.12): add then read");
}
