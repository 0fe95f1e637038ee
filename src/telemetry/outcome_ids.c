/* The set of outcome ids seen (see outcome_ids.h): linear probing over a
 * power-of-two table, at most half full; forgetting rebuilds the table,
 * which happens once per journal segment. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "outcome_ids.h"

struct slot {
	char *id; /* NULL: empty */
	uint64_t hash;
	uint64_t segment;
};

struct outcome_ids {
	struct slot *slots;
	size_t cap, n; /* cap: a power of two */
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

struct outcome_ids *outcome_ids_new(void)
{
	struct outcome_ids *s = calloc(1, sizeof(*s));

	if (s && !(s->slots = calloc(s->cap = 1024, sizeof(*s->slots)))) {
		free(s);
		return NULL;
	}
	return s;
}

void outcome_ids_free(struct outcome_ids *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->cap; i++)
		free(s->slots[i].id);
	free(s->slots);
	free(s);
}

/* The slot holding `id`, or the empty slot where it would go. */
static struct slot *find(struct slot *slots, size_t cap, const char *id, uint64_t hash)
{
	for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1))
		if (!slots[i].id || (slots[i].hash == hash && !strcmp(slots[i].id, id)))
			return &slots[i];
}

/* Move the entries that pass `keep` into a table of `cap` slots; entries
 * that do not are freed. */
static int rehash(struct outcome_ids *s, size_t cap, uint64_t keep_from)
{
	struct slot *slots = calloc(cap, sizeof(*slots));
	size_t n = 0;

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++) {
		struct slot *old = &s->slots[i];
		if (!old->id)
			continue;
		if (old->segment < keep_from) {
			free(old->id);
			continue;
		}
		*find(slots, cap, old->id, old->hash) = *old;
		n++;
	}
	free(s->slots);
	s->slots = slots;
	s->cap = cap;
	s->n = n;
	return 0;
}

int outcome_ids_add(struct outcome_ids *s, const char *id, uint64_t segment)
{
	uint64_t hash = fnv1a(id);
	struct slot *slot;

	if ((s->n + 1) * 2 > s->cap && rehash(s, s->cap * 2, 0))
		return -ENOMEM;
	slot = find(s->slots, s->cap, id, hash);
	if (slot->id)
		return 0;
	slot->id = strdup(id);
	if (!slot->id)
		return -ENOMEM;
	slot->hash = hash;
	slot->segment = segment;
	s->n++;
	return 1;
}

void outcome_ids_forget_before(struct outcome_ids *s, uint64_t segment)
{
	bool any = false;

	for (size_t i = 0; i < s->cap && !any; i++)
		any = s->slots[i].id && s->slots[i].segment < segment;
	if (any)
		rehash(s, s->cap, segment); /* on ENOMEM the ids stay: safe */
}

size_t outcome_ids_count(const struct outcome_ids *s)
{
	return s->n;
}
