/* Whether a process may lower its CPU priority for a while and raise it
 * again. */
#ifndef SG_LIB_PRIORITY_H
#define SG_LIB_PRIORITY_H
#include <stdbool.h>

/* Whether this process may raise its own priority back to nice 0 after
 * lowering it: CAP_SYS_NICE in its effective set, or an RLIMIT_NICE that
 * allows nice 0. Without either, nice only goes down. */
bool sg_can_raise_priority(void);

#endif
