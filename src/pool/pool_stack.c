/* A client thread's stack out of forks (see src/pool/pool_stack.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "pool_stack.h"

/* This thread's range out of forks; len 0: none. */
static __thread char *lo;
static __thread size_t len;
static __thread bool copyable;

bool pool_stack_keep_out(void)
{
	pthread_attr_t attr;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
	void *addr;
	/* A page of margin below this frame: the caller's frames stay. */
	uintptr_t top = ((uintptr_t)__builtin_frame_address(0) & ~(page - 1)) - page;
	bool ok = false;

	if (len || pthread_getattr_np(pthread_self(), &attr))
		return false;
	if (!pthread_attr_getstack(&attr, &addr, &size) && (uintptr_t)addr < top &&
	    top <= (uintptr_t)addr + size && !madvise(addr, top - (uintptr_t)addr, MADV_DONTFORK)) {
		lo = addr;
		len = top - (uintptr_t)addr;
		copyable = false;
		ok = true;
	}
	pthread_attr_destroy(&attr);
	return ok;
}

int pool_stack_forkable(bool yes)
{
	if (!len)
		return 0;
	if (copyable && !yes && madvise(lo, len, MADV_DONTFORK))
		return 0; /* stays copyable: only the faults come back */
	if (!copyable && yes && madvise(lo, len, MADV_DOFORK))
		return -errno;
	copyable = yes;
	return 0;
}

int pool_stack_release(void)
{
	if (len && !copyable && madvise(lo, len, MADV_DOFORK))
		return -errno;
	len = 0;
	return 0;
}
