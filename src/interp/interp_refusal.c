/* Warm interpreters that could not start (see src/interp/interp.h):
 * a tenant's preloaded module that does not import (a typo, a module the
 * sandbox may not read) would otherwise make every warm call of that
 * tenant a platform error. Instead the failure is noted for the tenant,
 * the script and the policy, and their calls run cold for REFUSED_MS; then
 * one parent is tried again (a fixed module file is picked up without a
 * policy change). Logged when noted (so at most once per REFUSED_MS per
 * tenant and script), counted, and named in each cold call's result. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/log.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_interp.h"
#include "interp_refusal.h"

#define REFUSED_MS  60000
#define REFUSED_MAX 16 /* the oldest is forgotten past it */

struct refusal {
	char tenant[SG_TENANT_MAX];
	char script[PATH_MAX];
	uint64_t policy; /* sb_policy_digest() */
	uint64_t until_ms;
	char why[200];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct refusal refused[REFUSED_MAX];
static uint64_t fallbacks;

/* FNV-1a over the sandbox's part of the policy (sandbox_policy_same()'s). */
static uint64_t sb_policy_digest(const struct sandbox *sb)
{
	const unsigned char *p = (const unsigned char *)sandbox_policy(sb);
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < sizeof(struct sg_policy); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static struct refusal *find(const struct sandbox *sb, const char *script, uint64_t digest,
			    uint64_t now)
{
	for (int i = 0; i < REFUSED_MAX; i++) {
		struct refusal *r = &refused[i];

		if (r->until_ms > now && r->policy == digest &&
		    !strcmp(r->tenant, sandbox_tenant(sb)) && !strcmp(r->script, script))
			return r;
	}
	return NULL;
}

void interp_note_refusal(const struct sandbox *sb, const char *script, const char *why)
{
	uint64_t now = clock_ms(CLOCK_MONOTONIC), digest = sb_policy_digest(sb);
	struct refusal *r;

	pthread_mutex_lock(&lock);
	r = find(sb, script, digest, now);
	if (!r) {
		r = &refused[0];
		for (int i = 1; i < REFUSED_MAX; i++)
			if (refused[i].until_ms < r->until_ms)
				r = &refused[i];
		snprintf(r->tenant, sizeof(r->tenant), "%s", sandbox_tenant(sb));
		snprintf(r->script, sizeof(r->script), "%s", script);
		r->policy = digest;
		snprintf(r->why, sizeof(r->why), "%s", why);
		/* The node's log, not the caller's (sg_log_to()): on-call's. */
		FILE *caller = sg_log_stream();

		sg_log_to(NULL);
		sg_warn("tenant %s: the warm interpreter for %s cannot serve (%s): its calls run "
			"cold for %d s, then one is tried again",
			sandbox_tenant(sb), script, why, REFUSED_MS / 1000);
		sg_log_to(caller);
	}
	r->until_ms = now + REFUSED_MS;
	pthread_mutex_unlock(&lock);
}

bool interp_refused(const struct sandbox *sb, const char *script, char *why, size_t len)
{
	struct refusal *r;
	uint64_t digest;
	bool found = false;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < REFUSED_MAX && !found; i++)
		found = refused[i].until_ms != 0;
	if (found) {
		digest = sb_policy_digest(sb);
		r = find(sb, script, digest, clock_ms(CLOCK_MONOTONIC));
		found = r != NULL;
		if (r && why) {
			snprintf(why, len, "%s", r->why);
			fallbacks++;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}

uint64_t interp_fallbacks(void)
{
	uint64_t n;

	pthread_mutex_lock(&lock);
	n = fallbacks;
	pthread_mutex_unlock(&lock);
	return n;
}
