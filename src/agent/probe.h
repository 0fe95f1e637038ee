/* What the running kernel really allows, found by loading and attaching
 * small programs (never by comparing versions), and the mode chosen per
 * feature. Probed once per process and cached. */
#ifndef SG_PROBE_H
#define SG_PROBE_H
#include <stdbool.h>
#include <stdio.h>

enum sg_feature {
	SG_FEAT_RINGBUF = 0,
	SG_FEAT_TP_BTF,     /* fork/exec/exit tracking, bpf_send_signal */
	SG_FEAT_SYSCALL_TP, /* the file fallback */
	SG_FEAT_LSM,        /* lsm/file_open, lsm/bprm_check_security */
	SG_FEAT_CONNECT4,
	SG_FEAT_CONNECT6,
	SG_FEAT_SENDMSG4,
	SG_FEAT_SENDMSG6,
	SG_FEAT_CONNECT_UNIX,
	SG_FEAT_SENDMSG_UNIX,
	SG_FEAT_SKB_EGRESS,
	SG_FEAT_CGROUP_KILL,
	SG_FEAT_ATOMIC_FETCH,     /* 5.12: else the compat objects */
	SG_FEAT_TRACING_ANCESTOR, /* ancestor cgroup helper outside cgroup programs */
	SG_FEAT_LSM_UNIX,         /* lsm/unix_*: unix egress without cgroup unix hooks */
	SG_FEAT_CGROUP_FREEZE,    /* cgroup.freeze: the kill without cgroup.kill */
	SG_FEAT_RDONLY_CAST,      /* 6.2: the fallback's open programs read the file by loads */
	SG_FEAT_LSM_CGROUP,       /* 6.0: LSM mode's file and exec programs on the root cgroup */
	SG_FEAT__COUNT
};

struct sg_probe_result {
	bool ok;
	char why[200]; /* what failed, or what was checked */
};

struct sg_features {
	struct sg_probe_result f[SG_FEAT__COUNT];
	bool lsm_listed; /* "bpf" in /sys/kernel/security/lsm */
};

enum sg_mode_request { SG_REQ_AUTO = 0, SG_REQ_LSM, SG_REQ_FALLBACK };

/* The mode per enforcement area, decided from the features. */
struct sg_modes {
	int files; /* enum sg_enforce_mode: LSM, FALLBACK or NONE */
	int execs;
	int unix_egress; /* SG_UNIX_* */
	/* Fallback files: the open programs read the file by plain loads
	 * through bpf_rdonly_cast() (the rdonly_cast feature), else by a
	 * helper call per field. The same judgement either way. */
	bool file_loads;
	/* LSM mode: file_open and bprm_check_security attached to the
	 * sandguard root as BPF_LSM_CGROUP (the lsm_cgroup feature), so the
	 * kernel runs them only for tasks below it; else attached to the
	 * hooks themselves, for every task of the node. */
	bool lsm_cgroup;
	char files_why[300];
	char execs_why[300];
};

/* Who judges unix connects and sends from sandboxes. */
enum sg_unix_egress {
	SG_UNIX_NONE = 0, /* the agent does not: the executor's layers only */
	SG_UNIX_CGROUP,   /* cgroup/connect_unix, sendmsg_unix (6.7+) */
	SG_UNIX_LSM,      /* lsm/unix_stream_connect, unix_may_send */
};

const char *feature_name(enum sg_feature f);

/* Mount tracefs and securityfs where they are missing. */
void ensure_kernel_fs(void);

/* Probe everything (cached after the first call). cgroup_root is where
 * cgroup hooks are test-attached (a temporary child is made there).
 * $SANDGUARD_DISABLE_FEATURES (comma-separated feature names) marks
 * features absent, so a newer kernel can run the fallbacks an older one
 * needs (the tests do). */
const struct sg_features *probe_features(const char *cgroup_root);

/* Choose the modes. Returns 0, or -ENOTSUP with *err naming what is
 * missing when `req` asks for something the kernel can't do. */
int choose_modes(const struct sg_features *f, enum sg_mode_request req, struct sg_modes *m,
		 char *err, size_t errlen);

/* Whether an area the product promises is unenforced (a missing
 * capability, a hook the kernel refused): the agent then refuses to start,
 * naming what is missing. Unix egress in fallback mode before 6.7 (no
 * hook exists) does not count: the executor's layers cover it. Fills
 * `why` when degraded. */
bool enforcement_degraded(const struct sg_features *f, const struct sg_modes *m, char *why,
			  size_t len);

int parse_mode_request(const char *s, enum sg_mode_request *out);
const char *enforce_mode_name(int mode);

/* The human table `sandguard probe` prints and the agent logs once. */
void print_probe_table(FILE *out, const struct sg_features *f, const struct sg_modes *m);

#endif
