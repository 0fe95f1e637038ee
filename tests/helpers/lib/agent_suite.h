/* The agent suite's shared state and expectations, for its case files
 * (suite_*.c) and agent_test.c, which sets it up and runs the cases. */
#ifndef SG_AGENT_SUITE_H
#define SG_AGENT_SUITE_H
#include <limits.h>
#include <stdbool.h>
#include "agent_children.h"
#include "agent_test_lib.h"

extern struct at_env env;
/* The exec target is static busybox: it opens nothing before running, so
 * the test judges the exec alone (our own binary may be instrumented by a
 * sanitizer whose runtime reads /proc at start). */
extern char busybox[PATH_MAX], self_exe[PATH_MAX], forbidden_exe[PATH_MAX], ro_file[PATH_MAX],
	unix_path[PATH_MAX], unix_dgram_path[PATH_MAX];
extern bool lsm; /* the agent runs in LSM mode */
extern int port_tcp4, port_tcp6, port_udp, port_allowed;
extern int l_tcp4, l_tcp6, l_udp, l_allowed, l_unix, l_abstract, l_unix_dgram, l_abstract_dgram;

/* What a wait status says, for a failure message. */
const char *describe(int st);
bool returned(int st, int err);
bool sigkilled(int st);
/* A file or exec refusal: EACCES in LSM mode, the task killed before it
 * could use what it opened in fallback mode. */
bool refused(int st);
int run_in(struct at_sandbox *sb, int (*fn)(void *), void *arg);
struct sg_sandbox_state;
/* The sandbox's counters as the kernel keeps them (sg_state): false when
 * they cannot be read. */
bool sandbox_state(const struct at_sandbox *sb, struct sg_sandbox_state *st);

/* A tenant's policy file in the suite's policy directory: loopback
 * port_allowed allowed, the suite's read-only paths, busybox runnable,
 * the given actions for egress and files. */
int write_policy(const char *tenant, const char *egress, const char *file, bool require_agent);
/* The policies of the suite's tenants (acme, strict, flood). */
int write_policies(void);

/* The cases, in the order agent_test runs them. */
void test_egress(void);
void test_unix(void);
void test_files(void);
void test_open_programs(void);
void test_lsm_scope(void);
void test_reused_inode(void);
void test_scratch(void);
void test_bind_mounts(void);
void test_exec(void);
void test_fork_bomb(void);
void test_kill_action(void);
void test_flood(void);
void test_nested_cgroup(void);
void test_outside_root(void);
void test_reload(void);
void test_restart(void);
void test_refusal(void);

#endif
