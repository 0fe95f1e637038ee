/* Which line of a policy decided an event (see policy_locate.h). The
 * matching is the agent's own: egress_match() for allow rules, a path and
 * its ancestors for read-only entries (the agent compares the file's
 * ancestors with the entries' identities), glob_match() for execs. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "lib/fs_util.h"
#include "lib/json_locate.h"
#include "lib/rule_names.h"
#include "policy_locate.h"

#define POLICY_TEXT_MAX (1u << 20) /* as policy_load_file() */

int policy_text_load(const char *path, struct policy_text *pt, char *err, size_t err_len)
{
	struct sg_policy_error perr;
	struct stat st;
	size_t len;
	int ret;

	memset(pt, 0, sizeof(*pt));
	snprintf(pt->file, sizeof(pt->file), "%s", path);
	if (!strcmp(path, "<embedded>")) {
		const char *text = policy_embedded_default(&len);
		pt->text = strndup(text, len);
		if (!pt->text)
			return -ENOMEM;
		pt->len = len;
	} else {
		/* A FIFO or a device must not hang the reader. */
		if (stat(path, &st)) {
			ret = -errno;
			snprintf(err, err_len, "%s: %s", path, strerror(errno));
			return ret;
		}
		if (!S_ISREG(st.st_mode)) {
			snprintf(err, err_len, "%s: not a regular file", path);
			return -EINVAL;
		}
		ret = fs_read_all(path, POLICY_TEXT_MAX, &pt->text, &pt->len);
		if (ret) {
			snprintf(err, err_len, "%s: %s", path, strerror(-ret));
			return ret;
		}
	}
	ret = policy_parse(pt->text, pt->len, path, &pt->policy, &perr);
	if (ret) {
		policy_error_format(&perr, err, err_len);
		policy_text_free(pt);
	}
	return ret;
}

void policy_text_free(struct policy_text *pt)
{
	free(pt->text);
	pt->text = NULL;
	pt->len = 0;
}

/* The line holding byte `off`, trimmed, into pl->text. */
static void copy_line(const struct policy_text *pt, size_t off, struct policy_line *pl)
{
	size_t start = off, end = off, n;

	while (start > 0 && pt->text[start - 1] != '\n')
		start--;
	while (end < pt->len && pt->text[end] != '\n' && pt->text[end] != '\r')
		end++;
	while (start < end && (pt->text[start] == ' ' || pt->text[start] == '\t'))
		start++;
	while (end > start && (pt->text[end - 1] == ' ' || pt->text[end - 1] == '\t'))
		end--;
	n = end - start < sizeof(pl->text) - 1 ? end - start : sizeof(pl->text) - 1;
	memcpy(pl->text, pt->text + start, n);
	pl->text[n] = '\0';
}

/* pl for the value at `path` (or its key, with at_key). */
static void locate(const struct policy_text *pt, const struct json_step *path, int depth,
		   bool at_key, const char *key, struct policy_line *pl)
{
	long off = json_locate(pt->text, pt->len, path, depth, at_key);
	int col;

	memset(pl, 0, sizeof(*pl));
	snprintf(pl->key, sizeof(pl->key), "%s", key);
	if (off < 0)
		return;
	json_line_col(pt->text, pt->len, (size_t)off, &pl->line, &col);
	copy_line(pt, (size_t)off, pl);
}

/* entry = <section>.<list>[i] (matched) or the list itself, of `n`
 * entries (none matched). */
static void locate_entry(const struct policy_text *pt, const char *section, const char *list,
			 int index, int n, struct policy_finding *f)
{
	char key[64];

	f->has_entry = true;
	f->matched = index >= 0;
	if (index >= 0) {
		snprintf(key, sizeof(key), "%s.%s[%d]", section, list, index);
		locate(pt,
		       (struct json_step[]){ { section, 0 }, { list, 0 }, { NULL, (size_t)index } },
		       3, false, key, &f->entry);
	} else {
		snprintf(key, sizeof(key), "%s.%s", section, list);
		locate(pt, (struct json_step[]){ { section, 0 }, { list, 0 } }, 2, true, key,
		       &f->entry);
		snprintf(f->entry.value, sizeof(f->entry.value), "%d entr%s", n,
			 n == 1 ? "y" : "ies");
		for (int i = 0; i < n && i < (int)(sizeof(f->listed) / sizeof(f->listed[0])); i++) {
			snprintf(key, sizeof(key), "%s.%s[%d]", section, list, i);
			locate(pt,
			       (struct json_step[]){
				       { section, 0 }, { list, 0 }, { NULL, (size_t)i } },
			       3, false, key, &f->listed[i]);
			f->n_listed = i + 1;
		}
	}
}

