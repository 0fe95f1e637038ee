/* The languages of /run_code: what each one runs, in one sandbox
 * (interpreted) or two (compiled: the compiler, then the program), and
 * every program it execs, so that a request is refused up front (400)
 * when the tenant's exec.allow would not let it run, instead of being
 * killed by the agent half-way and booked as a violation.
 *
 * The sandbox's environment is fixed (PATH, LANG, HOME=<scratch>); a
 * toolchain that needs a variable gets it from /usr/bin/env in front of
 * it, and the JVM and Go are told the sandbox's memory and cores, which
 * they cannot see (their cgroup is outside Landlock's read paths):
 *
 *   python  [env PYTHONPATH=/usr/lib/sandguard/python3-runtime] python3 main.py
 *           (env: where the node has that directory and the tenant's
 *           exec.allow allows env; see serve_lang_find.c)
 *   bash    bash main.sh
 *   nodejs  [env NODE_PATH=/usr/share/nodejs] node --max-old-space-size=<3/4 mem>
 *           main.js
 *   cpp     g++ -std=c++17 -O2 -save-temps -o main main.cpp; <ld.so> ./main
 *   rust    env TMPDIR=. rustc -O -C strip=debuginfo -C linker=<cc> -o main main.rs;
 *           <ld.so> ./main
 *   go      env GOMAXPROCS=<cores> TMPDIR=. go build -p <cores> -ldflags=-s -w
 *           -o main main.go sandguard_dynamic.go (settings from
 *           $HOME/.config/go/env);
 *           env GOMAXPROCS=<cores> GOMEMLIMIT=<9/10 mem> <ld.so> ./main
 *   java    java <jvm> SandguardJavac.java (javac and jar in one JVM:
 *           Main.java -> main.jar); java <jvm> -ea -cp main.jar[:<jars>] Main
 *           (<jars>: the node's library jars, also javac's class path)
 *
 * -save-temps and TMPDIR=.: the sandbox may write nowhere but its scratch,
 * and gcc, collect2, rustc and go put temporary files in /tmp otherwise.
 * The compiled program comes back through the policy's output cap
 * (output_bytes): hence no debug information in Rust and Go programs.
 *
 * Compiled programs run through the dynamic loader, "<ld.so> ./main", not
 * by exec'ing ./main: the agent allows execs by the identity of files it
 * saw when the policy loaded, and a binary compiled a moment ago cannot be
 * among them. The run step's scratch lets the loader map the program
 * (allow_exec_in_scratch); an exec of ./main is still a violation of the
 * agent's exec rule. So the tenant's exec.allow must name the compiler's
 * programs and the loader.
 * Allowing the loader lets that tenant's code run any native code it
 * writes; for a C++, Rust or Go tenant that is the point, for a
 * python-only tenant it is a reason to leave those languages off its
 * policy. See
 * docs/trainer-integration.md for each language's exec and read paths. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve_internal.h"

#define JAVA_HELPER  "SandguardJavac.java"
#define GO_ENV_FILE  ".config/go/env"
#define GO_DYNAMIC   "sandguard_dynamic.go"
#define JAVA_CLASSES "classes"

/* Compiles Main.java with the JDK's own javac and jar, in one JVM, into
 * main.jar: javac writes one class file per class (Main$1.class, ...),
 * and the run's sandbox gets exactly the files we name, so they travel
 * as one jar. Run with the source launcher: no class file to install.
 * javac gets the launcher's class path (the node's library jars). */
static const char java_helper[] =
	"import java.util.spi.ToolProvider;\n"
	"\n"
	"class SandguardJavac {\n"
	"    public static void main(String[] args) {\n"
	"        int rc = ToolProvider.findFirst(\"javac\").orElseThrow().run(System.out,\n"
	"            System.err, \"-d\", \"" JAVA_CLASSES "\", \"-encoding\", \"UTF-8\",\n"
	"            \"-cp\", System.getProperty(\"java.class.path\"), \"Main.java\");\n"
	"        if (rc == 0)\n"
	"            rc = ToolProvider.findFirst(\"jar\").orElseThrow().run(System.out,\n"
	"                System.err, \"--create\", \"--file\", \"main.jar\", \"-C\", \"" JAVA_CLASSES
	"\", \".\");\n"
	"        System.exit(rc);\n"
	"    }\n"
	"}\n";

/* No module downloads (no network anyway); -buildvcs=false: never exec
 * git. cgo stays on for go_dynamic below, which the linker handles itself
 * (Debian ships runtime/cgo compiled): only a program of its own with
 * `import "C"` would exec gcc, which exec.allow refuses. */
static const char go_env[] = "CGO_ENABLED=1\nGOPROXY=off\nGOFLAGS=-buildvcs=false\n";

