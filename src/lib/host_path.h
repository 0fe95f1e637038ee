/* Paths as the node (or the executor) sees them. A containerized agent
 * resolves policy paths beneath --host-root (the node's / mounted into its
 * pod), so the identities it puts in the maps are the files the sandboxes
 * really open. */
#ifndef SG_HOST_PATH_H
#define SG_HOST_PATH_H
#include <sys/stat.h>

/* stat(path) resolved beneath root_fd, absolute symlinks included
 * (openat2 RESOLVE_IN_ROOT). nofollow: lstat semantics for the last
 * component. 0 or -errno. */
int host_stat(int root_fd, const char *path, int nofollow, struct stat *st);

#endif
