/* Finding each language's programs on this node, once at start: the
 * interpreter or compiler, every helper program it execs (so that
 * serve_lang_denied() can check them all against exec.allow), and the
 * dynamic loader that runs compiled programs. A language that is asked
 * for (--languages) and not installed stops the server with a message
 * naming the missing program and its Debian package. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/array_len.h"
#include "serve_internal.h"

#define PYTHON_PATH "/usr/bin/python3"
#define BASH_PATH   "/usr/bin/bash"
#define NODE_PATH   "/usr/bin/node"
#define JAVA_PATH   "/usr/bin/java"
#define CXX_PATH    "/usr/bin/g++"
#define CC_PATH     "/usr/bin/cc" /* what rustc links with */
#define RUSTC_PATH  "/usr/bin/rustc"
#define GO_PATH     "/usr/bin/go"
#define ENV_PATH    "/usr/bin/env"
/* Where Debian installs node modules (node-lodash, ...); Debian's own node
 * looks there, other builds of node only when NODE_PATH says so. */
#define NODE_MODULES "/usr/share/nodejs"
/* python's requests and its imports, extracted from Debian's packages by
 * scripts/install-deps.sh: not installed system-wide, where a host's
 * every python start would see them (serve_lang.c: PYTHONPATH). */
#define PYTHON_RUNTIME "/usr/lib/sandguard/python3-runtime"

/* Jars SandboxFusion's java image puts on the class path, as Debian
 * packages them (libjavatuples-java). */
static const char *const java_jars[] = { "/usr/share/java/javatuples.jar" };

/* The Debian package that provides a language's toolchain. */
static const char *const packages[LANG__COUNT] = {
	[LANG_PYTHON] = "python3", [LANG_CPP] = "g++",      [LANG_JAVA] = "openjdk-17-jdk-headless",
	[LANG_NODEJS] = "nodejs",  [LANG_GO] = "golang-go", [LANG_RUST] = "rustc",
	[LANG_BASH] = "bash",
};

/* Record a program the language execs, resolved (the agent judges the
 * file, whatever link named it); `out` (may be NULL) gets the path too. */
static int add_tool(struct serve_langs *l, enum serve_lang_id id, const char *path, char *out,
		    char *err, size_t err_len)
{
	char real[PATH_MAX];

	if (access(path, X_OK) || !realpath(path, real)) {
		snprintf(err, err_len, "language %s needs %s: %s (apt-get install %s)",
			 serve_lang_name(id), path, strerror(errno), packages[id]);
		return -ENOENT;
	}
	if (l->n_tools[id] == SERVE_LANG_TOOLS) {
		snprintf(err, err_len, "language %s: too many programs", serve_lang_name(id));
		return -EINVAL;
	}
	snprintf(l->tools[id][l->n_tools[id]++], PATH_MAX, "%s", real);
	if (out)
		snprintf(out, PATH_MAX, "%s", real);
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

static int add_loader(struct serve_langs *l, enum serve_lang_id id, char *err, size_t err_len)
{
	char path[PATH_MAX];
	int ret = own_loader(path, sizeof(path));

	if (ret) {
		snprintf(err, err_len, "language %s: cannot find the dynamic loader: %s",
			 serve_lang_name(id), strerror(-ret));
		return ret;
	}
	return add_tool(l, id, path, l->loader, err, err_len);
}

/* The first line `cmd` prints, without its newline; "" when none. */
static void first_line(const char *cmd, char *out, size_t len)
{
	FILE *f = popen(cmd, "re");

	out[0] = '\0';
	if (!f)
		return;
	if (!fgets(out, (int)len, f))
		out[0] = '\0';
	pclose(f);
	out[strcspn(out, "\n")] = '\0';
}

/* Where a gcc driver finds one of its programs: an absolute path from
 * -print-prog-name, or a bare name it looks up in PATH, which in the
 * sandbox is /usr/bin:/bin. */
static int driver_program(struct serve_langs *l, enum serve_lang_id id, const char *driver,
			  const char *prog, char *err, size_t err_len)
{
	char cmd[PATH_MAX + 64], line[PATH_MAX], path[PATH_MAX];

	snprintf(cmd, sizeof(cmd), "%s -print-prog-name=%s 2>/dev/null", driver, prog);
	first_line(cmd, line, sizeof(line));
	if (line[0] == '/')
		return add_tool(l, id, line, NULL, err, err_len);
	for (int i = 0; line[0] && !strchr(line, '/') && i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", i ? "/bin" : "/usr/bin", line);
		if (!access(path, X_OK))
			return add_tool(l, id, path, NULL, err, err_len);
	}
	snprintf(err, err_len, "language %s: %s cannot find its %s", serve_lang_name(id), driver,
		 prog);
	return -ENOENT;
}

static int find_cpp(struct serve_langs *l, char *err, size_t err_len)
{
	static const char *const helpers[] = { "cc1plus", "collect2", "as", "ld" };
	int ret = add_tool(l, LANG_CPP, CXX_PATH, l->cxx, err, err_len);

	for (size_t i = 0; !ret && i < ARRAY_LEN(helpers); i++)
		ret = driver_program(l, LANG_CPP, CXX_PATH, helpers[i], err, err_len);
	return ret ? ret : add_loader(l, LANG_CPP, err, err_len);
}

/* rustc compiles to objects itself and links with cc (collect2, ld). */
static int find_rust(struct serve_langs *l, char *err, size_t err_len)
{
	static const char *const helpers[] = { "collect2", "ld" };
	int ret = add_tool(l, LANG_RUST, ENV_PATH, l->env, err, err_len);

	if (!ret)
		ret = add_tool(l, LANG_RUST, RUSTC_PATH, l->rustc, err, err_len);
	if (!ret)
		ret = add_tool(l, LANG_RUST, CC_PATH, l->cc, err, err_len);
	for (size_t i = 0; !ret && i < ARRAY_LEN(helpers); i++)
		ret = driver_program(l, LANG_RUST, CC_PATH, helpers[i], err, err_len);
	return ret ? ret : add_loader(l, LANG_RUST, err, err_len);
}

/* go build execs its compile, asm, cgo and link tools from GOTOOLDIR. */
static int find_go(struct serve_langs *l, char *err, size_t err_len)
{
	static const char *const tools[] = { "compile", "asm", "cgo", "link" };
	char cmd[PATH_MAX + 32], dir[PATH_MAX], path[PATH_MAX];
	int ret = add_tool(l, LANG_GO, ENV_PATH, l->env, err, err_len);

	if (!ret)
		ret = add_tool(l, LANG_GO, GO_PATH, l->go, err, err_len);
	if (ret)
		return ret;
	snprintf(cmd, sizeof(cmd), "%s env GOTOOLDIR 2>/dev/null", l->go);
	first_line(cmd, dir, sizeof(dir));
	if (dir[0] != '/') {
		snprintf(err, err_len, "language go: '%s env GOTOOLDIR' names no directory", l->go);
		return -ENOENT;
	}
	for (size_t i = 0; !ret && i < ARRAY_LEN(tools); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, tools[i]);
		ret = add_tool(l, LANG_GO, path, NULL, err, err_len);
	}
	return ret ? ret : add_loader(l, LANG_GO, err, err_len);
}

