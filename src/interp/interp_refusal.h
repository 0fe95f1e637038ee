/* Interpreters that could not start, or ended as only a warm call can:
 * their tenant's calls of that script run cold for a while
 * (interp_refusal.c). */
#ifndef SG_INTERP_REFUSAL_H
#define SG_INTERP_REFUSAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox;

/* Note that sb's parent for `script` could not start or serve (why: its
 * FAILED text); for a while, a parent for sb's tenant, script and policy
 * is not started again. */
void interp_note_refusal(const struct sandbox *sb, const char *script, const char *why);

/* Whether such a note holds for sb's tenant and policy and `script`; with
 * `why`, its text there, and the call counted as one that fell back. */
bool interp_refused(const struct sandbox *sb, const char *script, char *why, size_t len);

/* Calls run cold because of such a failure, since the process started. */
uint64_t interp_fallbacks(void);

#endif
