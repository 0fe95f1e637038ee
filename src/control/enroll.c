/* Enrolling a sandbox with the kernel (see enroll.h).
 *
 * The tenant's policy slot comes from the agent's pinned name index: a
 * tenant with a policy file of its own has a slot once the agent compiled
 * it; every other tenant uses SG_TENANT_DEFAULT. The agent may give an
 * idle tenant's slot to another one when all are taken; it takes the name
 * out of the index first and then looks for entries that use the slot.
 * So after writing, the slot is read again: if it changed, the entries are
 * taken back and the enrollment starts over. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "agent_client.h"
#include "enroll.h"
#include "lib/cgroup.h"
#include "lib/host_path.h"
#include "lib/log.h"
#include "ondemand.h"
#include "pinned.h"
#include "pinset.h"
#include "lib/ids.h"
#include "policy/policy.h"

#define ENROLL_TRIES 3

int sg_scratch_identity(int root_fd, const char *path, struct sg_sandbox *sb)
{
	char parent[PATH_MAX];
	struct stat st, up;
	int err;

	err = host_stat(root_fd, path, 1, &st);
	if (err)
		return err;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	snprintf(parent, sizeof(parent), "%s", path);
	sb->scratch_dev = (major(st.st_dev) << 20) | minor(st.st_dev);
	sb->scratch_ino = st.st_ino;
	sb->flags &= ~SG_SB_SCRATCH_FS;
	/* A mount point: the executor mounted a filesystem for this sandbox
	 * alone, so every file on it is the sandbox's. */
	if (host_stat(root_fd, dirname(parent), 1, &up) == 0 && up.st_dev != st.st_dev)
		sb->flags |= SG_SB_SCRATCH_FS;
	return 0;
}

/* Whether the executor runs the tenant under a policy file of its own
 * (<dir>/<tenant>.json), not default.json or the embedded default. */
static bool own_policy(const struct sg_policy *p, const char *tenant)
{
	const char *base = strrchr(p->source, '/');
	size_t n = strlen(tenant);

	base = base ? base + 1 : p->source;
	return strcmp(tenant, "default") && !strncmp(base, tenant, n) && !strcmp(base + n, ".json");
}

/* The maps an enrollment writes and reads, from the kept set (pinset.h). */
struct pins {
	int sandboxes, state, policies, index, killed;
	int ids; /* -1 under an agent older than the map: the notification alone */
};

static struct pins pins_of(const struct sg_pinset *s)
{
	return (struct pins){ .sandboxes = s->fd[SG_PIN_SANDBOXES],
			      .state = s->fd[SG_PIN_STATE],
			      .policies = s->fd[SG_PIN_POLICIES],
			      .index = s->fd[SG_PIN_INDEX],
			      .killed = s->fd[SG_PIN_KILLED],
			      .ids = s->fd[SG_PIN_IDS] };
}

/* The slot the tenant's sandboxes use now, or -ENOENT when the tenant's
 * own policy is not compiled (or the default's, for `own` false). */
static int current_slot(const struct pins *p, const char *tenant, bool own, uint32_t *slot)
{
	struct sg_policy_k pol;
	char key[SG_TENANT_MAX] = { 0 };

	*slot = SG_TENANT_DEFAULT;
	if (own) {
		snprintf(key, sizeof(key), "%s", tenant);
		if (bpf_map_lookup_elem(p->index, key, slot))
			return -ENOENT;
	}
	return bpf_map_lookup_elem(p->policies, slot, &pol) ? -ENOENT : 0;
}

static void take_back(const struct pins *p, uint64_t cgid)
{
	bpf_map_delete_elem(p->sandboxes, &cgid);
	bpf_map_delete_elem(p->state, &cgid);
	if (p->ids >= 0)
		bpf_map_delete_elem(p->ids, &cgid);
}

