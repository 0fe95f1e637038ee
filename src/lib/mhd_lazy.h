/* libmicrohttpd, loaded when the first HTTP server starts (`sandguard
 * serve`, the agent's /metrics), not when any sandguard command starts.
 *
 * Linked normally, libmicrohttpd brings gnutls and 9 more shared libraries
 * (and gnutls's constructor) into every process: 10 of the binary's 18,
 * paid by each `sandguard exec` before it can even hand its run to the
 * executor (docs/performance.md, section 9). mhd_lazy.c defines the few
 * MHD_* functions the tree calls, with libmicrohttpd's own prototypes
 * from <microhttpd.h>, each forwarding to the library loaded on first use
 * of MHD_start_daemon(). Callers are unchanged. Without the library,
 * MHD_start_daemon() logs why and returns NULL, as a daemon that cannot
 * start does. */
#ifndef SG_MHD_LAZY_H
#define SG_MHD_LAZY_H
#include <stddef.h>

/* The library's soname: the ABI <microhttpd.h> describes. */
#define MHD_LAZY_SONAME "libmicrohttpd.so.12"

/* Load it now (once per process). 0, or -errno with `detail`. */
int mhd_lazy_load(char *detail, size_t len);

#endif
