/* The node agent: BPF programs loaded and pinned, a loop over the ring
 * buffer, inotify, signals, the control socket and a 1 s tick. */
#ifndef SG_AGENT_H
#define SG_AGENT_H
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "bpf_loader.h"
#include "probe.h"
#include "agent_outcomes.h"
#include "registry.h"
#include "control/control_server.h"

struct ledger;
struct health_state;
struct agent_health;
struct metrics_registry;
struct metrics_http;
struct event_log;
struct control_server;
struct ring_buffer;

struct agent_opts {
	char policy_dir[PATH_MAX];
	enum sg_mode_request mode;
	char events_path[PATH_MAX]; /* "-" = stdout */
	uint64_t events_max_bytes;
	unsigned events_keep;
	unsigned events_tenant_share; /* % of a file per tenant (event_log.h); 0, 100: none */
	char metrics_addr[128];       /* "" = no metrics server */
	char socket_path[PATH_MAX];
	char state_dir[PATH_MAX]; /* ledger.json (the checkpoint) and journal/ */
	char node[64];
	char ready_file[PATH_MAX]; /* touched once enforcing ("" = none) */
	char host_root[PATH_MAX];  /* the node's / (a containerized agent) */
};

struct agent {
	struct agent_opts opts;
	const struct sg_features *features;
	struct sg_modes modes;
	struct sg_bpf bpf;
	struct registry reg;
	struct ring_buffer *rb;
	struct event_log *events;
	int64_t boot_to_real_ns;

	/* The ledger and health state are shared with the metrics thread. */
	pthread_mutex_t lock;
	struct ledger *ledger;
	struct health_state *health[SG_MAX_TENANTS]; /* per tenant index, lazily */
	struct agent_health *run_health;             /* per run (agent_health.c), lazily */
	struct metrics_registry *metrics;
	struct metrics_http *http;
	uint64_t kills;
	uint64_t kill_latency_count;
	double kill_latency_sum_s;
	uint64_t events_seen;
	uint64_t events_lost; /* encode/write failures */
	uint64_t drops_reported;
	uint64_t started_realtime_s;

	struct agent_outcomes outcomes; /* the journal fold and its checkpoint */

	struct control_server *control;
	int epoll_fd, signal_fd, timer_fd;
	int drain_fd;                  /* SG_DRAIN_MS timer while sandboxes exist */
	bool draining;                 /* drain_fd armed */
	uint64_t idle_since_ns;        /* CLOCK_BOOTTIME: no sandbox since (0: some) */
	uint64_t detach_after_idle_ns; /* the on-demand programs go after that long */
	bool stop;
	bool ledger_dirty; /* events or kills booked since the last checkpoint */
};

int agent_run(struct agent_opts *opts);

/* Empty a sandbox for `rule`, event it as sandbox_killed and book it. */
int agent_kill_sandbox(struct agent *a, struct sg_sandbox_entry *s, int rule, uint32_t trigger_type,
		       uint32_t trigger_pid, uint64_t violation_ns);

uint64_t agent_events_lost(struct agent *a);

/* Write a userspace-made event line (already JSON) of `tenant` (NULL:
 * none) to the event stream, within the tenant's budget. */
void agent_emit_line(struct agent *a, const char *tenant, const char *line);

/* What the agent answers on the control socket (agent_control.c). */
extern const struct control_op agent_control_ops[];
extern const size_t agent_control_n_ops;

#endif
