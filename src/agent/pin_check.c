/* The shape of the pinned maps an agent adopts (see sg_bpf_check_pins in
 * bpf_loader.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "abi/maps.h"
#include "bpf_loader.h"
#include "control/pinned.h"
#include "lib/log.h"
#include "policy/policy.h"

/* A map pinned by an agent built with other sizes (an older one with
 * SG_MAX_TENANTS 1024). libbpf refuses to reuse a program map whose
 * shape differs, and an ARRAY opened by its pin would take slots past its
 * end with E2BIG on every write: refuse to start instead, naming the map
 * and what to do. Its content cannot be carried over in place: the
 * programs of the running generation read the old map. */
static int check_pin(const char *name, uint32_t key_size, uint32_t value_size, uint32_t max_entries)
{
	struct bpf_map_info info;
	uint32_t len = sizeof(info);
	char path[PATH_MAX];
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", sg_pin_root(), name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0; /* not pinned yet: created with our shape */
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		err = -errno;
		sg_error("cannot read the shape of the pinned map %s: %s", path, strerror(errno));
	} else if (info.key_size != key_size || info.value_size != value_size ||
		   info.max_entries != max_entries) {
		err = -EINVAL;
		sg_error("the pinned map %s was made by another sandguard version (%u entries of "
			 "%u+%u bytes, this agent needs %u of %u+%u): stop this node's executors, "
			 "run 'sandguard agent --cleanup' (sandboxes running now are not enforced "
			 "until the agent starts), then start the agent",
			 path, info.max_entries, info.key_size, info.value_size, max_entries,
			 key_size, value_size);
	}
	close(fd);
	return err;
}

int sg_bpf_check_pins(void)
{
	int err = check_pin("sg_policies", sizeof(uint32_t), sizeof(struct sg_policy_k),
			    SG_MAX_TENANTS);

	if (!err)
		err = check_pin("sg_paths", sizeof(struct sg_path_key), 1, SG_MAX_PATH_RULES);
	if (!err)
		err = check_pin("sg_exec_files", sizeof(struct sg_exec_key), 1, SG_MAX_EXEC_FILES);
	if (!err)
		err = check_pin("sg_tenant_names", sizeof(uint32_t), SG_TENANT_MAX, SG_MAX_TENANTS);
	if (!err)
		err = check_pin("sg_tenant_index", SG_TENANT_MAX, sizeof(uint32_t), SG_MAX_TENANTS);
	return err;
}
