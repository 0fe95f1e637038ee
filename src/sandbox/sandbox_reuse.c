/* A prepared sandbox's reuse (see src/sandbox/sandbox.h): whether it fits
 * the next run's spec, and the reset between two runs (a verifier's next
 * test, a warm interpreter's next call, a session's next step: see
 * sandbox_interp.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "lib/array_len.h"
#include "sandbox_internal.h"

/* What only the executor reads (admission, retries, health): a request
 * that tightens its own wait or retries (the HTTP /run_code does, from its
 * client's budget) still fits a sandbox made for its policy. */
#define SKIP(f)                                                                   \
	{                                                                         \
		offsetof(struct sg_policy, f), sizeof(((struct sg_policy *)0)->f) \
	}
static const struct skip {
	size_t off, len;
} executor_part[] = { SKIP(limits.on_excess), SKIP(limits.queue_timeout_ms),
		      SKIP(failure),          SKIP(max_retries),
		      SKIP(health),           SKIP(canary) };
#undef SKIP
_Static_assert(offsetof(struct sg_policy, limits.on_excess) <
			       offsetof(struct sg_policy, limits.queue_timeout_ms) &&
		       offsetof(struct sg_policy, limits.queue_timeout_ms) <
			       offsetof(struct sg_policy, failure) &&
		       offsetof(struct sg_policy, failure) <
			       offsetof(struct sg_policy, max_retries) &&
		       offsetof(struct sg_policy, max_retries) <
			       offsetof(struct sg_policy, health) &&
		       offsetof(struct sg_policy, health) < offsetof(struct sg_policy, canary),
	       "executor_part[] is in the order of the fields");

/* The policies byte for byte (padding included, as a copy with those
 * fields cleared would compare) around the executor's part. In place:
 * two 35 KiB copies on the stack were ~17 fresh pages, each a page
 * fault of tens of microseconds, on every run's path. */
bool sandbox_policy_same(const struct sg_policy *a, const struct sg_policy *b)
{
	const char *pa = (const char *)a, *pb = (const char *)b;
	size_t at = 0;

	for (size_t i = 0; i <= ARRAY_LEN(executor_part); i++) {
		size_t next = i < ARRAY_LEN(executor_part) ? executor_part[i].off : sizeof(*a);

		if (next > at && memcmp(pa + at, pb + at, next - at))
			return false;
		if (i < ARRAY_LEN(executor_part) &&
		    executor_part[i].off + executor_part[i].len > at)
			at = executor_part[i].off + executor_part[i].len;
	}
	return true;
}

bool sandbox_fits(const struct sandbox *sb, const struct sandbox_spec *spec)
{
	return spec->policy && spec->tenant && !strcmp(sb->tenant, spec->tenant) &&
	       sb->exec_in_scratch == spec->allow_exec_in_scratch &&
	       !(spec->cold && sb_interp_channel(sb) >= 0) &&
	       sandbox_policy_same(&sb->policy, spec->policy);
}

static int not_reused(struct sandbox *sb, int err, char *detail, size_t dlen, const char *why)
{
	sb->broken = true;
	if (why)
		snprintf(detail, dlen, "sandbox %s is not reused: %s", sb->id, why);
	return err;
}

int sandbox_reset(struct sandbox *sb, char *detail, size_t dlen)
{
	pid_t pid = 0;
	int n, err;

	if (!sb->used)
		return 0;
	if (sb->broken)
		return not_reused(sb, -EBUSY, detail, dlen,
				  "its last run failed or its init ended");
	if (sb->done_owed) {
		struct sb_child_report done;

		if (sb_await_done(sb, SB_KILL_WAIT_MS, &done) != 1)
			return not_reused(sb, -EBUSY, detail, dlen,
					  "its init did not report the end of its last run");
		sb->done_owed = false;
	}
	/* The relay's listeners outlive a run: a connection the last run
	 * left queued must not reach the next one. */
	if (sb->relay && !sb->keep_scratch)
		return not_reused(sb, -EBUSY, detail, dlen, "it relays egress");
	if (!sb->marked && !sb->keep_scratch)
		return not_reused(sb, -EBUSY, detail, dlen,
				  "its root build's entries in the scratch could not be noted");
	err = sb_cgroup_leaf_remove(&sb->leaf, SB_KILL_WAIT_MS);
	if (err)
		return not_reused(sb, err, detail, dlen, "its last run's cgroup would not empty");
	n = sb_cgroup_own_procs(&sb->cg, &pid);
	if (n != 1 || pid != sb->init)
		return not_reused(sb, -EBUSY, detail, dlen,
				  "something besides its init survived the last run");
	if (sb_interp_channel(sb) >= 0) {
		char why[200];

		err = sb->interp_ops->check(sb, why, sizeof(why));
		if (err)
			return not_reused(sb, err, detail, dlen, why);
	}
	err = sb->keep_scratch ? 0 : sb_scratch_reset(sb->scratch, &sb->marks, detail, dlen);
	if (err)
		return not_reused(sb, err, detail, dlen, NULL);
	/* The agent's counters (forks over the sandbox's life, trips) start
	 * over, as for a fresh sandbox. */
	if (sb->enrolled) {
		sb_enroll_release(sb);
		err = sb_enroll(sb, false, detail, dlen);
		if (err || !sb->enrolled)
			return not_reused(sb, err ? err : -ENOLINK, detail, dlen,
					  err ? NULL : "the agent's maps went away");
	}
	err = sb_cgroup_leaf_make(&sb->cg, sb->runs + 1, &sb->leaf, detail, dlen);
	/* A warm interpreter forks the next call's child now, into that
	 * call's cgroup, rather than on the call's path. */
	if (!err && sb_interp_channel(sb) >= 0)
		err = sb->interp_ops->prefork(sb, detail, dlen);
	if (err)
		return not_reused(sb, err, detail, dlen, NULL);
	sb->oom_base = sb_cgroup_oom_kills(&sb->cg);
	sb->limit_base = sb_cgroup_mem_limit_mark(&sb->cg);
	sb->pids_base = sb_cgroup_pids_max_hits(&sb->cg);
	sb->used = false;
	return 0;
}

void sandbox_keep_scratch(struct sandbox *sb)
{
	sb->keep_scratch = true;
}
