/* Small file helpers shared by the executor's state, log and input code. */
#ifndef SG_FS_UTIL_H
#define SG_FS_UTIL_H
#include <stddef.h>
#include <sys/types.h>

/* mkdir -p: create `dir` and missing parents with `mode`. 0 or -errno. */
int fs_mkdir_p(const char *dir, mode_t mode);

/* Close *fd if open, and mark it closed (-1). */
void fs_close(int *fd);

/* Read a whole file ("-" = stdin) into a malloc'd, NUL-terminated buffer,
 * refusing more than `max` bytes (-EFBIG). 0 or -errno. */
int fs_read_all(const char *path, size_t max, char **data, size_t *len);

/* Replace `path` with `data` atomically (write a temporary file in the same
 * directory, fsync, rename). 0 or -errno. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

#endif
