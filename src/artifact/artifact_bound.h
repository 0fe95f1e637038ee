/* The artifact store's bounds (docs/policy.md "artifacts", Cost): a
 * directory of the store past its bound loses its least recently used
 * entries. Every entry is a cache, so a removed one costs a hash or a
 * signature check on its next use, never a wrong answer. Its user is
 * src/exec/artifact_store.c. */
#ifndef SG_ARTIFACT_BOUND_H
#define SG_ARTIFACT_BOUND_H
#include <stddef.h>
#include <stdint.h>

#define ARTIFACT_STORE_MB_DEFAULT 2048  /* the copies: $SANDGUARD_ARTIFACT_STORE_MB */
#define ARTIFACT_NOTES_MAX        65536 /* index/ and signed/ entries each */

/* $SANDGUARD_ARTIFACT_STORE_MB in bytes (1..1048576 MiB), else the
 * default. */
uint64_t artifact_store_max_bytes(void);

/* When `dir` holds more than max_bytes or max_entries in regular files,
 * removes the least recently modified ones until it holds at most 90% of
 * each. Best effort: a failure leaves the store larger, never wrong. */
void artifact_store_bound(const char *dir, uint64_t max_bytes, size_t max_entries);

#endif
