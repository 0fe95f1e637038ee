/* The ring-buffer event: written by the BPF programs, read by the agent.
 * Both sides include this header, so its layout is the wire format. */
#ifndef SG_EVENTS_H
#define SG_EVENTS_H
#include "bpf_types.h"

#define SG_COMM_LEN      16
#define SG_FILENAME_LEN  256
#define SG_ARGS_LEN      128
#define SG_PATH_COMPS    8 /* innermost path components kept for a file event */
#define SG_COMP_LEN      32
#define SG_UNIX_PATH_LEN 108

enum sg_event_type {
	SG_EV_EGRESS_DENIED = 1,
	SG_EV_FORK_LIMIT,
	SG_EV_EXEC,
	SG_EV_EXEC_DENIED,
	SG_EV_FILE_DENIED,  /* refused by lsm/file_open */
	SG_EV_FILE_TRIPPED, /* detected after the fact by the fallback */
	SG_EV_EXIT,
	SG_EV_SANDBOX_KILLED, /* userspace: the agent emptied the cgroup */
	SG_EV_HEALTH,         /* userspace: a score-stream detector fired */
	SG_EV_EVENTS_DROPPED, /* userspace: a tenant's lines past its share of the event file */
	/* userspace: the executor refused a pinned artifact (its journal record) */
	SG_EV_ARTIFACT_REFUSED,
	SG_EV__COUNT
};

enum sg_event_action {
	SG_ACTION_ALLOWED = 1,
	SG_ACTION_DENIED,
	SG_ACTION_KILLED,
	SG_ACTION_LOGGED,
};

/* Policy rules; also indexes the per-tenant action array. */
enum sg_rule {
	SG_RULE_EGRESS = 0,
	SG_RULE_FILE,
	SG_RULE_FORK,
	SG_RULE_EXEC,
	SG_RULE_MEMORY,
	SG_RULE__COUNT
};

/* What a policy says to do about a violation of a rule. */
enum sg_policy_action {
	SG_POLICY_DENY = 1, /* refuse the operation, keep the sandbox */
	SG_POLICY_KILL,     /* refuse it and empty the whole sandbox */
	SG_POLICY_LOG,      /* let it happen, event it */
};

/* How an event's verdict was reached (exec and file events). */
enum sg_enforce_mode {
	SG_MODE_NONE = 0,
	SG_MODE_LSM,      /* denied in an LSM hook before it happened */
	SG_MODE_FALLBACK, /* tracepoint: killed before user code ran / after open */
};

struct sg_net_detail {
	__u16 family; /* AF_INET, AF_INET6, AF_UNIX */
	__u16 port;   /* host byte order */
	__u8 proto;   /* IPPROTO_TCP / IPPROTO_UDP / 0 */
	__u8 hook;    /* enum sg_net_hook */
	__u8 pad[2];
	__u8 addr[16];                    /* IPv4 in the first four bytes */
	char unix_path[SG_UNIX_PATH_LEN]; /* '\0'-led for abstract sockets: '@' form */
};

enum sg_net_hook {
	SG_HOOK_CONNECT4 = 1,
	SG_HOOK_CONNECT6,
	SG_HOOK_SENDMSG4,
	SG_HOOK_SENDMSG6,
	SG_HOOK_CONNECT_UNIX,
	SG_HOOK_SENDMSG_UNIX,
	SG_HOOK_SKB_EGRESS,
	SG_HOOK_LSM_UNIX_CONNECT, /* lsm/unix_stream_connect (no cgroup unix hooks) */
	SG_HOOK_LSM_UNIX_SEND,    /* lsm/unix_may_send: datagram connect and send */
	SG_HOOK_LSM_UNIX_BIND,    /* lsm/socket_bind: a named unix socket */
};

struct sg_fork_detail {
	__u32 forks; /* forks seen in this sandbox so far */
	__u32 tasks; /* live tasks after this fork */
	__u32 limit; /* the limit that tripped */
	__u32 which; /* 1 = max_tasks, 2 = max_forks */
};

struct sg_exec_detail {
	char filename[SG_FILENAME_LEN];
	char args[SG_ARGS_LEN]; /* argv bytes, NULs between arguments */
	__u32 args_len;
	__u32 mode; /* enum sg_enforce_mode for exec_denied */
};

struct sg_file_detail {
	char comps[SG_PATH_COMPS][SG_COMP_LEN]; /* comps[0] is the file itself */
	__u32 depth;                            /* components walked (may exceed SG_PATH_COMPS) */
	__u32 flags;                            /* f_mode of the file judged; for a refused request
	              * (requested = 1), the open flags as passed */
	__u32 write;     /* 1: opened for writing, or (requested) asked to write,
	              * create or truncate */
	__u32 mode;      /* enum sg_enforce_mode */
	__u32 requested; /* 1: comps holds the path as the program passed
	                            * it (one string), for an open another layer
	                            * refused before the kernel resolved a file */
};

struct sg_exit_detail {
	__s32 exit_code;  /* (status >> 8) & 0xff when exited */
	__s32 signal;     /* terminating signal, 0 when exited */
	__u32 core;       /* dumped core */
	__u32 oom_killed; /* the task was chosen by the OOM killer */
};

/* Who did it is not always known: cgroup_skb programs run in no task's
 * context, sock_addr programs cannot see the parent. Unknown fields are
 * null in the event line, never a 0 that reads as root. */
#define SG_EVF_NO_TASK 1 /* pid, ppid, uid and comm unknown */
#define SG_EVF_NO_PPID 2 /* ppid unknown */

struct sg_event {
	__u64 ts_ns;     /* bpf_ktime_get_boot_ns(): CLOCK_BOOTTIME */
	__u64 cgroup_id; /* the sandbox */
	__u32 type;      /* enum sg_event_type */
	__u32 action;    /* enum sg_event_action */
	__u32 tenant;    /* tenant index (see struct sg_sandbox) */
	__u32 rule;      /* enum sg_rule the event concerns */
	__u32 pid, ppid, uid;
	__u32 flags; /* SG_EVF_*: which of pid, ppid, uid, comm are unknown */
	char comm[SG_COMM_LEN];
	union {
		struct sg_net_detail net;
		struct sg_fork_detail fork;
		struct sg_exec_detail exec;
		struct sg_file_detail file;
		struct sg_exit_detail exit;
	};
};

#endif
