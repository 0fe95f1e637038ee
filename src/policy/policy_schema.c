/* The policy schema (see src/policy/policy_schema.h): every key a policy
 * document may hold, its bounds and where it lands in struct sg_policy.
 * Kept apart from the walker in policy_parse.c because the two change for
 * different reasons: a new policy key touches only these tables (and
 * docs/policy.md), a new kind of value only the walker. */
#include <netinet/in.h>
#include <stddef.h>
#include "policy.h"
#include "policy_schema.h"

#define MEMBER(type, m) .off = offsetof(type, m), .size = sizeof(((type *)0)->m)
#define P(m)            MEMBER(struct sg_policy, m)
#define INT(k, m, lo, hi)                                           \
	{                                                           \
		.key = k, .kind = K_INT, P(m), .min = lo, .max = hi \
	}
#define REAL(k, m, lo, hi)                                             \
	{                                                              \
		.key = k, .kind = K_REAL, P(m), .dmin = lo, .dmax = hi \
	}
#define CHOICE(k, m, list)                                        \
	{                                                         \
		.key = k, .kind = K_CHOICE, P(m), .choices = list \
	}
#define OBJECT(k, list)                                    \
	{                                                  \
		.key = k, .kind = K_OBJECT, .fields = list \
	}
#define BOOL(k, m)                             \
	{                                      \
		.key = k, .kind = K_BOOL, P(m) \
	}

static const struct choice excess_modes[] = { { "wait", SG_EXCESS_WAIT },
					      { "refuse", SG_EXCESS_REFUSE },
					      { NULL, 0 } };
static const struct choice failure_modes[] = { { "retry", SG_FAILURE_RETRY },
					       { "skip", SG_FAILURE_SKIP },
					       { "pause", SG_FAILURE_PAUSE },
					       { NULL, 0 } };
