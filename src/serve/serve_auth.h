/* Per-tenant secrets for `sandguard serve` (--tokens DIR).
 *
 * DIR holds one file per tenant, named after the tenant (a Kubernetes
 * Secret mounted as a volume has exactly this shape): each non-empty line
 * is one token of that tenant, so a tenant can hold two tokens while a
 * trainer moves from the old one to the new one. Lines starting with '#'
 * are comments. A token is 32 to 128 characters of [A-Za-z0-9._~-] (safe
 * in a URL path unescaped). Names starting with '.' are skipped (the
 * Secret's ..data links); any other file that is not a tenant name, a
 * token file readable or writable by every user, a malformed token or one
 * token given to two tenants makes the whole directory invalid.
 *
 * The directory is re-read at most once per TOKENS_RELOAD_MS, so a
 * rotated Secret applies without a restart; an invalid new content is
 * logged and the previous tokens stay in force. Tokens are compared in
 * constant time against every entry, and never logged. */
#ifndef SG_SERVE_AUTH_H
#define SG_SERVE_AUTH_H
#include <stdbool.h>
#include <stddef.h>
#include "policy/policy.h"

#define TOKEN_MIN        32
#define TOKEN_MAX        128
#define TOKENS_MAX       4096 /* tokens in one directory */
#define TOKENS_RELOAD_MS 1000

struct serve_tokens;

/* Load DIR. 0 with *out, or -errno with `err` saying which file and why
 * (an unreadable or empty directory is an error: no request could ever
 * be served). */
int serve_tokens_open(const char *dir, struct serve_tokens **out, char *err, size_t err_len);
void serve_tokens_free(struct serve_tokens *t);

/* The tenant that `token` (len bytes) belongs to: true with `tenant` set,
 * or false. Re-reads the directory first when it is due. */
bool serve_tokens_lookup(struct serve_tokens *t, const char *token, size_t len,
			 char tenant[SG_TENANT_MAX]);

/* Tokens in force (for /readyz). */
size_t serve_tokens_count(struct serve_tokens *t);

/* A token's syntax, for what a client sends: checked before any lookup. */
bool serve_token_valid(const char *token, size_t len);

#endif
