/* The executor's kept set of the agent's pinned maps (see pinset.h). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "abi/maps.h"
#include "pinned.h"
#include "pinset.h"

static const char *const pin_names[SG_PIN__COUNT] = {
	[SG_PIN_CONFIG] = "sg_config",      [SG_PIN_SANDBOXES] = "sg_sandboxes",
	[SG_PIN_STATE] = "sg_state",        [SG_PIN_POLICIES] = "sg_policies",
	[SG_PIN_INDEX] = "sg_tenant_index", [SG_PIN_KILLED] = "sg_killed",
	[SG_PIN_IDS] = "sg_sandbox_ids",
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sg_pinset *current; /* holds one count of its own */

/* The inode of pin i now: 0 with *ino 0 when nothing is pinned there. */
static int pin_inode(const char *root, enum sg_pin i, dev_t *dev, ino_t *ino)
{
	char path[PATH_MAX];
	struct stat st;

	*dev = 0;
	*ino = 0;
	snprintf(path, sizeof(path), "%s/%s", root, pin_names[i]);
	if (stat(path, &st))
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* Whether every pin is still the one s opened (or still absent). */
static bool still_pinned(const struct sg_pinset *s)
{
	dev_t dev;
	ino_t ino;

	if (strcmp(s->root, sg_pin_root()))
		return false;
	for (int i = 0; i < SG_PIN__COUNT; i++)
		if (pin_inode(s->root, i, &dev, &ino) || ino != s->ino[i] || dev != s->dev[i])
			return false;
	return true;
}

/* One pin opened with the inode it was opened through: the inode read
 * before and after the open agree, or the pin changed meanwhile and it
 * is read again. */
static void open_pin(struct sg_pinset *s, enum sg_pin i)
{
	dev_t dev;
	ino_t ino;

	for (int tries = 0; tries < 3; tries++) {
		if (s->fd[i] >= 0)
			close(s->fd[i]);
		s->fd[i] = -1;
		if (pin_inode(s->root, i, &s->dev[i], &s->ino[i]) || !s->ino[i])
			return;
		s->fd[i] = sg_pinned_map(pin_names[i]);
		s->err[i] = s->fd[i] < 0 ? s->fd[i] : 0;
		if (pin_inode(s->root, i, &dev, &ino) == 0 && ino == s->ino[i] && dev == s->dev[i])
			return;
	}
	/* Pinned again and again meanwhile: no inode to trust, so the next
	 * check reopens it. */
	s->ino[i] = (ino_t)-1;
}

static struct sg_pinset *open_set(void)
{
	struct sg_pinset *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->root, sizeof(s->root), "%s", sg_pin_root());
	for (int i = 0; i < SG_PIN__COUNT; i++) {
		s->fd[i] = -1;
		s->err[i] = -ENOENT;
		open_pin(s, i);
	}
	s->refs = 1;
	return s;
}

static void drop(struct sg_pinset *s)
{
	if (--s->refs > 0)
		return;
	for (int i = 0; i < SG_PIN__COUNT; i++)
		if (s->fd[i] >= 0)
			close(s->fd[i]);
	free(s);
}

struct sg_pinset *sg_pinset_get(bool check)
{
	struct sg_pinset *s;

	pthread_mutex_lock(&lock);
	if (current && (check || strcmp(current->root, sg_pin_root())) && !still_pinned(current)) {
		drop(current);
		current = NULL;
	}
	if (!current)
		current = open_set();
	s = current;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&lock);
	return s;
}

void sg_pinset_put(struct sg_pinset *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&lock);
	drop(s);
	pthread_mutex_unlock(&lock);
}

uint32_t sg_pinset_generation(const struct sg_pinset *s)
{
	struct sg_config cfg = { 0 };
	uint32_t zero = 0;

	if (s->fd[SG_PIN_CONFIG] < 0 || bpf_map_lookup_elem(s->fd[SG_PIN_CONFIG], &zero, &cfg))
		return 0;
	return cfg.active_gen;
}

int sg_pinset_usable(const struct sg_pinset *s)
{
	static const enum sg_pin needed[] = { SG_PIN_SANDBOXES, SG_PIN_STATE, SG_PIN_POLICIES,
					      SG_PIN_INDEX };

	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
		if (s->fd[needed[i]] < 0)
			return s->ino[needed[i]] ? s->err[needed[i]] : -ENOENT;
	return 0;
}

void sg_pinset_facts(struct sg_pinset *s, struct sg_gen_facts *f)
{
	uint32_t gen = sg_pinset_generation(s);

	pthread_mutex_lock(&lock);
	*f = s->facts;
	pthread_mutex_unlock(&lock);
	if (gen && f->gen == gen)
		return;
	/* Read outside the lock: two threads may both read a new
	 * generation's facts, and either's are right. */
	memset(f, 0, sizeof(*f));
	f->gen = gen;
	f->ondemand_n = -1;
	if (gen) {
		f->links = sg_pinned_links_of(gen);
		f->root_err = sg_pinned_root_cgroup_id_of(gen, &f->root_id);
		f->ondemand_n = sg_pinned_ondemand_of(gen, f->ondemand, SG_ONDEMAND_MAX);
	}
	pthread_mutex_lock(&lock);
	if (gen && f->links > 0)
		s->facts = *f;
	pthread_mutex_unlock(&lock);
}