/* "10.0.0.0/8 port 443 tcp" */
static void egress_text(const struct sg_egress_allow *e, char *buf, size_t len)
{
	char addr[INET6_ADDRSTRLEN] = "?";
	bool v4 = e->family == AF_INET;

	inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? e->addr + 12 : e->addr, addr, sizeof(addr));
	snprintf(buf, len, "%s/%u", addr, v4 ? e->prefix - 96 : e->prefix);
	if (e->port)
		snprintf(buf + strlen(buf), len - strlen(buf), " port %u", e->port);
	if (e->proto)
		snprintf(buf + strlen(buf), len - strlen(buf), " %s",
			 e->proto == IPPROTO_TCP ? "tcp" : "udp");
}

void policy_find_action(const struct policy_text *pt, int rule, struct policy_finding *f)
{
	const char *name = rule_name(rule);
	char key[64];

	if (!name)
		return;
	snprintf(key, sizeof(key), "actions.%s", name);
	f->has_action = true;
	locate(pt, (struct json_step[]){ { "actions", 0 }, { name, 0 } }, 2, false, key,
	       &f->action);
	snprintf(f->action.value, sizeof(f->action.value), "%s",
		 policy_action_name(pt->policy.action[rule]) ?: "?");
}

/* "10.0.0.1:53" or "[::1]:53" into the policy's 16-byte form and a port. */
static bool parse_dst(const char *dst, uint8_t addr16[16], uint16_t *port)
{
	char host[64];
	const char *colon, *start = dst;
	size_t n;
	uint8_t a4[4];
	char *end;
	unsigned long p;

	if (dst[0] == '[') {
		colon = strstr(dst, "]:");
		start = dst + 1;
		if (!colon)
			return false;
		n = (size_t)(colon - start);
		colon++;
	} else {
		colon = strrchr(dst, ':');
		if (!colon)
			return false;
		n = (size_t)(colon - start);
	}
	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, start, n);
	host[n] = '\0';
	p = strtoul(colon + 1, &end, 10);
	if (*end || p > 65535)
		return false;
	*port = (uint16_t)p;
	memset(addr16, 0, 16);
	if (inet_pton(AF_INET6, host, addr16) == 1)
		return true;
	if (inet_pton(AF_INET, host, a4) != 1)
		return false;
	addr16[10] = addr16[11] = 0xff;
	memcpy(addr16 + 12, a4, 4);
	return true;
}

static uint8_t proto_number(const char *proto)
{
	if (!proto)
		return 0;
	if (!strcmp(proto, "tcp"))
		return IPPROTO_TCP;
	if (!strcmp(proto, "udp"))
		return IPPROTO_UDP;
	if (!strcmp(proto, "icmp"))
		return IPPROTO_ICMP;
	if (!strcmp(proto, "icmpv6"))
		return IPPROTO_ICMPV6;
	return (uint8_t)atoi(proto);
}

void policy_find_egress(const struct policy_text *pt, const char *proto, const char *family,
			const char *dst, struct policy_finding *f)
{
	uint8_t addr16[16];
	uint16_t port;
	int i;

	memset(f, 0, sizeof(*f));
	policy_find_action(pt, SG_RULE_EGRESS, f);
	if (!dst)
		return;
	if (family && !strcmp(family, "unix")) {
		f->has_entry = true;
		f->matched = pt->policy.allow_unix;
		locate(pt, (struct json_step[]){ { "egress", 0 }, { "allow_unix", 0 } }, 2, false,
		       "egress.allow_unix", &f->entry);
		snprintf(f->says, sizeof(f->says), "unix sockets are %s by egress.allow_unix",
			 pt->policy.allow_unix ? "allowed" : "refused");
		return;
	}
	if (!parse_dst(dst, addr16, &port)) {
		snprintf(f->says, sizeof(f->says), "the destination %s cannot be matched", dst);
		return;
	}
	i = egress_match(&pt->policy, addr16, port, proto_number(proto));
	locate_entry(pt, "egress", "allow", i, pt->policy.n_egress, f);
	if (i >= 0)
		egress_text(&pt->policy.egress[i], f->entry.value, sizeof(f->entry.value));
	for (int k = 0; k < f->n_listed; k++)
		egress_text(&pt->policy.egress[k], f->listed[k].value, sizeof(f->listed[k].value));
	if (i >= 0)
		snprintf(f->says, sizeof(f->says), "egress.allow[%d] matches %s %s", i,
			 proto ? proto : "", dst);
	else
		snprintf(f->says, sizeof(f->says), "no entry of egress.allow matched %s %s",
			 proto ? proto : "", dst);
}

