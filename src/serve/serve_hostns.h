/* `sandguard serve --host-namespaces`: run as a host process from a
 * container (deploy/README.md).
 *
 * The executor must see the node's root filesystem (the agent resolves
 * policy paths there, and refuses sandboxes of an executor with another
 * root) and the node's cgroup tree (a container's cgroup namespace cannot
 * move processes into <cgroup2>/sandguard/...). So the server joins the
 * mount and cgroup namespaces of the node's init (pid 1; the pod needs
 * hostPID), keeping its network namespace (the pod's IP, behind the
 * Service). Its policy and token directories are the container's
 * (ConfigMap and Secret volumes): they are opened first and read through
 * /proc/self/fd afterwards, which reaches them from any mount namespace. */
#ifndef SG_SERVE_HOSTNS_H
#define SG_SERVE_HOSTNS_H
#include <stddef.h>
#include "serve.h"

#define SERVE_HOST_PID 1 /* whose namespaces: the node's init */

/* Open cfg's policy and tokens directories, join pid's mount and cgroup
 * namespaces, and point cfg at the directories through /proc/self/fd
 * (the paths are written to policy_buf and tokens_buf, len bytes each).
 * 0, or -errno with `err` set. */
int serve_enter_host_namespaces(int pid, struct serve_config *cfg, char *policy_buf,
				char *tokens_buf, size_t len, char *err, size_t err_len);

#endif
