/* The agent's pinned BPF maps as its peers read them: where the pins live,
 * whether programs are attached, and the kernel's own record of a sandbox.
 * The executor and the CLI read these without the agent's help, so they
 * still learn the truth while the agent is busy, restarting or absent. */
#ifndef SG_CONTROL_PINNED_H
#define SG_CONTROL_PINNED_H
#include <stdint.h>

/* Where pins live: $SANDGUARD_PIN_ROOT (tests) or SG_PIN_ROOT. */
const char *sg_pin_root(void);

struct sg_config;

/* The agent's switches (sg_config[0]): 0, or -errno. */
int sg_pinned_config(struct sg_config *cfg);

/* The generation the active agent switched to (sg_config), 0 if none. */
uint32_t sg_pinned_generation(void);

/* Pinned links of the active generation (readiness: > 0); _of: of
 * generation `gen` (0: none). */
int sg_pinned_links(void);
int sg_pinned_links_of(uint32_t gen);
#define SG_ONDEMAND_NAME 64 /* "<category>:<tracepoint>" */

/* The names of generation `gen`'s on-demand programs (ondemand.h) into
 * names[max] (each shorter than SG_ONDEMAND_NAME): how many
 * (0: none pinned, as in LSM mode), or -errno (-E2BIG: more than max, or
 * a longer name). */
int sg_pinned_ondemand_of(uint32_t gen, char (*names)[SG_ONDEMAND_NAME], int max);
/* Pinned cgroup links of the active generation that are attached to no
 * cgroup any more (detached from outside): each is a hook that enforces
 * nothing. >= 0, or -errno. */
int sg_pinned_links_detached(void);

/* The cgroup the active generation's cgroup programs are attached to (the
 * agent's sandguard root), from its egress catch-all's pinned link: 0 with
 * *id, or -errno. */
int sg_pinned_root_cgroup_id(uint64_t *id);
int sg_pinned_root_cgroup_id_of(uint32_t gen, uint64_t *id);

/* Whether the agent killed a sandbox, from its pinned record (sg_killed):
 * 1 with *rule (enum sg_rule) when it did, 0 when not (a kill-class
 * violation the kernel recorded is not a kill until the agent carries it
 * out), -errno when the pins cannot be read. */
int sg_pinned_kill_rule(uint64_t cgroup_id, int *rule);

/* The kernel's record of a sandbox (sg_state): 1 with *rule when a
 * kill-class violation tripped it, whether or not anyone carried out the
 * kill (with no agent, nobody does), 0 when none did, -errno. */
int sg_pinned_trip_rule(uint64_t cgroup_id, int *rule);

/* The kernel's record of a sandbox (sg_state): 1 with *rule (enum sg_rule)
 * of its first violation of any class, 0 when it has none (or no entry),
 * -errno when the pins cannot be read. */
int sg_pinned_first_rule(uint64_t cgroup_id, int *rule);

/* Whether the kernel's record of a sandbox (sg_state) holds no violation
 * of any rule: 1 when it has an entry, with none; 0 when it has a
 * violation, or no entry (not enrolled, or already released); -errno when
 * the pins cannot be read. Every program that judges a sandbox's task
 * books the violation there first (sg_violation() in common.bpf.h), in
 * the task's own system call, and every agent kill follows one: a
 * sandbox with none has nothing for the agent to kill it for. */
int sg_pinned_quiet(uint64_t cgroup_id);

/* The three reads above on an open sg_state (an executor's kept one,
 * pinset.h). */
int sg_pinned_quiet_in(int state_fd, uint64_t cgroup_id);
int sg_pinned_trip_rule_in(int state_fd, uint64_t cgroup_id, int *rule);
int sg_pinned_first_rule_in(int state_fd, uint64_t cgroup_id, int *rule);

struct sg_sandbox_ids;

/* Who a sandbox runs for, as its executor enrolled it (sg_sandbox_ids):
 * 1 with *ids filled, 0 when the map has no entry for it (not enrolled
 * with ids, or already released), -errno when the pins cannot be read. */
int sg_pinned_sandbox_ids(uint64_t cgroup_id, struct sg_sandbox_ids *ids);

/* An fd of the pinned map `name` (close it), or -errno (-ENOENT: no agent
 * ever ran on this node, or its pins were removed). */
int sg_pinned_map(const char *name);

#endif
