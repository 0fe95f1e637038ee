/* Node-wide memory commitments (see src/node/node_mem.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "node_mem.h"

#define MEM_SHARE_PERCENT 90

/* MemTotal, in MiB. 0 or -errno. */
static int mem_total(uint64_t *mb)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	unsigned long long kb = 0;
	int found = 0;

	if (!f)
		return -errno;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "MemTotal: %llu kB", &kb) == 1;
	fclose(f);
	if (!found || !kb)
		return -EIO;
	*mb = kb / 1024;
	return 0;
}

int node_mem_capacity(uint32_t *mb)
{
	const char *env = getenv("SANDGUARD_NODE_MEMORY_MB");
	uint64_t total = 0;
	char *end;
	unsigned long long v;
	int err;

	if (env && *env) {
		v = strtoull(env, &end, 10);
		if (*end || v < 16 || v > UINT32_MAX)
			return -EINVAL;
		*mb = (uint32_t)v;
		return 0;
	}
	err = mem_total(&total);
	if (err)
		return err;
	total = total * MEM_SHARE_PERCENT / 100;
	*mb = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	return 0;
}

int node_mem_commit(uint64_t memory_mb, uint64_t wait_ms, struct node_cpu_commit *c, uint32_t *used,
		    uint32_t *cap)
{
	uint32_t mb;
	int err;

	c->fd = -1;
	c->path[0] = '\0';
	*used = 0;
	err = node_mem_capacity(cap);
	if (err)
		return err;
	/* The whole node's share, and no more: admissible when it is idle. */
	mb = memory_mb > *cap ? *cap : memory_mb ? (uint32_t)memory_mb : 1;
	return node_line_commit("mem", mb, *cap, wait_ms, c, used);
}
