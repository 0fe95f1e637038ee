/* Batch outcomes: the causes every failure is booked to, and their class.
 * Shared by the executor (which decides them), the agent's ledger (which
 * counts them) and the metrics. */
#ifndef SG_OUTCOME_H
#define SG_OUTCOME_H
#include <stdbool.h>
#include <stdint.h>
#include "lib/ids.h"
#include "policy/policy.h"

enum sg_cause {
	SG_CAUSE_OK = 0,
	SG_CAUSE_TENANT_TIMEOUT,
	SG_CAUSE_TENANT_BAD_OUTPUT,
	SG_CAUSE_TENANT_CRASH,
	SG_CAUSE_TENANT_OOM,
	SG_CAUSE_TENANT_POLICY_VIOLATION,
	SG_CAUSE_TENANT_PAUSED,
	SG_CAUSE_PLATFORM_ERROR,
	SG_CAUSE__COUNT
};

/* The runbook's classes: a tenant code fault is surfaced to the customer,
 * a platform fault spends the platform's error budget. */
enum sg_fault_class {
	SG_CLASS_NONE = 0,
	SG_CLASS_TENANT_CODE,
	SG_CLASS_PLATFORM,
};

const char *cause_name(enum sg_cause c); /* "tenant_timeout", ... */
int cause_from_name(const char *name);   /* -1 if unknown */
enum sg_fault_class cause_class(enum sg_cause c);
const char *fault_class_name(enum sg_fault_class c); /* "none", "tenant_code", "platform" */

/* One attempt's outcome, as the executor reports it to the agent. */
struct sg_outcome {
	char tenant[SG_TENANT_MAX];
	char run_id[SG_ID_BUF];
	char batch_id[SG_ID_BUF];
	char sandbox[SG_ID_BUF];
	uint64_t cgroup_id;
	enum sg_cause cause;
	int rule;         /* enum sg_rule, or -1 */
	uint32_t attempt; /* 1-based */
	bool final;       /* the batch's last attempt: counts as a batch */
	uint64_t wall_ms;
	uint32_t n_scores; /* valid scores (cause ok) */
	double score_mean;
	double score_var;
	bool constant; /* all scores equal (degenerate batch) */
	bool invalid;  /* failed the schema gate */
};

#endif
