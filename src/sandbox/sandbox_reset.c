/* The reset between two runs of a prepared sandbox: a verifier's next
 * test, or a warm interpreter's next call (see src/sandbox/sandbox.h and
 * sandbox_interp.h). */
#include <errno.h>
#include <stdio.h>
#include "sandbox_internal.h"

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

const char *sandbox_scratch_path(const struct sandbox *sb)
{
	return sb->scratch;
}

uid_t sandbox_uid(const struct sandbox *sb)
{
	return sb->slot.uid;
}
