/* Reading the agent's pins (see pinned.h). */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "abi/maps.h"
#include "pinned.h"

const char *sg_pin_root(void)
{
	const char *env = getenv("SANDGUARD_PIN_ROOT");

	return env && *env ? env : SG_PIN_ROOT;
}

int sg_pinned_map(const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", sg_pin_root(), name);
	fd = bpf_obj_get(path);
	return fd >= 0 ? fd : -errno;
}

int sg_pinned_config(struct sg_config *cfg)
{
	uint32_t zero = 0;
	int fd = sg_pinned_map("sg_config"), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, &zero, cfg))
		err = -errno;
	close(fd);
	return err;
}

uint32_t sg_pinned_generation(void)
{
	struct sg_config cfg = { 0 };

	return sg_pinned_config(&cfg) ? 0 : cfg.active_gen;
}

int sg_pinned_links(void)
{
	return sg_pinned_links_of(sg_pinned_generation());
}

int sg_pinned_links_of(uint32_t gen)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (!gen)
		return 0;
	snprintf(dir, sizeof(dir), "%s/gen-%u", sg_pin_root(), gen);
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int sg_pinned_ondemand_of(uint32_t gen, char (*names)[SG_ONDEMAND_NAME], int max)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "%s/gen-%u/ondemand/prog", sg_pin_root(), gen);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (n >= 0 && (de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.')
			continue;
		if (n == max || len >= SG_ONDEMAND_NAME)
			n = -E2BIG;
		else
			memcpy(names[n++], de->d_name, len + 1);
	}
	closedir(d);
	return n;
}

/* Whether the link behind fd is a cgroup link no longer attached to any
 * cgroup (detached: `bpftool link detach`, or its cgroup gone). The
 * kernel's fdinfo of a cgroup link names its cgroup, 0 once detached. */
static bool cgroup_link_detached(int fd)
{
	char path[64], line[128];
	bool cgroup_link = false, detached = false;
	unsigned long long id;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "link_type:", 10) && strstr(line, "cgroup"))
			cgroup_link = true;
		else if (sscanf(line, "cgroup_id: %llu", &id) == 1)
			detached = id == 0;
	}
	fclose(f);
	return cgroup_link && detached;
}

int sg_pinned_links_detached(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 256];
	struct dirent *de;
	uint32_t gen = sg_pinned_generation();
	DIR *d;
	int n = 0, fd;

	if (!gen)
		return 0;
	snprintf(dir, sizeof(dir), "%s/gen-%u", sg_pin_root(), gen);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = bpf_obj_get(path);
		if (fd < 0)
			continue;
		n += cgroup_link_detached(fd);
		close(fd);
	}
	closedir(d);
	return n;
}

int sg_pinned_root_cgroup_id(uint64_t *id)
{
	return sg_pinned_root_cgroup_id_of(sg_pinned_generation(), id);
}

int sg_pinned_root_cgroup_id_of(uint32_t gen, uint64_t *id)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	char path[PATH_MAX];
	int fd, err = 0;

	if (!gen)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/gen-%u/sg_skb_egress", sg_pin_root(), gen);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		err = -errno;
	else if (info.type != BPF_LINK_TYPE_CGROUP)
		err = -EINVAL;
	else
		*id = info.cgroup.cgroup_id;
	close(fd);
	return err;
}

int sg_pinned_kill_rule(uint64_t cgroup_id, int *rule)
{
	int fd = sg_pinned_map("sg_killed");
	uint32_t killed_rule = 0;

	*rule = -1;
	if (fd < 0)
		return fd;
	/* Only the agent's record of a kill it carried out: a kill-class
	 * trip in sg_state is a kill only once the agent emptied the cgroup,
	 * and with no agent running nobody does. */
	if (bpf_map_lookup_elem(fd, &cgroup_id, &killed_rule) == 0 && killed_rule)
		*rule = (int)killed_rule - 1;
	close(fd);
	return *rule >= 0;
}

int sg_pinned_quiet_in(int state_fd, uint64_t cgroup_id)
{
	struct sg_sandbox_state st;

	return bpf_map_lookup_elem(state_fd, &cgroup_id, &st) == 0 && !st.violations &&
	       !st.tripped && sg_state_first_rule(&st) < 0;
}

int sg_pinned_quiet(uint64_t cgroup_id)
{
	int fd = sg_pinned_map("sg_state"), quiet;

	if (fd < 0)
		return fd;
	quiet = sg_pinned_quiet_in(fd, cgroup_id);
	close(fd);
	return quiet;
}

/* A rule read off a sandbox's sg_state by `decode`: 1 when it names one. */
static int state_rule(int fd, uint64_t cgroup_id, int *rule,
		      int (*decode)(const struct sg_sandbox_state *))
{
	struct sg_sandbox_state st;

	*rule = -1;
	if (bpf_map_lookup_elem(fd, &cgroup_id, &st) == 0)
		*rule = decode(&st);
	return *rule >= 0;
}

int sg_pinned_first_rule_in(int state_fd, uint64_t cgroup_id, int *rule)
{
	return state_rule(state_fd, cgroup_id, rule, sg_state_first_rule);
}

int sg_pinned_trip_rule_in(int state_fd, uint64_t cgroup_id, int *rule)
{
	return state_rule(state_fd, cgroup_id, rule, sg_state_kill_rule);
}

/* `in` on the pinned sg_state, opened for the call. */
static int on_state(uint64_t cgroup_id, int *rule, int (*in)(int, uint64_t, int *))
{
	int fd = sg_pinned_map("sg_state"), found;

	*rule = -1;
	if (fd < 0)
		return fd;
	found = in(fd, cgroup_id, rule);
	close(fd);
	return found;
}

int sg_pinned_first_rule(uint64_t cgroup_id, int *rule)
{
	return on_state(cgroup_id, rule, sg_pinned_first_rule_in);
}

int sg_pinned_trip_rule(uint64_t cgroup_id, int *rule)
{
	return on_state(cgroup_id, rule, sg_pinned_trip_rule_in);
}

int sg_pinned_sandbox_ids(uint64_t cgroup_id, struct sg_sandbox_ids *ids)
{
	int fd = sg_pinned_map("sg_sandbox_ids"), found;

	if (fd < 0)
		return fd;
	found = bpf_map_lookup_elem(fd, &cgroup_id, ids) == 0;
	close(fd);
	if (found)
		sg_sandbox_ids_terminate(ids);
	return found;
}
