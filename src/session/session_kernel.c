/* A session's long-lived kernel (docs/environments.md): a bash session
 * keeping its working directory, variables and functions, or a Python
 * kernel keeping its globals. The kernel's state lives in the session's
 * scratch, under .sandguard/, and each step is a fresh process that loads
 * it, runs the step's code and saves it back. So every step is enforced
 * and booked as its own run, a step killed at its deadline leaves the
 * state of the last step that ended, and a fork copies the state with
 * the files. */
#include <errno.h>
#include <string.h>
#include "session_files.h"
#include "session_kernel.h"

extern const char session_kernel_py_start[], session_kernel_py_end[];

#define STATE_DIR "/.sandguard"

/* Variables bash keeps for itself (read-only, or meaningless in another
 * process) are not carried from one step to the next. Only builtins: the
 * kernel execs nothing the policy's exec.allow must name. A step killed
 * while it saves leaves a partial bash-env; the next step loads what
 * parses. */
static const char bash_kernel[] =
	"S=\"$HOME\"" STATE_DIR "\n"
	"__sg_save() {\n"
	"  pwd > \"$S/bash-cwd\"\n"
	"  { declare -f; for __sg_v in $(compgen -v); do\n"
	"      case $__sg_v in BASH*|EUID|PPID|UID|GROUPS|FUNCNAME|PIPESTATUS|SHELLOPTS|SHLVL|"
	"RANDOM|SRANDOM|SECONDS|LINENO|HISTCMD|EPOCH*|_|__sg_v|S|COMP*|DIRSTACK|OPTIND|OPTERR|"
	"PWD|OLDPWD|IFS|PS4|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE) continue;; esac\n"
	"      declare -p \"$__sg_v\" 2>/dev/null; done; } > \"$S/bash-env\"\n"
	"}\n"
	"[ -f \"$S/bash-env\" ] && . \"$S/bash-env\" 2>/dev/null\n"
	"[ -f \"$S/bash-cwd\" ] && { cd \"$(< \"$S/bash-cwd\")\" 2>/dev/null || cd \"$HOME\"; }\n"
	"trap __sg_save EXIT\n"
	". \"$S/cell\"\n";

static char *const bash_argv[] = { "bash", ".sandguard/bash-kernel.sh", NULL };
static char *const python_argv[] = { "python3", "-u", ".sandguard/kernel.py", NULL };

int session_kernel_from_name(const char *name)
{
	if (!name || !strcmp(name, "none"))
		return SESSION_KERNEL_NONE;
	if (!strcmp(name, "bash"))
		return SESSION_KERNEL_BASH;
	if (!strcmp(name, "python"))
		return SESSION_KERNEL_PYTHON;
	return -1;
}

const char *session_kernel_name(enum session_kernel k)
{
	return k == SESSION_KERNEL_BASH ? "bash" : k == SESSION_KERNEL_PYTHON ? "python" : "none";
}

int session_kernel_install(int scratch, enum session_kernel k, uid_t uid)
{
	if (k == SESSION_KERNEL_BASH)
		return session_file_put(scratch, ".sandguard/bash-kernel.sh", bash_kernel,
					sizeof(bash_kernel) - 1, 0644, uid);
	if (k == SESSION_KERNEL_PYTHON)
		return session_file_put(scratch, ".sandguard/kernel.py", session_kernel_py_start,
					(size_t)(session_kernel_py_end - session_kernel_py_start),
					0644, uid);
	return 0;
}

int session_kernel_cell(int scratch, const char *code, size_t len, uid_t uid)
{
	return session_file_put(scratch, ".sandguard/cell", code, len, 0644, uid);
}

char *const *session_kernel_argv(enum session_kernel k)
{
	return k == SESSION_KERNEL_BASH     ? bash_argv
	       : k == SESSION_KERNEL_PYTHON ? python_argv
					    : NULL;
}
