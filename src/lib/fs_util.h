/* Small file helpers shared by the executor's state, log and input code. */
#ifndef SG_FS_UTIL_H
#define SG_FS_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mkdir -p: create `dir` and missing parents with `mode`. 0 or -errno. */
int fs_mkdir_p(const char *dir, mode_t mode);

/* $env if set and non-empty, else `def`, into buf. 0 or -ENAMETOOLONG. */
int fs_env_dir(const char *env, const char *def, char *buf, size_t len);

/* The node's run directory: $SANDGUARD_RUN_DIR, else /run/sandguard (the
 * concurrency slots, the in-flight records, the CPU commitments). */
#define FS_RUN_DIR_DEFAULT "/run/sandguard"
int fs_run_dir(char *buf, size_t len);

/* <run>/<sub> into buf, created (mkdir -p) with `mode` unless it is 0. */
int fs_run_subdir(const char *sub, mode_t mode, char *buf, size_t len);

/* Close *fd if open, and mark it closed (-1). */
void fs_close(int *fd);

/* Read a whole file ("-" = stdin) into a malloc'd, NUL-terminated buffer,
 * refusing more than `max` bytes (-EFBIG). 0 or -errno. */
int fs_read_all(const char *path, size_t max, char **data, size_t *len);

/* The same from an open fd, to its end (the fd stays open). */
int fs_read_fd(int fd, size_t max, char **data, size_t *len);

/* Replace `path` with `data` atomically (write a temporary file in the same
 * directory, fsync, rename). 0 or -errno. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* The value of `key` in <dir>/<file>, a flat-keyed file of "key value" lines
 * such as cpu.stat or memory.events. The key must match a line's first word
 * exactly ("max" is not "max_usec"); a line whose value is not a decimal
 * number is passed over. 1 with *v set when found, 0 when no line has the
 * key, or -errno when the file cannot be read. */
int fs_read_keyed(const char *dir, const char *file, const char *key, uint64_t *v);
/* The same on an open file, read from its start (pread: a kernel file such
 * as cpu.stat is generated again at offset 0, so one descriptor serves
 * every read). */
int fs_pread_keyed(int fd, const char *key, uint64_t *v);

#endif
