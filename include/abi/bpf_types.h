/* Fixed-width types for headers shared by BPF programs and userspace:
 * BPF code gets them from vmlinux.h, userspace from linux/types.h. */
#ifndef SG_BPF_TYPES_H
#define SG_BPF_TYPES_H
#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#endif
