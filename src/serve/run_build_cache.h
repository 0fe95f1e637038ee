/* The build cache of /run_code: verl sends one request per test, each
 * with the same code, so a compiled language would be compiled once per
 * test. The program a compile left, with its compile_result, is kept on
 * the node's disk and reused by the same tenant's identical requests.
 *
 * Key: SHA-256 of the tenant, the language, the compiler's identity (the
 * path and SHA-256 of every program the language execs, found at start by
 * serve_lang_find.c and hashed again whenever one of them changes on
 * disk), the compile command with all its flags (which carry the memory
 * and cores the toolchain is told), and every file of the compile's
 * scratch (the code, the request's files, the language's setup files).
 *
 * Where: <dir>/<tenant>/<key>, dir = --build-cache DIR (default
 * <state dir>/build-cache); the directories 0700 and the entries 0600,
 * owned by the server's user (root), outside every sandbox's Landlock
 * paths: no sandbox can read or write one, and one tenant's requests
 * never read another's directory (the tenant is in the path and in the
 * key). An entry holds a digest of its key, its compile_result and its
 * program; it is verified (owner, mode, one link, size, digest) before
 * every use, and one that fails is refused, removed and compiled again.
 *
 * Bounds: at most --build-cache-mb MiB per tenant (default 256; 0 turns
 * the cache off), the least recently used entries removed beyond it.
 * Only a compile that left its program is kept: a compile error,
 * timeout or platform error is never reused.
 *
 * Concurrent identical requests compile once: the first claims the key,
 * the others wait for it (at most until their own request must start its
 * run) and then read what it left; if it left nothing (a compile error)
 * they compile themselves, at once, and so do identical requests for the
 * next minute. */
#ifndef SG_RUN_BUILD_CACHE_H
#define SG_RUN_BUILD_CACHE_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/sha256.h"

#define RUN_BUILD_CACHE_MB_DEFAULT 256
#define RUN_BUILD_CACHE_SUBDIR     "build-cache"

struct run_build_cache;
struct serve_langs;
struct lang_plan;
struct sandbox_file;

/* dir: NULL for <state dir>/build-cache; tenant_mb 0: no cache (*out
 * NULL). The directory is made 0700 if missing. 0, or -errno with `err`
 * (a directory that is not ours alone: another owner, or writable by
 * others). */
int run_build_cache_open(const char *dir, uint64_t tenant_mb, struct run_build_cache **out,
			 char *err, size_t err_len);
void run_build_cache_free(struct run_build_cache *bc);

struct run_build_key {
	char tenant[64];
	char hex[SHA256_HEX];
	bool claimed; /* this request compiles and must call run_build_cache_done() */
};

/* The key of a compile (see above): files are the request's (the code
 * first), lp's setup files are added. 0, or -errno (a compiler unreadable). */
int run_build_cache_key(struct run_build_cache *bc, const char *tenant, const struct serve_langs *l,
			int lang, const struct lang_plan *lp, const struct sandbox_file *files,
			size_t n_files, struct run_build_key *key);

/* A verified entry: true with the program (malloc'd) and its
 * compile_result (a new reference). false: none, and the caller compiles
 * (key->claimed says whether others wait for it). Waits at most until
 * wait_until_ms (CLOCK_MONOTONIC) for an identical compile under way. */
bool run_build_cache_get(struct run_build_cache *bc, struct run_build_key *key,
			 uint64_t wait_until_ms, void **program, size_t *len,
			 json_t **compile_result);

/* The compile is over: its program and compile_result kept (program NULL:
 * nothing to keep), and those waiting for it woken. */
void run_build_cache_done(struct run_build_cache *bc, struct run_build_key *key,
			  const void *program, size_t len, json_t *compile_result);

#endif
