/* The artifact store's bounds (see src/artifact/artifact_bound.h). Run
 * only after the store grew (a miss wrote an entry), so a hit never lists
 * a directory. A copy's mtime is its last use: src/exec/artifact_store.c
 * touches it on each hit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "artifact_bound.h"

struct entry {
	char name[96]; /* a digest or a stat key: never longer */
	uint64_t size;
	struct timespec used;
};

uint64_t artifact_store_max_bytes(void)
{
	const char *v = getenv("SANDGUARD_ARTIFACT_STORE_MB");
	char *end;
	unsigned long long mb = v && *v ? strtoull(v, &end, 10) : 0;

	if (!v || !*v || *end || mb < 1 || mb > 1048576)
		mb = ARTIFACT_STORE_MB_DEFAULT;
	return (uint64_t)mb << 20;
}

static int by_use(const void *a, const void *b)
{
	const struct timespec *x = &((const struct entry *)a)->used;
	const struct timespec *y = &((const struct entry *)b)->used;

	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* The directory's regular files, malloc'd; their count and total size. */
static struct entry *list(DIR *d, size_t *n, uint64_t *total)
{
	struct entry *e = NULL, *grown;
	size_t cap = 0;
	struct dirent *de;
	struct stat st;

	*n = 0;
	*total = 0;
	while ((de = readdir(d))) {
		if (strlen(de->d_name) >= sizeof(e->name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			if (!(grown = realloc(e, cap * sizeof(*e)))) {
				free(e);
				return NULL;
			}
			e = grown;
		}
		strcpy(e[*n].name, de->d_name);
		e[*n].size = (uint64_t)st.st_size;
		e[*n].used = st.st_mtim;
		*total += e[*n].size;
		(*n)++;
	}
	return e;
}

void artifact_store_bound(const char *dir, uint64_t max_bytes, size_t max_entries)
{
	DIR *d = opendir(dir);
	struct entry *e;
	uint64_t total;
	size_t n, i = 0;

	if (!d)
		return;
	e = list(d, &n, &total);
	if (e && (total > max_bytes || n > max_entries)) {
		qsort(e, n, sizeof(*e), by_use);
		/* Down to 90%: the next few misses do not list it again. */
		while (i < n && (total > max_bytes / 10 * 9 || n - i > max_entries / 10 * 9)) {
			if (!unlinkat(dirfd(d), e[i].name, 0) || errno == ENOENT)
				total -= e[i].size;
			i++;
		}
	}
	free(e);
	closedir(d);
}
