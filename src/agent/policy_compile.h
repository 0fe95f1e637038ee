/* Tenant policies compiled into the BPF maps, atomically per tenant. */
#ifndef SG_POLICY_COMPILE_H
#define SG_POLICY_COMPILE_H
#include <stddef.h>
#include <stdint.h>
#include "abi/maps.h"
#include "policy/policy.h"

struct sg_bpf;

void policy_to_kernel(const struct sg_policy *p, struct sg_policy_k *k);

/* Put `p` in force for tenant index `tenant`, its paths resolved beneath
 * root_fd / root_path (the node's root: "/" unless --host-root). On error
 * the previous policy (if any) stays in force and errbuf says why. */
int policy_compile_apply(const struct sg_bpf *b, uint32_t tenant, const struct sg_policy *p,
			 int root_fd, const char *root_path, char *errbuf, size_t errlen);
int policy_compile_remove(const struct sg_bpf *b, uint32_t tenant);

#endif