_Static_assert(sizeof(((struct sg_sandbox_ids *)0)->tenant) == SG_TENANT_MAX, "tenant names");
_Static_assert(sizeof(((struct sg_sandbox_ids *)0)->run_id) == SG_ID_BUF, "ids");

/* Who the sandbox runs for, for the agent's event lines: written before
 * the sandbox's other entries, so that its first event finds them. */
static int write_ids(const struct pins *p, const struct sg_enroll_request *req,
		     struct sg_enroll_result *res)
{
	struct sg_sandbox_ids ids;

	if (p->ids < 0)
		return 0;
	memset(&ids, 0, sizeof(ids));
	snprintf(ids.tenant, sizeof(ids.tenant), "%s", req->who.tenant);
	snprintf(ids.sandbox, sizeof(ids.sandbox), "%s", req->who.sandbox);
	snprintf(ids.run_id, sizeof(ids.run_id), "%s", req->who.run_id ? req->who.run_id : "");
	snprintf(ids.batch_id, sizeof(ids.batch_id), "%s",
		 req->who.batch_id ? req->who.batch_id : "");
	if (bpf_map_update_elem(p->ids, &req->who.cgroup_id, &ids, BPF_ANY) == 0)
		return 0;
	snprintf(res->detail, sizeof(res->detail),
		 "cannot write sandbox %s's ids into the agent's pinned maps: %s%s",
		 req->who.sandbox, strerror(errno),
		 errno == E2BIG || errno == ENOSPC ? " (the map is full)" : "");
	return -errno;
}

/* The last sandbox this thread enrolled: a sandbox put back between tests
 * is enrolled again with the same scratch, whose identity cannot have
 * changed (its reset refuses a scratch root that is not the inode it
 * made), so it is resolved once per sandbox, not per test. A cgroup id is
 * never reused for another cgroup. */
static __thread struct {
	uint64_t cgroup_id;
	char scratch[PATH_MAX];
	struct sg_sandbox sb;
} last_scratch;

static int scratch_identity(const struct sg_enroll_request *req, struct sg_sandbox *sb)
{
	uint32_t slot = sb->tenant;
	int root_fd, err;

	if (last_scratch.cgroup_id && last_scratch.cgroup_id == req->who.cgroup_id &&
	    !strcmp(last_scratch.scratch, req->who.scratch)) {
		*sb = last_scratch.sb;
		sb->tenant = slot;
		return 0;
	}
	root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	err = root_fd < 0 ? -errno : sg_scratch_identity(root_fd, req->who.scratch, sb);
	if (root_fd >= 0)
		close(root_fd);
	if (!err && strlen(req->who.scratch) < sizeof(last_scratch.scratch)) {
		last_scratch.cgroup_id = req->who.cgroup_id;
		snprintf(last_scratch.scratch, sizeof(last_scratch.scratch), "%s",
			 req->who.scratch);
		last_scratch.sb = *sb;
	}
	return err;
}

/* Write the entries for `slot`: the ids, then state, so that a program
 * that finds the sandbox finds its counters, and the agent its ids. */
static int write_entries(const struct pins *p, const struct sg_enroll_request *req, uint32_t slot,
			 struct sg_enroll_result *res)
{
	struct sg_sandbox_state st = { 0 };
	struct sg_sandbox sb = { .tenant = slot };
	int err = scratch_identity(req, &sb);

	if (err) {
		snprintf(res->detail, sizeof(res->detail), "scratch %s: %s", req->who.scratch,
			 strerror(-err));
		return err;
	}
	err = write_ids(p, req, res);
	if (err)
		return err;
	if (bpf_map_update_elem(p->state, &req->who.cgroup_id, &st, BPF_NOEXIST) && errno != EEXIST)
		goto fail;
	if (bpf_map_update_elem(p->sandboxes, &req->who.cgroup_id, &sb, BPF_ANY))
		goto fail;
	return 0;
fail:
	err = -errno;
	take_back(p, req->who.cgroup_id);
	snprintf(res->detail, sizeof(res->detail),
		 "cannot write sandbox %s into the agent's pinned maps: %s%s", req->who.sandbox,
		 strerror(errno), errno == E2BIG || errno == ENOSPC ? " (the maps are full)" : "");
	return err;
}