static const struct choice protos[] = {
	{ "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "any", 0 }, { NULL, 0 }
};
/* Which actions make sense per rule: a fork past the limit cannot be
 * refused without killing, and memory is enforced by the OOM killer. */
static const struct choice deny_kill_log[] = { { "deny", SG_POLICY_DENY },
					       { "kill", SG_POLICY_KILL },
					       { "log", SG_POLICY_LOG },
					       { NULL, 0 } };
static const struct choice kill_log[] = { { "kill", SG_POLICY_KILL },
					  { "log", SG_POLICY_LOG },
					  { NULL, 0 } };
static const struct choice kill_only[] = { { "kill", SG_POLICY_KILL }, { NULL, 0 } };

static const struct field limits_fields[] = {
	INT("timeout_ms", limits.timeout_ms, 1, 3600000),
	INT("memory_mb", limits.memory_mb, 16, 1048576),
	INT("max_tasks", limits.max_tasks, 1, 65536),
	INT("max_forks", limits.max_forks, 1, 10000000),
	REAL("cpu", limits.cpu, 0.01, 1024),
	INT("concurrency", limits.concurrency, 1, SG_CONCURRENCY_MAX),
	CHOICE("on_excess", limits.on_excess, excess_modes),
	INT("queue_timeout_ms", limits.queue_timeout_ms, 0, 3600000),
	INT("output_bytes", limits.output_bytes, 1, 1073741824),
	INT("open_files", limits.open_files, 16, 1048576),
	INT("file_size_mb", limits.file_size_mb, 1, 1048576),
	INT("io_read_mbps", limits.io_read_mbps, 0, 1048576),
	INT("io_write_mbps", limits.io_write_mbps, 0, 1048576),
	INT("io_read_iops", limits.io_read_iops, 0, 10000000),
	INT("io_write_iops", limits.io_write_iops, 0, 10000000),
	{ .key = NULL },
};

const struct field policy_egress_entry_fields[] = {
	{ .key = "cidr", .kind = K_CIDR, .required = true },
	{ .key = "port",
	  .kind = K_INT,
	  MEMBER(struct sg_egress_allow, port),
	  .min = 0,
	  .max = 65535 },
	{ .key = "proto",
	  .kind = K_CHOICE,
	  MEMBER(struct sg_egress_allow, proto),
	  .choices = protos },
	{ .key = NULL },
};

static const struct field egress_fields[] = {
	{ .key = "allow",
	  .kind = K_EGRESS_LIST,
	  P(egress),
	  .count_off = offsetof(struct sg_policy, n_egress),
	  .max = SG_POLICY_EGRESS },
	BOOL("allow_unix", allow_unix),
	BOOL("allow_listen", allow_listen),
	INT("max_connections", max_connections, 1, 4096),
	{ .key = NULL },
};

static const struct field files_fields[] = {
	{ .key = "scratch_root", .kind = K_DIR, P(scratch_root) },
	INT("scratch_mb", scratch_mb, 1, 1048576),
	INT("scratch_inodes", scratch_inodes, 64, 16777216),
	{ .key = "read_only",
	  .kind = K_DIR_LIST,
	  P(read_only),
	  .count_off = offsetof(struct sg_policy, n_read_only),
	  .max = SG_POLICY_PATHS },
	{ .key = NULL },
};

static const struct field exec_fields[] = {
	{ .key = "allow",
	  .kind = K_GLOB_LIST,
	  P(exec_allow),
	  .count_off = offsetof(struct sg_policy, n_exec_allow),
	  .max = SG_POLICY_GLOBS },
	{ .key = NULL },
};

static const struct field actions_fields[] = {
	CHOICE("egress", action[SG_RULE_EGRESS], deny_kill_log),
	CHOICE("file", action[SG_RULE_FILE], deny_kill_log),
	CHOICE("fork", action[SG_RULE_FORK], kill_log),
	CHOICE("exec", action[SG_RULE_EXEC], deny_kill_log),
	CHOICE("memory", action[SG_RULE_MEMORY], kill_only),
	{ .key = NULL },
};

static const struct field failure_fields[] = {
	CHOICE("mode", failure, failure_modes),
	INT("max_retries", max_retries, 0, 100),
	{ .key = NULL },
};

static const struct field health_fields[] = {
	INT("window", health.window, 1, 100000),
	REAL("constant_rate", health.constant_rate, 0, 1),
	REAL("invalid_rate", health.invalid_rate, 0, 1),
	INT("dead_windows", health.dead_windows, 1, 10000),
	REAL("dead_epsilon", health.dead_epsilon, 0, 1),
	INT("band_window", health.band_window, 0, 10000),
	REAL("band_k", health.band_k, 0, 1000),
	REAL("band_min_iqr", health.band_min_iqr, 0, 1e12),
	{ .key = NULL },
};

static const struct field canary_fields[] = {
	{ .key = "probes", .kind = K_DIR, P(canary.probes) },
	REAL("rate", canary.rate, 0, 1),
	INT("per_batch", canary.per_batch, 1, 64),
	REAL("determinism_rate", canary.determinism_rate, 0, 1),
	REAL("determinism_tolerance", canary.determinism_tolerance, 0, 1e12),
	{ .key = NULL },
};

static const struct choice warm_interpreters[] = { { "none", SG_WARM_OFF },
						   { "python3", SG_WARM_PYTHON3 },
						   { NULL, 0 } };

static const struct field warm_fields[] = {
	CHOICE("interpreter", warm.interpreter, warm_interpreters),
	{ .key = "preload",
	  .kind = K_MODULE_LIST,
	  P(warm.preload),
	  .count_off = offsetof(struct sg_policy, warm.n_preload),
	  .max = SG_WARM_PRELOADS },
	INT("max_calls", warm.max_calls, 1, 1000000),
	INT("max_age_s", warm.max_age_s, 1, 86400),
	INT("max_growth_mb", warm.max_growth_mb, 1, 65536),
	BOOL("verify", warm.verify),
	{ .key = NULL },
};

static const struct field session_fields[] = {
	INT("max_sessions", session.max_sessions, 0, 100000),
	INT("step_timeout_ms", session.step_timeout_ms, 1, 86400000),
	INT("idle_timeout_s", session.idle_timeout_s, 1, 86400),
	INT("max_lifetime_s", session.max_lifetime_s, 1, 604800),
	INT("cpu_seconds", session.cpu_seconds, 1, 604800),
	{ .key = NULL },
};

static const struct field reward_fields[] = {
	{ .key = "command",
	  .kind = K_DIR_LIST,
	  P(reward_command),
	  .count_off = offsetof(struct sg_policy, n_reward_command),
	  .max = SG_POLICY_REWARD_ARGS },
	{ .key = NULL },
};

static const struct choice graders[] = { { "strict", SG_GRADER_STRICT },
					 { "lcb", SG_GRADER_LCB },
					 { NULL, 0 } };

static const struct field verify_fields[] = {
	CHOICE("grader", grader, graders),
	{ .key = NULL },
};

const struct field policy_pin_entry_fields[] = {
	{ .key = "path", .kind = K_DIR, MEMBER(struct sg_artifact_pin, path), .required = true },
	{ .key = "sha256",
	  .kind = K_SHA256,
	  MEMBER(struct sg_artifact_pin, sha256),
	  .required = true },
	{ .key = NULL },
};

static const struct field artifacts_fields[] = {
	BOOL("require", artifacts.require),
	{ .key = "pins",
	  .kind = K_PIN_LIST,
	  P(artifacts.pins),
	  .count_off = offsetof(struct sg_policy, artifacts.n_pins),
	  .max = SG_ARTIFACT_PINS },
	{ .key = "public_keys",
	  .kind = K_PUBKEY_LIST,
	  P(artifacts.public_keys),
	  .count_off = offsetof(struct sg_policy, artifacts.n_public_keys),
	  .max = SG_ARTIFACT_KEYS },
	{ .key = "scanner",
	  .kind = K_DIR_LIST,
	  P(artifacts.scanner),
	  .count_off = offsetof(struct sg_policy, artifacts.n_scanner),
	  .max = SG_ARTIFACT_SCANNER_ARGS },
	{ .key = NULL },
};

static const struct choice tiers[] = { { "none", SG_TIER_NONE },
				       { "function", SG_TIER_FUNCTION },
				       { "verifier", SG_TIER_VERIFIER },
				       { "reward-model", SG_TIER_REWARD_MODEL },
				       { "environment", SG_TIER_ENVIRONMENT },
				       { NULL, 0 } };

const struct field policy_top_fields[] = {
	{ .key = "tenant", .kind = K_TENANT, P(tenant) },
	BOOL("enabled", enabled),
	BOOL("require_agent", require_agent),
	OBJECT("limits", limits_fields),
	OBJECT("egress", egress_fields),
	OBJECT("files", files_fields),
	OBJECT("exec", exec_fields),
	OBJECT("actions", actions_fields),
	OBJECT("failure", failure_fields),
	OBJECT("health", health_fields),
	OBJECT("canary", canary_fields),
	OBJECT("warm", warm_fields),
	OBJECT("session", session_fields),
	OBJECT("reward", reward_fields),
	OBJECT("verify", verify_fields),
	OBJECT("artifacts", artifacts_fields),
	CHOICE("tier", tier, tiers),
	/* Checked further once the whole file is read (policy_parse.c):
	 * the reward-model tier's alone, and each under /dev. */
	{ .key = "inference_devices",
	  .kind = K_DIR_LIST,
	  P(inference_devices),
	  .count_off = offsetof(struct sg_policy, n_inference_devices),
	  .max = SG_INFERENCE_DEVICES },
	{ .key = NULL },
};
