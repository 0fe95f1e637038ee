/* What the interpreter forkserver (src/interp/) reads of a sandbox and
 * does in it (sandbox_interp.h): a few accessors and the handover of the
 * next run's cgroup, so that it needs none of the sandbox's internals. */
#include <pthread.h>
#include "sandbox_internal.h"

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
	sb->leaf = (struct sb_leaf){ .dir_fd = -1, .procs_fd = -1 };
}

int sandbox_leaf_next(struct sandbox *sb, char *detail, size_t dlen)
{
	return sb_cgroup_leaf_make(&sb->cg, sb->runs + 1, &sb->leaf, detail, dlen);
}

bool sandbox_exec_refused(const struct sandbox *sb)
{
	return sb_exec_refusal_recorded(sb);
}