/* The entries are written: attach the programs that judge opens, where
 * they are attached on demand (the fallback's), before any of the
 * sandbox's code runs (src/control/ondemand.h). */
static int watch_opens(const struct sg_pinset *set, const struct sg_gen_facts *gen,
		       const struct pins *p, const struct sg_enroll_request *req, uint32_t slot,
		       struct sg_enroll_result *res)
{
	char why[200];
	int err = sg_ondemand_attach_set(set, gen, why, sizeof(why));

	if (err) {
		take_back(p, req->who.cgroup_id);
		snprintf(res->detail, sizeof(res->detail),
			 "the agent's file programs could not be attached for sandbox %s: %s",
			 req->who.sandbox, why);
		return err;
	}
	res->enforced = true;
	res->slot = slot;
	return 0;
}

/* No pins: no agent ever ran here (or its pins were removed). */
static int no_agent(const struct sg_enroll_request *req, struct sg_enroll_result *res)
{
	if (req->who.policy->require_agent) {
		snprintf(res->detail, sizeof(res->detail),
			 "policy requires the sandguard agent, and none has run on this node "
			 "(no pins under %s)",
			 sg_pin_root());
		return -ENOTCONN;
	}
	snprintf(res->detail, sizeof(res->detail),
		 "no sandguard agent on this node (no pins under %s): the executor's own "
		 "layers only",
		 sg_pin_root());
	return 0;
}

static int enroll(const struct sg_pinset *set, const struct sg_gen_facts *gen, const struct pins *p,
		  const struct sg_enroll_request *req, struct sg_enroll_result *res)
{
	bool own = own_policy(req->who.policy, req->who.tenant);
	char why[200];
	uint32_t slot, again;
	int err;

	for (int attempt = 0; attempt < ENROLL_TRIES; attempt++) {
		if (current_slot(p, req->who.tenant, own, &slot)) {
			if (!own) {
				snprintf(res->detail, sizeof(res->detail),
					 "the default policy is not compiled into the kernel yet "
					 "(is the agent starting?)");
				return -EAGAIN;
			}
			err = agent_compile(req->agent, req->who.tenant, req->compile_timeout_ms,
					    why, sizeof(why));
			if (err == -ENOTCONN) {
				snprintf(
					res->detail, sizeof(res->detail),
					"tenant %s's policy is not compiled into the kernel, and no "
					"agent is connected to compile it",
					req->who.tenant);
				return err;
			}
			if (err) {
				snprintf(res->detail, sizeof(res->detail),
					 "tenant %s's policy is not compiled into the kernel, and "
					 "the agent did not compile it within %d ms: %s",
					 req->who.tenant, req->compile_timeout_ms, why);
				return err;
			}
			continue;
		}
		err = write_entries(p, req, slot, res);
		if (err)
			return err;
		/* The slot may have been given up since it was read. */
		if (current_slot(p, req->who.tenant, own, &again) == 0 && again == slot)
			return watch_opens(set, gen, p, req, slot, res);
		take_back(p, req->who.cgroup_id);
	}
	snprintf(res->detail, sizeof(res->detail),
		 "tenant %s's policy slot kept changing while sandbox %s was enrolled",
		 req->who.tenant, req->who.sandbox);
	return -EAGAIN;
}

/* The agent's cgroup programs (egress; LSM mode's file and exec ones from
 * 6.0) sit on its cgroup root and judge only what is below it. An
 * executor configured with another root would have its sandboxes in the
 * maps and believe them enforced, with those programs never running for
 * them: refused as the deployment's fault. Compared by cgroup id, which
 * no cgroup namespace changes. Pins that say nothing of the root (no such
 * link) are not refused for it. */
