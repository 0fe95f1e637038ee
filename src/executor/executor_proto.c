/* The executor socket's wire format (see src/executor/executor_proto.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "lib/array_len.h"
#include "lib/fs_util.h"
#include "executor_proto.h"

/* The request's strings, in the order they travel (bit i of `fields`). */
static const size_t request_fields[] = {
	offsetof(struct exec_request, tenant),     offsetof(struct exec_request, policy_dir),
	offsetof(struct exec_request, batch_path), offsetof(struct exec_request, tests_path),
	offsetof(struct exec_request, run_id),     offsetof(struct exec_request, batch_id),
	offsetof(struct exec_request, language),   offsetof(struct exec_request, code_path),
};

static const char *field(const struct exec_request *r, size_t i)
{
	return *(const char *const *)((const char *)r + request_fields[i]);
}

static void set_field(struct exec_request *r, size_t i, const char *s)
{
	*(const char **)((char *)r + request_fields[i]) = s;
}

/* Appends s and its NUL at buf + *off when buf is set; counts it anyway. */
static void put(char *buf, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;

	if (buf)
		memcpy(buf + *off, s, n);
	*off += n;
}

/* The strings into buf (NULL: only counted); their length. */
static size_t put_strings(const struct exec_request *r, char **envp, char *buf,
			  struct executor_request *h)
{
	size_t off = 0;

	for (size_t i = 0; i < ARRAY_LEN(request_fields); i++) {
		if (!field(r, i))
			continue;
		put(buf, &off, field(r, i));
		h->fields |= 1u << i;
	}
	for (char *const *a = r->argv; a && *a; a++, h->argc++)
		put(buf, &off, *a);
	for (char **e = envp; *e; e++) {
		if (!executor_env_shared(*e))
			continue;
		put(buf, &off, *e);
		h->envc++;
	}
	return off;
}

char *executor_request_pack(const struct exec_request *r, char **envp, struct executor_request *h)
{
	size_t len;
	char *buf;

	memset(h, 0, sizeof(*h));
	len = put_strings(r, envp, NULL, h);
	if (len > EXECUTOR_MAX_STRINGS || !(buf = malloc(len ? len : 1)))
		return NULL;
	*h = (struct executor_request){ .magic = EXECUTOR_MAGIC,
					.len = (uint32_t)len,
					.timeout_ms = r->timeout_ms,
					.grader = r->grader_set ? r->grader + 1u : 0 };
	put_strings(r, envp, buf, h);
	return buf;
}

/* The next n strings of s (len bytes, each NUL-ended) from *off on, into
 * v. */
static int split(char *s, uint32_t len, uint32_t *off, char **v, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		char *nul = *off < len ? memchr(s + *off, '\0', len - *off) : NULL;

		if (!nul)
			return -EPROTO;
		v[i] = s + *off;
		*off += (uint32_t)(nul - v[i]) + 1;
	}
	return 0;
}

int executor_request_unpack(const struct executor_request *h, char *strings, struct exec_request *r,
			    char ***env, char ***vec)
{
	uint32_t known = (1u << ARRAY_LEN(request_fields)) - 1, off = 0;
	uint64_t n_fields = (uint64_t)__builtin_popcount(h->fields);
	char **v, **argv, **k;
	int err;

	*env = *vec = NULL;
	memset(r, 0, sizeof(*r));
	/* Each string takes a byte at least: counts past the length are a
	 * lie, and would wrap the sums below. */
	if ((h->fields & ~known) || n_fields + h->argc + h->envc > h->len ||
	    h->grader > SG_GRADER_LCB + 1u || h->zero)
		return -EPROTO;
	/* The fields, the command and its NULL, the environment and its NULL. */
	v = calloc(n_fields + h->argc + h->envc + 2, sizeof(*v));
	if (!v)
		return -ENOMEM;
	argv = v + n_fields;
	*env = argv + h->argc + 1;
	err = split(strings, h->len, &off, v, n_fields);
	err = err ?: split(strings, h->len, &off, argv, h->argc);
	err = err ?: split(strings, h->len, &off, *env, h->envc);
	if (!err && off != h->len)
		err = -EPROTO;
	k = v;
	for (size_t i = 0; i < ARRAY_LEN(request_fields); i++)
		if (h->fields & (1u << i))
			set_field(r, i, *k++);
	r->argv = h->argc ? argv : NULL;
	r->timeout_ms = h->timeout_ms;
	r->grader_set = h->grader > 0;
	r->grader = (uint8_t)(h->grader ? h->grader - 1 : 0);
	if (!err && !exec_request_check(r))
		err = -EPROTO;
	if (err) {
		free(v);
		*env = NULL;
		memset(r, 0, sizeof(*r));
		return err;
	}
	*vec = v;
	return 0;
}

int executor_socket_path(char *buf, size_t len)
{
	return fs_run_subdir(EXECUTOR_SOCKET, 0, buf, len);
}

bool executor_env_shared(const char *entry)
{
	size_t off = strlen(EXECUTOR_ENV_OFF);

	return !strncmp(entry, "SANDGUARD_", 10) &&
	       !(!strncmp(entry, EXECUTOR_ENV_OFF, off) && entry[off] == '=');
}

int executor_send_iov(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t sent = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0)
			return -errno;
		/* Past what went; a part sent in part keeps its rest. */
		for (; n > 0 && (size_t)sent >= iov->iov_len; iov++, n--)
			sent -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + sent;
			iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

int executor_send_all(int fd, const void *buf, size_t len)
{
	struct iovec v = { (void *)buf, len };

	return executor_send_iov(fd, &v, 1);
}

int executor_recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