/* Whether `path` is `entry` or below it (component-wise). */
static bool path_under(const char *path, const char *entry)
{
	size_t n = strlen(entry);

	if (!strcmp(entry, "/"))
		return path[0] == '/';
	return !strncmp(path, entry, n) && (path[n] == '\0' || path[n] == '/');
}

void policy_find_file(const struct policy_text *pt, const char *path, bool write,
		      struct policy_finding *f)
{
	const struct sg_policy *p = &pt->policy;
	int i;

	memset(f, 0, sizeof(*f));
	policy_find_action(pt, SG_RULE_FILE, f);
	if (!path)
		return;
	for (i = 0; i < p->n_read_only; i++)
		if (path_under(path, p->read_only[i]))
			break;
	locate_entry(pt, "files", "read_only", i < p->n_read_only ? i : -1, p->n_read_only, f);
	if (i < p->n_read_only)
		snprintf(f->entry.value, sizeof(f->entry.value), "%s", p->read_only[i]);
	for (int k = 0; k < f->n_listed; k++)
		snprintf(f->listed[k].value, sizeof(f->listed[k].value), "%s", p->read_only[k]);
	if (i < p->n_read_only && write)
		snprintf(f->says, sizeof(f->says),
			 "files.read_only[%d] %s covers %s, but only for reading: the open asked "
			 "to write",
			 i, p->read_only[i], path);
	else if (i < p->n_read_only)
		snprintf(f->says, sizeof(f->says),
			 "files.read_only[%d] %s covers %s for reading (the file the agent saw "
			 "may not be the one at this path now)",
			 i, p->read_only[i], path);
	else
		snprintf(f->says, sizeof(f->says), "no entry of files.read_only covers %s", path);
}

void policy_find_exec(const struct policy_text *pt, const char *filename, struct policy_finding *f)
{
	const struct sg_policy *p = &pt->policy;
	int i;

	memset(f, 0, sizeof(*f));
	policy_find_action(pt, SG_RULE_EXEC, f);
	if (!filename)
		return;
	for (i = 0; i < p->n_exec_allow; i++)
		if (glob_match(p->exec_allow[i], filename))
			break;
	locate_entry(pt, "exec", "allow", i < p->n_exec_allow ? i : -1, p->n_exec_allow, f);
	if (i < p->n_exec_allow)
		snprintf(f->entry.value, sizeof(f->entry.value), "%s", p->exec_allow[i]);
	for (int k = 0; k < f->n_listed; k++)
		snprintf(f->listed[k].value, sizeof(f->listed[k].value), "%s", p->exec_allow[k]);
	if (i < p->n_exec_allow)
		snprintf(f->says, sizeof(f->says), "exec.allow[%d] %s matches %s", i,
			 p->exec_allow[i], filename);
	else
		snprintf(f->says, sizeof(f->says), "no entry of exec.allow matched %s", filename);
}

/* The value of a limit, as text ("" for a name it does not know). */
static void limit_value(const struct sg_limits *l, const char *limit, char *buf, size_t len)
{
	buf[0] = '\0';
	if (!strcmp(limit, "timeout_ms"))
		snprintf(buf, len, "%llu", (unsigned long long)l->timeout_ms);
	else if (!strcmp(limit, "memory_mb"))
		snprintf(buf, len, "%llu", (unsigned long long)l->memory_mb);
	else if (!strcmp(limit, "output_bytes"))
		snprintf(buf, len, "%llu", (unsigned long long)l->output_bytes);
	else if (!strcmp(limit, "max_tasks"))
		snprintf(buf, len, "%u", l->max_tasks);
	else if (!strcmp(limit, "max_forks"))
		snprintf(buf, len, "%u", l->max_forks);
	else if (!strcmp(limit, "cpu"))
		snprintf(buf, len, "%g", l->cpu);
}

void policy_find_limit(const struct policy_text *pt, const char *limit, struct policy_finding *f)
{
	char key[64];
	int rule = !strcmp(limit, "max_tasks") || !strcmp(limit, "max_forks") ? SG_RULE_FORK
		   : !strcmp(limit, "memory_mb")                              ? SG_RULE_MEMORY
									      : -1;

	memset(f, 0, sizeof(*f));
	if (rule >= 0)
		policy_find_action(pt, rule, f);
	snprintf(key, sizeof(key), "limits.%s", limit);
	f->has_entry = true;
	f->matched = true;
	locate(pt, (struct json_step[]){ { "limits", 0 }, { limit, 0 } }, 2, false, key, &f->entry);
	limit_value(&pt->policy.limits, limit, f->entry.value, sizeof(f->entry.value));
}