/* Makes the program dynamically linked. The loader runs a dynamically
 * linked program itself, but re-executes a static one (what Go builds by
 * default), and an exec from the scratch is refused (Landlock). */
static const char go_dynamic[] = "package main\n\nimport _ \"runtime/cgo\"\n";

struct lang_def {
	const char *name;
	const char *alias; /* SandboxFusion's other name, or NULL */
	const char *source;
	const char *artifact; /* NULL: interpreted */
	/* The least output_bytes that holds the compiled program of a small
	 * solution (Go's runtime alone is 1.3 MB): below it every request
	 * would fail, so it is refused up front. */
	uint64_t min_output_bytes;
};

static const struct lang_def langs[LANG__COUNT] = {
	[LANG_PYTHON] = { "python", NULL, "main.py", NULL, 0 },
	[LANG_CPP] = { "cpp", NULL, "main.cpp", "main", 0 },
	[LANG_JAVA] = { "java", NULL, "Main.java", "main.jar", 0 },
	[LANG_NODEJS] = { "nodejs", "js", "main.js", NULL, 0 },
	[LANG_GO] = { "go", NULL, "main.go", "main", 2u << 20 },
	[LANG_RUST] = { "rust", NULL, "main.rs", "main", 0 },
	[LANG_BASH] = { "bash", NULL, "main.sh", NULL, 0 },
};

const char *serve_lang_name(enum serve_lang_id id)
{
	return (unsigned)id < LANG__COUNT ? langs[id].name : "?";
}

const char *serve_lang_source(enum serve_lang_id id)
{
	return langs[id].source;
}

uint64_t serve_lang_min_output(enum serve_lang_id id)
{
	return langs[id].min_output_bytes;
}

bool serve_lang_compiled(enum serve_lang_id id)
{
	return langs[id].artifact != NULL;
}

int serve_lang_lookup(const char *name)
{
	for (int i = 0; name && i < LANG__COUNT; i++)
		if (!strcmp(name, langs[i].name) ||
		    (langs[i].alias && !strcmp(name, langs[i].alias)))
			return i;
	return -1;
}