static int same_cgroup_root(const struct sg_enroll_request *req, const struct sg_gen_facts *gen,
			    struct sg_enroll_result *res)
{
	uint64_t ours = 0;

	if (!req->who.cgroup_root || gen->root_err || cgroup_id_of(req->who.cgroup_root, &ours) ||
	    gen->root_id == ours)
		return 0;
	snprintf(res->detail, sizeof(res->detail),
		 "the agent enforces below another cgroup root (id %llu) than this executor's "
		 "%.120s (id %llu): fix the deployment (SANDGUARD_CGROUP_ROOT)",
		 (unsigned long long)gen->root_id, req->who.cgroup_root, (unsigned long long)ours);
	return -EXDEV;
}

/* The kept set checked against the pins (an agent started after a
 * cleanup pinned new maps): 0 with the generation's facts, or -errno
 * with res filled (no_agent()'s 0 is returned as 1). */
static int usable(struct sg_pinset *set, const struct sg_enroll_request *req,
		  struct sg_gen_facts *gen, struct sg_enroll_result *res)
{
	int err = set ? sg_pinset_usable(set) : -ENOMEM;

	if (err == -ENOENT) {
		err = no_agent(req, res);
		return err ? err : 1;
	}
	if (!err) {
		sg_pinset_facts(set, gen);
		if (gen->links <= 0)
			err = -ENOLINK;
	}
	if (err) {
		snprintf(res->detail, sizeof(res->detail),
			 "the agent's pins under %s are unusable: %s", sg_pin_root(),
			 err == -ENOLINK ? "no programs attached" : strerror(-err));
		return err;
	}
	return same_cgroup_root(req, gen, res);
}

int sg_enroll_sandbox(const struct sg_enroll_request *req, struct sg_enroll_result *res)
{
	struct sg_pinset *set = sg_pinset_get(true);
	struct sg_gen_facts gen;
	struct pins p;
	int err;

	memset(res, 0, sizeof(*res));
	err = usable(set, req, &gen, res);
	if (err) {
		sg_pinset_put(set);
		return err > 0 ? 0 : err;
	}
	p = pins_of(set);
	err = enroll(set, &gen, &p, req, res);
	if (!err && req->agent) {
		/* For attribution only (run and batch ids): the kernel already
		 * enforces, whatever the agent answers or fails to. */
		int n = agent_register(req->agent, req->who.tenant, req->who.sandbox,
				       req->who.run_id, req->who.batch_id, req->who.cgroup_id,
				       req->who.scratch, req->notify_timeout_ms);
		res->notified = n == 0;
		if (n == -EXDEV) {
			snprintf(res->detail, sizeof(res->detail),
				 "the agent resolves policy paths in another root filesystem than "
				 "this executor's: fix the deployment (agent --host-root)");
			take_back(&p, req->who.cgroup_id);
			res->enforced = false;
			err = n;
		} else if (n) {
			sg_debug("sandbox %s: enforced; the agent was not told (%s)",
				 req->who.sandbox, strerror(-n));
		}
	}
	sg_pinset_put(set);
	return err;
}

int sg_enroll_ids(const struct sg_enroll_request *req, char *detail, size_t len)
{
	struct sg_pinset *set = sg_pinset_get(false);
	struct sg_enroll_result res = { 0 };
	struct pins p = { -1, -1, -1, -1, -1, -1 };
	int err;

	if (set)
		p = pins_of(set);
	err = write_ids(&p, req, &res);
	sg_pinset_put(set);
	if (err)
		snprintf(detail, len, "%s", res.detail);
	return err;
}

void sg_enroll_release(uint64_t cgroup_id)
{
	struct sg_pinset *set = sg_pinset_get(false);
	struct pins p;

	if (!set)
		return;
	p = pins_of(set);
	if (p.sandboxes >= 0 && p.state >= 0)
		take_back(&p, cgroup_id);
	if (p.killed >= 0)
		bpf_map_delete_elem(p.killed, &cgroup_id);
	sg_pinset_put(set);
}
