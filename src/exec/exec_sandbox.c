/* Where a mode's sandboxes come from, and how long each serves (see
 * exec_internal.h): taken from ctx->sandboxes (the warm executor's pool)
 * or prepared on the spot; one run each, or reset between the tests of
 * one verifier request; retired once the last run is booked. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control/enforcer.h"
#include "exec_internal.h"
#include "interp/interp.h"
#include "lib/clock.h"
#include "lib/log.h"

static int take(const struct exec_ctx *ctx, const struct sandbox_spec *spec, struct sandbox **sb,
		char *detail, size_t len)
{
	if (ctx->sandboxes)
		return ctx->sandboxes->take(ctx->sandboxes->self, spec, sb, detail, len);
	return sandbox_prepare(spec, sb, detail, len);
}

void exec_box_done(const struct exec_ctx *ctx, struct exec_box *box)
{
	if (!box->sb)
		return;
	if (ctx->sandboxes)
		ctx->sandboxes->retire(ctx->sandboxes->self, box->sb);
	else
		sandbox_destroy(box->sb);
	box->sb = NULL;
}

void exec_box_over(const struct exec_ctx *ctx, struct exec_box *box)
{
	/* Prepared on the spot (no source, or struct exec_later): its init's
	 * death overlaps the booking's fdatasync instead of following the
	 * result. A pool's sandboxes are torn down off the caller's path
	 * already. */
	if (box->sb && (!ctx->sandboxes || ctx->sandboxes->stop_after_run))
		sandbox_stop(box->sb);
}

/* A run failed in a sandbox where a warm interpreter ran: the tenant's
 * preloaded code, in a parent that forks the call. Whatever such a run
 * reports (no READY, no EXEC, no DONE, a call's directory taken, a hang
 * before the call starts) that code could have produced, so none of it is
 * evidence of the platform's fault (issue 31): it would make any call it
 * chose a platform_error, retried and never blamed. Its interpreter could
 * not start, or failed it: nothing of that run is booked, and it uses no
 * retry. The tenant's calls of that script run cold for a while, and this
 * one runs again, cold, in another sandbox, as the call's own run: its
 * verdict is the call's, and a platform error there is the platform's,
 * retried as any other (docs/sandbox.md, "Warm interpreters"). */
static int run_cold(const struct exec_ctx *ctx, struct exec_box *box,
		    const struct sandbox_spec *spec, struct sandbox_result *r)
{
	struct sandbox_spec cold = *spec;
	char why[sizeof(r->warm_fallback)];
	int err;

	if (!interp_start_refused(box->sb))
		interp_refuse(box->sb, r->detail);
	snprintf(why, sizeof(why), "%s", r->detail);
	sg_debug("exec: sandbox %s: its warm run failed, the call runs cold: %s",
		 sandbox_id(box->sb), r->detail);
	exec_box_done(ctx, box);
	/* Its outputs are gone already (sandbox_exec()); a record of its own
	 * owes nothing: the run is not booked, the cold one is. */
	sandbox_result_free(r);
	/* Cold whatever the refusal says: it may be forgotten already (a
	 * bounded table), and a warm parent again would be that code again. */
	cold.cold = true;
	err = take(ctx, &cold, &box->sb, r->detail, sizeof(r->detail));
	if (!err)
		err = sandbox_exec(box->sb, &cold, r);
	if (!r->warm_fallback[0])
		snprintf(r->warm_fallback, sizeof(r->warm_fallback), "%s", why);
	return err;
}

int exec_box_run(const struct exec_ctx *ctx, struct exec_box *box, const struct sandbox_spec *spec,
		 struct sandbox_result *r)
{
	char why[256];
	int err;

	memset(r, 0, sizeof(*r));
	r->rule = -1;
	/* Past its start-by already (a long admission wait): no sandbox. */
	if (spec->start_by_ms && clock_ms(CLOCK_MONOTONIC) >= spec->start_by_ms) {
		snprintf(r->detail, sizeof(r->detail),
			 "no sandbox could be ready by the time its caller gave it");
		return -ETIME;
	}
	if (ctx->run)
		return ctx->run(spec, r);
	/* A confirmation run never reuses a sandbox: its CPU weight is its
	 * own, set below on a fresh one. */
	if (box->sb && spec->confirm)
		exec_box_done(ctx, box);
	/* The same request's next test: the sandbox put back as it was made,
	 * or, when that cannot be done, another one. */
	if (box->sb && (!sandbox_fits(box->sb, spec) || sandbox_reset(box->sb, why, sizeof(why)))) {
		if (sandbox_fits(box->sb, spec))
			sg_debug("exec: %s", why);
		exec_box_done(ctx, box);
	}
	if (!box->sb) {
		err = take(ctx, spec, &box->sb, r->detail, sizeof(r->detail));
		if (err)
			return err;
		/* Without the weight the guarantee rests on admission alone
		 * (every other sandbox held to its commitment by its quota):
		 * the run still confirms, and on-call is told. */
		if (spec->confirm && (err = sandbox_favour_cpu(box->sb, why, sizeof(why))))
			sg_warn("exec: confirmation run in %s without the highest CPU weight: %s",
				sandbox_id(box->sb), why);
	}
	err = sandbox_exec(box->sb, spec, r);
	if (err && interp_ran(box->sb))
		err = run_cold(ctx, box, spec, r);
	return err;
}

/* ---- destroyed after the result is out ---------------------------- */

static int later_take(void *self, const struct sandbox_spec *spec, struct sandbox **sb,
		      char *detail, size_t len)
{
	(void)self;
	return sandbox_prepare(spec, sb, detail, len);
}

static void later_retire(void *self, struct sandbox *sb)
{
	struct exec_later *l = self;
	struct sandbox **grown;

	pthread_mutex_lock(&l->lock);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;

		grown = realloc(l->list, cap * sizeof(*grown));
		if (grown) {
			l->list = grown;
			l->cap = cap;
		}
	}
	if (l->n < l->cap) {
		l->list[l->n++] = sb;
		sb = NULL;
	}
	pthread_mutex_unlock(&l->lock);
	sandbox_destroy(sb); /* out of memory: now */
}

void exec_later_init(struct exec_later *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	l->src = (struct exec_sandboxes){
		.take = later_take, .retire = later_retire, .self = l, .stop_after_run = true
	};
}

void exec_later_finish(struct exec_later *l)
{
	for (size_t i = 0; i < l->n; i++)
		sandbox_destroy(l->list[i]);
	free(l->list);
	pthread_mutex_destroy(&l->lock);
	memset(l, 0, sizeof(*l));
}

uint64_t exec_timeout_ms(const struct exec_ctx *ctx)
{
	uint64_t policy = ctx->policy->limits.timeout_ms;

	return ctx->timeout_ms && ctx->timeout_ms < policy ? ctx->timeout_ms : policy;
}

void exec_spec_init(const struct exec_ctx *ctx, const struct sg_policy *policy, const char *mode,
		    const char *batch_id, uint64_t timeout_ms, struct sandbox_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->policy = policy;
	spec->mode = mode;
	spec->attempt = 1;
	spec->tenant = ctx->tenant;
	spec->run_id = ctx->run_id;
	spec->batch_id = batch_id;
	spec->argv = ctx->argv;
	spec->timeout_ms = timeout_ms;
	spec->start_by_ms = ctx->start_by_ms;
	spec->enforcer = sg_kernel_enforcer(ctx->agent);
}
