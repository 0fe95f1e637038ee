/* A session's kernel: bash or Python state kept in its scratch across
 * steps (src/session/session_kernel.c). */
#ifndef SG_SESSION_KERNEL_H
#define SG_SESSION_KERNEL_H
#include <stddef.h>
#include <sys/types.h>

enum session_kernel { SESSION_KERNEL_NONE = 0, SESSION_KERNEL_BASH, SESSION_KERNEL_PYTHON };

/* "none", "bash", "python": the kernel, or -1. */
int session_kernel_from_name(const char *name);
const char *session_kernel_name(enum session_kernel k);
/* Put the kernel's program into the scratch (an fd). 0 or -errno. */
int session_kernel_install(int scratch, enum session_kernel k, uid_t uid);
/* Put a step's code where the kernel reads it. 0 or -errno. */
int session_kernel_cell(int scratch, const char *code, size_t len, uid_t uid);
/* The step's command for a kernel (argv[0] resolved in the sandbox). */
char *const *session_kernel_argv(enum session_kernel k);

#endif
