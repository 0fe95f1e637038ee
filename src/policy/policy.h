/* Tenant policies: JSON files, one <tenant>.json per tenant plus
 * default.json, validated with file:line:col errors. See docs/policy.md. */
#ifndef SG_POLICY_H
#define SG_POLICY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "abi/events.h"

#define SG_TENANT_MAX         64 /* bytes, including the NUL */
#define SG_POLICY_PATHS       64
#define SG_POLICY_GLOBS       64
#define SG_POLICY_EGRESS      32
#define SG_POLICY_PATHLEN     256
#define SG_POLICY_REWARD_ARGS 16

enum sg_failure_mode { SG_FAILURE_RETRY = 1, SG_FAILURE_SKIP, SG_FAILURE_PAUSE };
enum sg_excess_mode { SG_EXCESS_WAIT = 1, SG_EXCESS_REFUSE };

struct sg_egress_allow {
	int family;       /* AF_INET or AF_INET6 as written */
	uint8_t addr[16]; /* IPv6; IPv4 stored as ::ffff:a.b.c.d */
	uint8_t prefix;   /* over the 128-bit form */
	uint8_t proto;    /* 0 any, IPPROTO_TCP, IPPROTO_UDP */
	uint16_t port;    /* 0 any */
};

/* The largest limits.concurrency a policy may ask for. */
#define SG_CONCURRENCY_MAX 4096

struct sg_limits {
	uint64_t timeout_ms; /* wall-clock deadline per batch */
	uint64_t memory_mb;
	uint32_t max_tasks;   /* live tasks (pids) */
	uint32_t max_forks;   /* forks over the sandbox's life */
	double cpu;           /* cores, e.g. 1.5 */
	uint32_t concurrency; /* sandboxes per tenant per node */
	enum sg_excess_mode on_excess;
	uint64_t queue_timeout_ms; /* bounded wait when on_excess = wait */
	uint64_t output_bytes;     /* cap on stdout and on stderr, each */
	uint32_t open_files;       /* RLIMIT_NOFILE of every sandbox process */
	uint64_t file_size_mb;     /* RLIMIT_FSIZE: the largest file a sandbox may write */
	/* io.max (v2) or blkio throttling (v1) on the block devices behind
	 * the read-only paths; 0: no limit. */
	uint64_t io_read_mbps, io_write_mbps;
	uint64_t io_read_iops, io_write_iops;
};

/* Warm interpreters (docs/policy.md "warm"): a forkserver parent per
 * tenant, inside a sandbox of that tenant, forks each call's process with
 * the preloaded modules already imported. Off unless interpreter is set. */
enum sg_warm_interp { SG_WARM_OFF = 0, SG_WARM_PYTHON3 };
#define SG_WARM_PRELOADS  16
#define SG_WARM_MODULELEN 64

struct sg_warm {
	uint8_t interpreter;                               /* enum sg_warm_interp */
	char preload[SG_WARM_PRELOADS][SG_WARM_MODULELEN]; /* dotted module names */
	int n_preload;
	uint32_t max_calls;     /* the parent is recycled after this many calls */
	uint32_t max_age_s;     /* or this long after it started */
	uint32_t max_growth_mb; /* or when its RSS grew this much past its start */
	/* Verifier mode's Python tests too, on a parent of their own that
	 * preloads nothing (docs/policy.md "warm", docs/warm-interpreters.md). */
	bool verify;
};

/* Environments (docs/environments.md): sessions, sandboxes that live
 * across calls. Off (max_sessions 0) unless the policy has a "session"
 * section. */
struct sg_session {
	uint32_t max_sessions;    /* live sessions of the tenant on this server; 0: none */
	uint64_t step_timeout_ms; /* one step's deadline; 0: limits.timeout_ms */
	uint32_t idle_timeout_s;  /* closed after this long without a call */
	uint32_t max_lifetime_s;  /* closed this long after its creation */
	uint32_t cpu_seconds;     /* the CPU time of all its steps together */
};

