/* The ledger's checkpoint file: atomic save, strict load that never loses
 * more than it must. See src/telemetry/ledger.h for the format and the
 * failure behaviour; the document itself is ledger_json.c. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ledger.h"
#include "lib/fs_util.h"
#include "lib/log.h"

#define LEDGER_FILE_MAX (64u << 20) /* far above 1025 tenants' worth */

/* ---- saving ---- */

/* Make the rename itself durable. */
static int fsync_parent(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd, err = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	return err;
}

int ledger_save(struct ledger *l, const char *path, const struct journal_pos *pos)
{
	json_t *root = ledger_to_json(l, pos);
	char *text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
	int err;

	json_decref(root);
	if (!text)
		return -ENOMEM;
	err = fs_write_atomic(path, text, strlen(text), 0644);
	free(text);
	if (!err && fsync_parent(path))
		sg_debug("ledger: saved %s but could not fsync its directory: %s", path,
			 strerror(errno));
	return err;
}

/* ---- loading ---- */

static int read_file(const char *path, char **text, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK),
	    err = 0; /* a FIFO must not hang us */
	ssize_t n = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		err = -errno;
	else if (S_ISDIR(st.st_mode))
		err = -EISDIR;
	else if (!S_ISREG(st.st_mode))
		err = -EINVAL;
	else if (st.st_size > LEDGER_FILE_MAX)
		err = -EFBIG;
	else if (!(*text = malloc(st.st_size + 1)))
		err = -ENOMEM;
	else {
		for (*len = 0; *len < (size_t)st.st_size; *len += n) {
			n = read(fd, *text + *len, st.st_size - *len);
			if (n < 0 && errno == EINTR) {
				n = 0;
				continue;
			}
			if (n <= 0)
				break;
		}
		if (n < 0)
			err = -errno;
	}
	close(fd);
	if (err && *text) {
		free(*text);
		*text = NULL;
	}
	return err;
}

/* Keep a corrupt file for inspection, under a name no save will reuse. */
static void move_aside(const char *path, char *aside, size_t len)
{
	long ts = (long)time(NULL);

	for (int i = 0; i < 100; i++) {
		if (i == 0)
			snprintf(aside, len, "%s.corrupt-%ld", path, ts);
		else
			snprintf(aside, len, "%s.corrupt-%ld.%d", path, ts, i);
		if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) == 0)
			return;
		if (errno != EEXIST)
			break;
	}
	snprintf(aside, len, "(could not move it aside: %s)", strerror(errno));
}

int ledger_load(struct ledger *l, const char *path, unsigned flags, struct ledger_checkpoint *cp,
		struct ledger_load_report *rep)
{
	char *text = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *root;
	int err;

	memset(rep, 0, sizeof(*rep));
	err = read_file(path, &text, &len);
	if (err == -ENOENT)
		return err;
	if (err) {
		snprintf(rep->why, sizeof(rep->why), "cannot read %s: %s%s; left where it is", path,
			 strerror(-err), err == -EINVAL ? " (not a regular file)" : "");
		return err;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!root && json_error_code(&jerr) == json_error_out_of_memory)
		return -ENOMEM;
	if (!root) {
		snprintf(rep->why, sizeof(rep->why), "line %d column %d: %s", jerr.line,
			 jerr.column, jerr.text);
		err = -EBADMSG;
	} else {
		err = ledger_from_json(l, root, cp, rep);
		json_decref(root);
	}
	if (err == -EBADMSG && !(flags & LEDGER_LOAD_READ_ONLY))
		move_aside(path, rep->aside, sizeof(rep->aside));
	return err;
}
