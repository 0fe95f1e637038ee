/* Loading, attaching and pinning the agent's BPF objects, and adopting the
 * ones a previous agent left pinned under SG_PIN_ROOT. */
#ifndef SG_BPF_LOADER_H
#define SG_BPF_LOADER_H
#include <stdbool.h>
#include <stdint.h>
#include "probe.h"

struct egress_bpf;
struct tasks_bpf;
struct files_bpf;

struct sg_bpf {
	struct egress_bpf *egress;
	struct tasks_bpf *tasks;
	struct files_bpf *files;
	uint32_t gen;      /* this agent's generation */
	uint32_t prev_gen; /* the adopted one, 0 if none */
	bool compat;       /* the objects built without fetching atomics */
	int n_links;       /* attached and pinned */
	/* map fds, shared by all objects */
	int sandboxes_fd, state_fd, policies_fd, paths_fd, exec_files_fd;
	int config_fd, events_fd, drops_fd;
	/* pinned maps no program reads (include/abi/maps.h) */
	int tenant_names_fd, tenant_index_fd, killed_fd, ids_fd;
};

/* Load every object for the chosen modes, attach to cgroup_root and the
 * tracepoints, pin the links under SG_PIN_ROOT/gen-<N>, then make this
 * generation the active one and retire the previous one. Programs are
 * attached before the switch, so enforcement never has a gap. */
int sg_bpf_load(struct sg_bpf *b, const struct sg_features *f, const struct sg_modes *m,
		const char *cgroup_root);

/* Close this process's handles; the pins (and enforcement) stay. */
void sg_bpf_close(struct sg_bpf *b);

/* Remove every pin (`sandguard agent --cleanup`): detaches everything. */
int sg_bpf_cleanup(void);

/* 0 when the maps pinned under the pin root (if any) have the shape this
 * agent was built with (SG_MAX_TENANTS and the sizes of the policy maps);
 * -EINVAL, logged with what to do, when an agent built with other sizes
 * left them. */
int sg_bpf_check_pins(void);

/* Forget every file verdict the programs remember (struct
 * sg_verdict_key): after a policy is swapped in or removed. 0 or -errno. */
int sg_bpf_new_verdict_epoch(const struct sg_bpf *b);

/* Events the ring buffer had no room for, summed over CPUs. */
uint64_t sg_bpf_drops(const struct sg_bpf *b);

#endif