/* How verifier mode judges a test (docs/policy.md "verify"). */
enum sg_grader {
	SG_GRADER_STRICT = 0, /* the program as a process: its exit status counts */
	SG_GRADER_LCB,        /* LiveCodeBench's grader, in-process (src/exec/verify_judge.h) */
};

struct sg_health {
	uint32_t window;       /* batches per window */
	double constant_rate;  /* fire when constant batches / window >= this */
	double invalid_rate;   /* fire when invalid batches / window >= this */
	uint32_t dead_windows; /* M consecutive flat windows = dead stream */
	double dead_epsilon;   /* "flat within noise": |delta| <= epsilon */
	/* Reward explosion / collapse (src/health/detectors.h): a batch
	 * mean outside median +- band_k * IQR of the band_window batch means
	 * before it; band_min_iqr floors the IQR. band_window 0 = off. */
	uint32_t band_window;
	double band_k;
	double band_min_iqr;
};

/* Canaries (src/exec/canary.h): probe items with accepted score ranges,
 * mixed into the tenant's score batches and stripped before the trainer
 * sees the scores. No probe file: off. */
struct sg_canary {
	char probes[SG_POLICY_PATHLEN]; /* the probe set, an absolute path; "" = off */
	double rate;                    /* share of batches that carry probes */
	uint32_t per_batch;             /* probes in such a batch */
	double determinism_rate;        /* share of ok batches re-scored in a second sandbox */
	double determinism_tolerance;   /* |score - rescore| above this is non-determinism */
};

enum sg_tier {
	SG_TIER_NONE = 0,
	SG_TIER_FUNCTION,
	SG_TIER_VERIFIER,
	SG_TIER_REWARD_MODEL,
	SG_TIER_ENVIRONMENT,
};
#define SG_INFERENCE_DEVICES 8

/* Reward artifacts pinned by SHA-256 (docs/policy.md "artifacts",
 * src/exec/artifact.h): a file, or a directory through the manifest of its
 * files. */
#define SG_ARTIFACT_PINS         16
#define SG_SHA256_HEX            65 /* 64 hex digits and the NUL */
#define SG_ARTIFACT_KEYS         4  /* two at once for a rotation, and room */
#define SG_PUBKEY_LEN            64 /* a minisign public key line: 56 base64 characters */
#define SG_ARTIFACT_SCANNER_ARGS 8
struct sg_artifact_pin {
	char path[SG_POLICY_PATHLEN];
	char sha256[SG_SHA256_HEX];
};
struct sg_artifacts {
	bool require; /* every file the command names outside /usr must be pinned */
	struct sg_artifact_pin pins[SG_ARTIFACT_PINS];
	int n_pins;
	/* Ed25519 keys in minisign's format; any set: every pin must carry a
	 * signature by one of them (src/artifact/artifact_sign.h). */
	char public_keys[SG_ARTIFACT_KEYS][SG_PUBKEY_LEN];
	int n_public_keys;
	/* A scanner run once per new digest, in a sandbox of the tenant,
	 * before first use (src/exec/artifact_scan.h); 0: none. */
	char scanner[SG_ARTIFACT_SCANNER_ARGS][SG_POLICY_PATHLEN];
	int n_scanner;
};

