/* The outcome ids the fold has seen, each with the journal segment of its
 * first record: what makes a second record of an id (an orphan reaper
 * booking an attempt its executor had booked already) a no-op. Ids are
 * forgotten with their segment (outcome_ids_forget_before), so the set
 * spans exactly the retained journal. An open-addressing hash table;
 * plain memory, no locking. */
#ifndef SG_OUTCOME_IDS_H
#define SG_OUTCOME_IDS_H
#include <stddef.h>
#include <stdint.h>

struct outcome_ids;

struct outcome_ids *outcome_ids_new(void);
void outcome_ids_free(struct outcome_ids *s);

/* 1 if `id` is new (now remembered with `segment`), 0 if it was seen,
 * -ENOMEM. */
int outcome_ids_add(struct outcome_ids *s, const char *id, uint64_t segment);

/* Forget the ids first seen in segments before `segment`. */
void outcome_ids_forget_before(struct outcome_ids *s, uint64_t segment);

size_t outcome_ids_count(const struct outcome_ids *s);

#endif