/* The JDK's launcher, and the jars of java_jars[] this node has. */
static int find_java(struct serve_langs *l, char *err, size_t err_len)
{
	/* One program: the source launcher runs javac and jar in it. */
	int ret = add_tool(l, LANG_JAVA, JAVA_PATH, l->java, err, err_len);
	size_t len = 0;

	for (size_t i = 0; !ret && i < ARRAY_LEN(java_jars); i++) {
		if (access(java_jars[i], R_OK))
			continue;
		len += (size_t)snprintf(l->java_libs + len, sizeof(l->java_libs) - len, "%s%s",
					len ? ":" : "", java_jars[i]);
	}
	return ret;
}

/* python3, and /usr/bin/env to give it PYTHONPATH when the runtime
 * libraries are installed. env is not one of python's programs: a tenant
 * whose exec.allow has python3 alone still runs python, without them. */
static int find_python(struct serve_langs *l, char *err, size_t err_len)
{
	char env[PATH_MAX];
	int ret = add_tool(l, LANG_PYTHON, PYTHON_PATH, l->python, err, err_len);

	if (ret || access(PYTHON_RUNTIME, R_OK | X_OK) || access(ENV_PATH, X_OK) ||
	    !realpath(ENV_PATH, env))
		return ret;
	snprintf(l->env, sizeof(l->env), "%s", env);
	snprintf(l->python_path, sizeof(l->python_path), "PYTHONPATH=%s", PYTHON_RUNTIME);
	return 0;
}

/* node, and /usr/bin/env to give it NODE_PATH when Debian's node modules
 * are installed. */
static int find_node(struct serve_langs *l, char *err, size_t err_len)
{
	int ret = add_tool(l, LANG_NODEJS, NODE_PATH, l->node, err, err_len);

	if (ret || access(NODE_MODULES, R_OK | X_OK))
		return ret;
	snprintf(l->node_path, sizeof(l->node_path), "NODE_PATH=%s", NODE_MODULES);
	return add_tool(l, LANG_NODEJS, ENV_PATH, l->env, err, err_len);
}

int serve_lang_find(struct serve_langs *l, enum serve_lang_id id, char *err, size_t err_len)
{
	switch (id) {
	case LANG_PYTHON:
		return find_python(l, err, err_len);
	case LANG_BASH:
		return add_tool(l, id, BASH_PATH, l->bash, err, err_len);
	case LANG_NODEJS:
		return find_node(l, err, err_len);
	case LANG_JAVA:
		return find_java(l, err, err_len);
	case LANG_CPP:
		return find_cpp(l, err, err_len);
	case LANG_RUST:
		return find_rust(l, err, err_len);
	case LANG_GO:
		return find_go(l, err, err_len);
	default:
		snprintf(err, err_len, "no such language");
		return -EINVAL;
	}
}
