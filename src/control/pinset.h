/* The agent's pinned maps as an executor keeps them: opened once, by
 * path, and kept while the pins it opened are the ones pinned.
 *
 * Opening a pin (BPF_OBJ_GET) walks its path and makes a descriptor; an
 * executor did it ~16 times for every test (enrol, release, the verdict's
 * reads). Kept, a test opens none (its check is a stat() of each pin);
 * but an agent started after `agent
 * --cleanup` (or after its pins were removed) pins new maps, and a sandbox
 * written into the old ones would be in maps nobody reads. So before each
 * enrollment the set is checked: each pin's inode (bpffs gives every pin
 * a new one) must be the one the descriptor was opened through; when one
 * differs, or a pin came or went, the set is opened again.
 *
 * Shared by the executor's threads: a set is counted, so that one thread
 * reopening it never closes a descriptor another one is using. */
#ifndef SG_CONTROL_PINSET_H
#define SG_CONTROL_PINSET_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "pinned.h"

enum sg_pin {
	SG_PIN_CONFIG,
	SG_PIN_SANDBOXES,
	SG_PIN_STATE,
	SG_PIN_POLICIES,
	SG_PIN_INDEX,
	SG_PIN_KILLED,
	SG_PIN_IDS, /* absent under an agent older than the map */
	SG_PIN__COUNT
};

#define SG_ONDEMAND_MAX 8 /* the fallback pins 5 */

/* What an enrollment needs to know of the active generation, read once
 * for each generation: an agent pins a generation's links before it
 * switches to it, and a generation's number is never reused within one
 * set of maps (a new set is a new check). */
struct sg_gen_facts {
	uint32_t gen;     /* the active generation, 0: none */
	int links;        /* its pinned links (> 0: programs attached) */
	int root_err;     /* 0 with root_id, or why its egress link says nothing */
	uint64_t root_id; /* the cgroup its cgroup programs are attached to */
	/* Its on-demand programs (ondemand.h), pinned before it was
	 * switched to and not changed since: their names, so that an
	 * enrollment does not read the directory each time. -1: not known
	 * (the directory is read as before). */
	int ondemand_n;
	char ondemand[SG_ONDEMAND_MAX][SG_ONDEMAND_NAME];
};

struct sg_pinset {
	int fd[SG_PIN__COUNT]; /* -1 where nothing is pinned */
	/* private */
	struct sg_gen_facts facts; /* of the last generation asked about */
	dev_t dev[SG_PIN__COUNT];
	ino_t ino[SG_PIN__COUNT]; /* 0: not pinned when opened */
	int err[SG_PIN__COUNT];   /* why fd is -1 */
	char root[PATH_MAX];
	int refs;
};

/* The current set, counted (sg_pinset_put() it). `check`: first make
 * sure it is still what is pinned (an enrollment); without it, the set
 * of the last check, by any thread (a release or a read of a sandbox's
 * record). A sandbox enrolled in maps an agent has since replaced (after
 * `agent --cleanup`) is then read and released in the new ones, as when
 * every operation opened the pins by path: keeping each sandbox's own set
 * is not done (docs/performance-executor-cost.md).
 * NULL only when out of memory. */
struct sg_pinset *sg_pinset_get(bool check);
void sg_pinset_put(struct sg_pinset *s);

/* The generation the agent switched to (sg_config), 0 if none. */
uint32_t sg_pinset_generation(const struct sg_pinset *s);

/* 0 when the maps an enrollment needs (sg_sandboxes, sg_state,
 * sg_policies, sg_tenant_index) are open; else the first missing one's
 * error: -ENOENT when it is not pinned (no agent ever ran here, or its
 * pins were removed). */
int sg_pinset_usable(const struct sg_pinset *s);

/* The facts of the active generation (read from the pins the first time
 * it is asked about). */
void sg_pinset_facts(struct sg_pinset *s, struct sg_gen_facts *f);

#endif
