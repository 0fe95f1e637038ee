#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "host_path.h"

int host_stat(int root_fd, const char *path, int nofollow, struct stat *st)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_IN_ROOT,
	};
	int fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how)), err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, st))
		err = -errno;
	close(fd);
	return err;
}
