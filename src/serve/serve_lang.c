/* The languages of /run_code: which programs each one runs, and every
 * program it execs, so that a request is refused up front (400) when the
 * tenant's exec.allow would not let it run, instead of being killed by
 * the agent half-way and booked as a violation.
 *
 * python: /usr/bin/python3 main.py.
 *
 * cpp: two sandboxes. The first runs the compiler, g++ -save-temps: the
 * sandbox may write nowhere but its scratch, and gcc otherwise puts its
 * temporary files in /tmp (TMPDIR cannot be set: the sandbox environment
 * is fixed). The second runs the program through the dynamic loader,
 * "<ld.so> ./main", not by exec'ing ./main: the agent allows execs by the
 * identity of files it saw when the policy loaded, and a binary compiled a
 * moment ago cannot be among them. So the scratch stays non-executable
 * (Landlock), and the tenant's exec.allow must name the compiler's
 * programs and the loader. Allowing the loader lets that tenant's code run
 * any native code it writes; for a C++ tenant that is the point, for a
 * python-only tenant it is a reason to leave cpp off its policy. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "serve_internal.h"
#include "lib/array_len.h"

#define PYTHON_PATH "/usr/bin/python3"
#define CXX_PATH    "/usr/bin/g++"

static const char *const lang_names[LANG__COUNT] = { [LANG_PYTHON] = "python", [LANG_CPP] = "cpp" };

const char *serve_lang_name(enum serve_lang_id id)
{
	return (unsigned)id < LANG__COUNT ? lang_names[id] : "?";
}

int serve_lang_lookup(const char *name)
{
	for (int i = 0; i < LANG__COUNT; i++)
		if (name && !strcmp(name, lang_names[i]))
			return i;
	return -1;
}

bool serve_exec_allowed(const struct sg_policy *p, const char *path)
{
	char real[PATH_MAX];
	bool resolved = realpath(path, real) != NULL;

	for (int i = 0; i < p->n_exec_allow; i++)
		if (glob_match(p->exec_allow[i], path) ||
		    (resolved && glob_match(p->exec_allow[i], real)))
			return true;
	return false;
}

const char *serve_lang_denied(const struct serve_langs *l, enum serve_lang_id id,
			      const struct sg_policy *p)
{
	for (int i = 0; i < l->n_tools[id]; i++)
		if (!serve_exec_allowed(p, l->tools[id][i]))
			return l->tools[id][i];
	return NULL;
}

static int add_tool(struct serve_langs *l, enum serve_lang_id id, const char *path, char *err,
		    size_t err_len)
{
	if (access(path, X_OK)) {
		snprintf(err, err_len, "language %s needs %s: %s", lang_names[id], path,
			 strerror(errno));
		return -ENOENT;
	}
	if (l->n_tools[id] == SERVE_LANG_TOOLS) {
		snprintf(err, err_len, "language %s: too many programs", lang_names[id]);
		return -EINVAL;
	}
	snprintf(l->tools[id][l->n_tools[id]++], PATH_MAX, "%s", path);
	return 0;
}

/* The program interpreter (PT_INTERP) of our own executable: the system's
 * dynamic loader, whatever the architecture calls it. */
static int own_loader(char *out, size_t len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), err = -ENOENT;

	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(ph)) {
		close(fd);
		return -ENOEXEC;
	}
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) !=
		    sizeof(ph))
			break;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz == 0 || ph.p_filesz > len ||
		    pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz ||
		    out[ph.p_filesz - 1] != '\0') {
			err = -ENOEXEC;
			break;
		}
		err = 0;
		break;
	}
	close(fd);
	return err;
}

/* Where the compiler driver finds one of its programs: an absolute path
 * from -print-prog-name, or a bare name it looks up in PATH, which in the
 * sandbox is /usr/bin:/bin. */
static int compiler_program(const char *prog, char *out, size_t len)
{
	char cmd[64], line[PATH_MAX] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), CXX_PATH " -print-prog-name=%s 2>/dev/null", prog);
	f = popen(cmd, "re");
	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	pclose(f);
	line[strcspn(line, "\n")] = '\0';
	if (line[0] == '/') {
		snprintf(out, len, "%s", line);
		return 0;
	}
	if (!line[0] || strchr(line, '/'))
		return -ENOENT;
	for (int i = 0; i < 2; i++) {
		snprintf(out, len, "%s/%s", i ? "/bin" : "/usr/bin", line);
		if (!access(out, X_OK))
			return 0;
	}
	return -ENOENT;
}

static int init_cpp(struct serve_langs *l, char *err, size_t err_len)
{
	static const char *const helpers[] = { "cc1plus", "collect2", "as", "ld" };
	char path[PATH_MAX];
	int ret;

	snprintf(l->cxx, sizeof(l->cxx), "%s", CXX_PATH);
	if ((ret = add_tool(l, LANG_CPP, l->cxx, err, err_len)))
		return ret;
	for (size_t i = 0; i < ARRAY_LEN(helpers); i++) {
		if (compiler_program(helpers[i], path, sizeof(path))) {
			snprintf(err, err_len, "language cpp: %s cannot find its %s", CXX_PATH,
				 helpers[i]);
			return -ENOENT;
		}
		if ((ret = add_tool(l, LANG_CPP, path, err, err_len)))
			return ret;
	}
	ret = own_loader(l->loader, sizeof(l->loader));
	if (ret) {
		snprintf(err, err_len, "language cpp: cannot find the dynamic loader: %s",
			 strerror(-ret));
		return ret;
	}
	return add_tool(l, LANG_CPP, l->loader, err, err_len);
}

int serve_langs_init(struct serve_langs *l, const char *list, char *err, size_t err_len)
{
	char buf[256], *save = NULL;
	int ret;

	memset(l, 0, sizeof(*l));
	if (!list || strlen(list) >= sizeof(buf)) {
		snprintf(err, err_len, "--languages: expected a list such as \"python,cpp\"");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		int id = serve_lang_lookup(name);

		if (id < 0) {
			snprintf(err, err_len,
				 "--languages: unknown language \"%s\" (known: python, cpp)", name);
			return -EINVAL;
		}
		l->enabled[id] = true;
	}
	if (!l->enabled[LANG_PYTHON] && !l->enabled[LANG_CPP]) {
		snprintf(err, err_len, "--languages: no language given");
		return -EINVAL;
	}
	if (l->enabled[LANG_PYTHON]) {
		snprintf(l->python, sizeof(l->python), "%s", PYTHON_PATH);
		if ((ret = add_tool(l, LANG_PYTHON, l->python, err, err_len)))
			return ret;
	}
	if (l->enabled[LANG_CPP] && (ret = init_cpp(l, err, err_len)))
		return ret;
	return 0;
}
