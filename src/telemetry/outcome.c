#include <string.h>
#include "outcome.h"

static const char *const cause_names[SG_CAUSE__COUNT] = {
	[SG_CAUSE_OK] = "ok",
	[SG_CAUSE_TENANT_TIMEOUT] = "tenant_timeout",
	[SG_CAUSE_TENANT_BAD_OUTPUT] = "tenant_bad_output",
	[SG_CAUSE_TENANT_CRASH] = "tenant_crash",
	[SG_CAUSE_TENANT_OOM] = "tenant_oom",
	[SG_CAUSE_TENANT_POLICY_VIOLATION] = "tenant_policy_violation",
	[SG_CAUSE_TENANT_PAUSED] = "tenant_paused",
	[SG_CAUSE_PLATFORM_ERROR] = "platform_error",
};

const char *cause_name(enum sg_cause c)
{
	return (unsigned)c < SG_CAUSE__COUNT ? cause_names[c] : "unknown";
}

int cause_from_name(const char *name)
{
	for (int i = 0; i < SG_CAUSE__COUNT; i++)
		if (!strcmp(name, cause_names[i]))
			return i;
	return -1;
}

enum sg_fault_class cause_class(enum sg_cause c)
{
	switch (c) {
	case SG_CAUSE_OK:
		return SG_CLASS_NONE;
	case SG_CAUSE_PLATFORM_ERROR:
		return SG_CLASS_PLATFORM;
	default:
		/* tenant_paused is the tenant's state, not the platform's fault */
		return SG_CLASS_TENANT_CODE;
	}
}

enum sg_fault_class outcome_class(enum sg_mode mode, enum sg_cause cause)
{
	enum sg_fault_class c = cause_class(cause);

	if (mode != SG_MODE_BATCH && c == SG_CLASS_TENANT_CODE && cause != SG_CAUSE_TENANT_PAUSED)
		return SG_CLASS_VERDICT;
	return c;
}

const char *fault_class_name(enum sg_fault_class c)
{
	switch (c) {
	case SG_CLASS_TENANT_CODE:
		return "tenant_code";
	case SG_CLASS_PLATFORM:
		return "platform";
	case SG_CLASS_VERDICT:
		return "verdict";
	default:
		return "none";
	}
}

static const char *const mode_names[SG_MODE__COUNT] = {
	[SG_MODE_BATCH] = "batch",
	[SG_MODE_VERIFY] = "verify",
	[SG_MODE_RUN] = "run",
	[SG_MODE_SESSION] = "session",
};

const char *mode_name(enum sg_mode m)
{
	return (unsigned)m < SG_MODE__COUNT ? mode_names[m] : "unknown";
}

int mode_from_name(const char *name)
{
	for (int i = 0; name && i < SG_MODE__COUNT; i++)
		if (!strcmp(name, mode_names[i]))
			return i;
	return -1;
}
