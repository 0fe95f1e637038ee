/* Priority changes that can be undone (see src/lib/priority.h). A warm
 * pool prepares its sandboxes below the runs' priority, and each init
 * returns to nice 0 before its run; where that return would be refused
 * (serve's pod has no CAP_SYS_NICE), preparing must not lower it at all,
 * or every run of a pooled sandbox would fail to start, or run its
 * tenant's code below the others. */
#include <linux/capability.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "priority.h"

bool sg_can_raise_priority(void)
{
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[2];
	struct rlimit rl;

	/* The kernel's can_nice(): nice n is allowed when 20 - n is within
	 * RLIMIT_NICE. */
	if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur >= 20)
		return true;
	if (syscall(SYS_capget, &head, caps))
		return false;
	return caps[CAP_SYS_NICE / 32].effective & (UINT32_C(1) << (CAP_SYS_NICE % 32));
}