size_t serve_lang_paths(enum serve_lang_id id, const char *paths[SERVE_LANG_PATHS])
{
	const struct lang_def *d = &langs[id];
	size_t n = 0;

	paths[n++] = d->source;
	if (d->artifact)
		paths[n++] = d->artifact;
	if (id == LANG_JAVA) {
		paths[n++] = JAVA_HELPER;
		paths[n++] = JAVA_CLASSES;
	}
	if (id == LANG_GO) {
		paths[n++] = GO_ENV_FILE;
		paths[n++] = GO_DYNAMIC;
	}
	return n;
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

/* ---- one request's steps ---------------------------------------------- */

/* argv[0..] = the arguments up to NULL (at most SERVE_LANG_ARGV - 1). */
static void argv_set(char **argv, ...)
{
	va_list ap;
	int n = 0;
	char *a;

	va_start(ap, argv);
	while ((a = va_arg(ap, char *)) && n < SERVE_LANG_ARGV - 1)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
}

/* printf into the plan's next text slot. */
static char *text(struct lang_plan *p, int *slot, const char *fmt, unsigned long long v)
{
	char *s = p->text[(*slot)++];

	snprintf(s, sizeof(p->text[0]), fmt, v);
	return s;
}

int serve_lang_python(const struct serve_langs *l, const struct sg_policy *policy, char **argv)
{
	int n = 0;

	if (l->python_path[0] && (!policy || serve_exec_allowed(policy, l->env))) {
		argv[n++] = (char *)l->env;
		argv[n++] = (char *)l->python_path;
	}
	argv[n++] = (char *)l->python;
	return n;
}

void serve_lang_plan(const struct serve_langs *l, enum serve_lang_id id,
		     const struct sg_policy *policy, uint64_t memory_mb, unsigned cpus,
		     struct lang_plan *p)
{
	uint64_t heap_mb = memory_mb * 3 / 4 ? memory_mb * 3 / 4 : 1;
	uint64_t go_limit_mb = memory_mb * 9 / 10 ? memory_mb * 9 / 10 : 1;
	char *procs, *xmx, *ncpu, *heap;
	int slot = 0;

	memset(p, 0, sizeof(*p));
	p->source = langs[id].source;
	p->artifact = langs[id].artifact;
	p->artifact_mode = 0755;
	cpus = cpus ? cpus : 1;
	switch (id) {
	case LANG_PYTHON:
		p->run[serve_lang_python(l, policy, p->run)] = "main.py";
		break;
	case LANG_BASH:
		argv_set(p->run, l->bash, "main.sh", NULL);
		break;
	case LANG_NODEJS:
		heap = text(p, &slot, "--max-old-space-size=%llu", heap_mb);
		if (l->node_path[0])
			argv_set(p->run, l->env, l->node_path, l->node, heap, "main.js", NULL);
		else
			argv_set(p->run, l->node, heap, "main.js", NULL);
		break;
	case LANG_CPP:
		argv_set(p->compile, l->cxx, "-std=c++17", "-O2", "-save-temps", "-o", "main",
			 "main.cpp", NULL);
		argv_set(p->run, l->loader, "./main", NULL);
		break;
	case LANG_RUST:
		/* The linker by its real path: /usr/bin/cc is a link through
		 * /etc/alternatives, which the sandbox need not see. */
		snprintf(p->linker, sizeof(p->linker), "linker=%s", l->cc);
		argv_set(p->compile, l->env, "TMPDIR=.", l->rustc, "-O", "-C", "strip=debuginfo",
			 "-C", p->linker, "-o", "main", "main.rs", NULL);
		argv_set(p->run, l->loader, "./main", NULL);
		break;
	case LANG_GO:
		procs = text(p, &slot, "GOMAXPROCS=%llu", cpus);
		ncpu = text(p, &slot, "%llu", cpus);
		argv_set(p->compile, l->env, procs, "TMPDIR=.", l->go, "build", "-p", ncpu,
			 "-ldflags=-s -w", "-o", "main", "main.go", GO_DYNAMIC, NULL);
		argv_set(p->run, l->env, procs, text(p, &slot, "GOMEMLIMIT=%lluMiB", go_limit_mb),
			 l->loader, "./main", NULL);
		p->setup[p->n_setup++] = (struct sandbox_file){
			.path = GO_ENV_FILE, .data = go_env, .len = sizeof(go_env) - 1, .mode = 0644
		};
		p->setup[p->n_setup++] = (struct sandbox_file){ .path = GO_DYNAMIC,
								.data = go_dynamic,
								.len = sizeof(go_dynamic) - 1,
								.mode = 0644 };
		break;
	case LANG_JAVA:
		/* The JVM sizes its heap, GC and compiler threads from the
		 * machine it sees, not the sandbox; SerialGC keeps the thread
		 * count small. No /tmp/hsperfdata, and temporary files (jar
		 * writes one) in the scratch: /tmp is not writable here. */
		procs = text(p, &slot, "-XX:ActiveProcessorCount=%llu", cpus);
		xmx = text(p, &slot, "-Xmx%llum", heap_mb);
		/* The node's library jars on both steps' class path. */
		snprintf(p->classpath, sizeof(p->classpath), "main.jar%s%s",
			 l->java_libs[0] ? ":" : "", l->java_libs);
		argv_set(p->compile, l->java, "-XX:+UseSerialGC", "-XX:-UsePerfData", procs, xmx,
			 "-Djava.io.tmpdir=.", "-XX:TieredStopAtLevel=1", "-cp",
			 l->java_libs[0] ? l->java_libs : ".", JAVA_HELPER, NULL);
		/* -ea as SandboxFusion: tests often check with assert */
		argv_set(p->run, l->java, "-XX:+UseSerialGC", "-XX:-UsePerfData", procs, xmx,
			 "-Djava.io.tmpdir=.", "-ea", "-cp", p->classpath, "Main", NULL);
		p->artifact_mode = 0644;
		p->setup[p->n_setup++] = (struct sandbox_file){ .path = JAVA_HELPER,
								.data = java_helper,
								.len = sizeof(java_helper) - 1,
								.mode = 0644 };
		break;
	default:
		break;
	}
}

int serve_langs_init(struct serve_langs *l, const char *list, char *err, size_t err_len)
{
	char buf[256], known[128] = "", *save = NULL;
	int ret;

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < LANG__COUNT; i++)
		snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
			 i ? ", " : "", langs[i].name);
	if (!list || strlen(list) >= sizeof(buf)) {
		snprintf(err, err_len, "--languages: expected a list such as \"python,cpp\"");
		return -EINVAL;
	}
	/* "all": every language, each of which must then be installed. */
	if (!strcmp(list, "all")) {
		known[0] = '\0';
		for (int i = 0; i < LANG__COUNT; i++)
			snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
				 i ? "," : "", langs[i].name);
		list = known;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		int id = serve_lang_lookup(name);

		if (id < 0) {
			snprintf(err, err_len, "--languages: unknown language \"%s\" (known: %s)",
				 name, known);
			return -EINVAL;
		}
		l->enabled[id] = true;
	}
	ret = -EINVAL;
	for (int i = 0; i < LANG__COUNT; i++) {
		if (!l->enabled[i])
			continue;
		ret = serve_lang_find(l, i, err, err_len);
		if (ret)
			return ret;
	}
	if (ret == -EINVAL)
		snprintf(err, err_len, "--languages: no language given");
	return ret;
}