struct sg_policy {
	char tenant[SG_TENANT_MAX];
	bool enabled;
	bool require_agent;
	struct sg_limits limits;
	struct sg_egress_allow egress[SG_POLICY_EGRESS];
	int n_egress;
	bool allow_unix;
	bool allow_listen;        /* listen() and accept() inside the sandbox */
	uint32_t max_connections; /* relayed egress connections open at once */
	char scratch_root[SG_POLICY_PATHLEN];
	uint64_t scratch_mb;     /* the scratch tmpfs: size= */
	uint64_t scratch_inodes; /* and nr_inodes= */
	char read_only[SG_POLICY_PATHS][SG_POLICY_PATHLEN];
	int n_read_only;
	char exec_allow[SG_POLICY_GLOBS][SG_POLICY_PATHLEN];
	int n_exec_allow;
	uint8_t action[SG_RULE__COUNT]; /* enum sg_policy_action per rule */
	enum sg_failure_mode failure;
	uint32_t max_retries;
	struct sg_health health;
	struct sg_canary canary;
	struct sg_warm warm;
	struct sg_session session;
	/* The tenant's reward program, for requests that cannot name one:
	 * OpenRLHF's remote reward (POST /openrlhf/reward) sends only the
	 * samples. argv of absolute paths; n_reward_command 0: none. */
	char reward_command[SG_POLICY_REWARD_ARGS][SG_POLICY_PATHLEN];
	int n_reward_command;
	uint8_t grader; /* enum sg_grader: verifier mode's default */
	struct sg_artifacts artifacts;
	/* The onboarding runbook's tier (docs/policy.md, "Example policies"),
	 * and for the reward-model tier alone, the device nodes of its own
	 * inference pool: the only accelerator nodes its sandboxes see
	 * (docs/policy.md, "Devices"). */
	uint8_t tier; /* enum sg_tier */
	char inference_devices[SG_INFERENCE_DEVICES][SG_POLICY_PATHLEN];
	int n_inference_devices;
	char source[SG_POLICY_PATHLEN]; /* file it came from, or "<embedded>" */
};

/* A validation error, printed as "file:line:col: message". */
struct sg_policy_error {
	char file[SG_POLICY_PATHLEN];
	int line, col;
	char msg[512];
};

/* Where the agent, the executor and the server read policies unless told
 * otherwise: $SANDGUARD_POLICY_DIR, else "policies" (relative to the
 * working directory; deployments pass an absolute --policy-dir). One
 * default for all three, so they never judge a sandbox by two policies. */
#define SG_POLICY_DIR_DEFAULT "policies"
const char *policy_dir_default(void);

/* The built-in defaults every field falls back to. */
void policy_defaults(struct sg_policy *p);

/* Parse and validate one policy document. Returns 0, or -EINVAL with *err
 * filled in (the first problem found). `name` is used in errors. It
 * parses straight into *out (no copy of the 35 KiB struct): after an
 * error *out holds no policy, all zero once the text was looked at, and
 * must not be used. The same holds for the two functions below. */
int policy_parse(const char *text, size_t len, const char *name, struct sg_policy *out,
		 struct sg_policy_error *err);
int policy_load_file(const char *path, struct sg_policy *out, struct sg_policy_error *err);

/* The embedded copy of policies/default.json. */
const char *policy_embedded_default(size_t *len);

/* The policy for `tenant`: <dir>/<tenant>.json, else <dir>/default.json,
 * else the embedded default; tenant is set to `tenant` in the latter two.
 * An invalid or unreadable file is an error, never a silent default. */
int policy_for_tenant(const char *dir, const char *tenant, struct sg_policy *out,
		      struct sg_policy_error *err);

/* Tenant names: [a-z0-9][a-z0-9_-]{0,62}, so they are safe as a cgroup
 * directory, a file name and a Prometheus label value. */
bool tenant_name_valid(const char *name);

void policy_error_format(const struct sg_policy_error *e, char *buf, size_t len);

const char *policy_action_name(int action); /* "deny", "kill", "log" */
const char *failure_mode_name(enum sg_failure_mode m);

/* Matching used by policy checks and by the agent when it compiles a
 * policy into maps. */
bool glob_valid(const char *pattern, const char **why);
bool glob_match(const char *pattern, const char *path);
int cidr_parse(const char *text, struct sg_egress_allow *out); /* 0 or -EINVAL */
bool egress_allowed(const struct sg_policy *p, const uint8_t addr16[16], uint16_t port,
		    uint8_t proto);
/* The index of the first allow rule that matches, or -1. */
int egress_match(const struct sg_policy *p, const uint8_t addr16[16], uint16_t port, uint8_t proto);

#endif
