/* What the components above read of a prepared sandbox and the little
 * they do in it, so that none needs its internals: its id, scratch and
 * uid (sandbox.h: the executor, sessions), a confirmation run's CPU
 * weight, and the interpreter forkserver's (src/interp/) accessors and the
 * handover of the next run's cgroup (sandbox_interp.h). */
#include <pthread.h>
#include "sandbox_internal.h"

const char *sandbox_id(const struct sandbox *sb)
{
	return sb->id;
}

const char *sandbox_scratch_path(const struct sandbox *sb)
{
	return sb->scratch;
}

uid_t sandbox_uid(const struct sandbox *sb)
{
	return sb->slot.uid;
}

int sandbox_favour_cpu(struct sandbox *sb, char *detail, size_t len)
{
	return sb_cgroup_cpu_favour(&sb->cg, detail, len);
}

struct sb_interp *sandbox_interp(const struct sandbox *sb)
{
	return sb->interp;
}

void sandbox_interp_set(struct sandbox *sb, struct sb_interp *in)
{
	sb->interp = in;
}

const struct sg_policy *sandbox_policy(const struct sandbox *sb)
{
	return &sb->policy;
}

const char *sandbox_tenant(const struct sandbox *sb)
{
	return sb->tenant;
}

unsigned sandbox_runs(const struct sandbox *sb)
{
	return sb->runs;
}

gid_t sandbox_gid(const struct sandbox *sb)
{
	return sb->slot.gid;
}

bool sandbox_broken(const struct sandbox *sb)
{
	return sb->broken;
}

bool sandbox_relays(const struct sandbox *sb)
{
	return sb->relay;
}

void sandbox_may_keep(struct sandbox *sb)
{
	sb->may_keep = true;
}

bool sandbox_kept(const struct sandbox *sb)
{
	return sb->may_keep;
}

bool sandbox_prepared_here(const struct sandbox *sb)
{
	return pthread_equal(sb->owner, pthread_self());
}

const char *sandbox_leaf_path(const struct sandbox *sb)
{
	return sb->leaf.path;
}

void sandbox_leaf_take(struct sandbox *sb, struct sb_leaf *to)
{
	*to = sb->leaf;
	sb->leaf.path[0] = '\0';
	sb_cgroup_leaf_init(&sb->leaf);
}

int sandbox_leaf_next(struct sandbox *sb, char *detail, size_t dlen)
{
	return sb_cgroup_leaf_make(&sb->cg, sb->runs + 1, &sb->leaf, detail, dlen);
}

bool sandbox_exec_refused(const struct sandbox *sb)
{
	return sb_exec_refusal_recorded(sb);
}
