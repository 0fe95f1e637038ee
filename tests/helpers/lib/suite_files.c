/* The agent suite: files and execs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "abi/events.h"
#include "agent_suite.h"
#include "control/agent_client.h"
#include "control/pinned.h"
#include "lib/cgroup.h"

void test_files(void)
{
	struct at_sandbox sb;
	char link[PATH_MAX], scratch_file[PATH_MAX], outside[PATH_MAX + 32], locked[PATH_MAX + 32],
		flags[32];
	int st;

	/* A sandbox per case: in fallback mode a refused open kills the task. */
	if (at_sandbox_new(&env, "acme", &sb))
		return at_result(false, "files: sandbox", "cannot create/register a sandbox");
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = "/etc/hostname", .flags = O_RDONLY });
	at_result(refused(st), "files: open /etc/hostname is refused", "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, lsm ? "\"file_denied\"" : "\"file_tripped\"",
				"/etc/hostname", NULL),
		  "files: the refusal is evented with the resolved path", "no event");
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .cwd = sb.scratch,
					.path = "../../../../../../../../../etc/hostname",
					.flags = O_RDONLY });
	at_result(refused(st), "files: relative ../ path to /etc/hostname is refused", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(link, sizeof(link), "%s/link", sb.scratch);
	if (symlink("/etc/hostname", link))
		at_result(false, "files: symlink", "cannot create %s", link);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .cwd = sb.scratch, .path = "link", .flags = O_RDONLY });
	at_result(refused(st), "files: a symlink in scratch to /etc/hostname is refused", "%s",
		  describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "/etc/hostname", NULL),
		  "files: the symlink's target (not the link) is in the event",
		  "no event naming /etc/hostname");
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(scratch_file, sizeof(scratch_file), "%s/out.txt", sb.scratch);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = scratch_file, .flags = O_WRONLY | O_CREAT });
	at_result(returned(st, 0),
		  "files: scratch is writable (a file created after the policy loaded)", "%s",
		  describe(st));
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_RDONLY });
	at_result(returned(st, 0), "files: the read-only allowlist is readable", "%s",
		  describe(st));
	st = run_in(&sb, child_open, &(struct open_arg){ .path = ro_file, .flags = O_WRONLY });
	at_result(refused(st), "files: the read-only allowlist is not writable", "%s",
		  describe(st));
	at_sandbox_free(&sb);

	/* A write outside the scratch is reported as a write, with its flags. */
	at_sandbox_new(&env, "acme", &sb);
	snprintf(outside, sizeof(outside), "%s/created-outside", env.dir);
	st = run_in(&sb, child_open,
		    &(struct open_arg){ .path = outside, .flags = O_WRONLY | O_CREAT });
	at_result(refused(st), "files: an O_CREAT|O_WRONLY open outside the scratch is refused",
		  "%s", describe(st));
	at_result(at_event_seen(&env, 3000, sb.name, "created-outside", "\"write\":true", NULL),
		  "files: ... and evented as a write", "no event with write true");
	at_sandbox_free(&sb);
	if (!lsm) {
		/* Refused before the agent saw a file (here by DAC; the
		 * executor's Landlock in production): the request's flags. */
		at_sandbox_new(&env, "acme", &sb);
		snprintf(locked, sizeof(locked), "%s/locked", env.dir);
		close(open(locked, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
		st = run_in(&sb, child_open,
			    &(struct open_arg){
				    .path = locked, .flags = O_WRONLY | O_CREAT, .uid = 65534 });
		snprintf(flags, sizeof(flags), "\"flags\":%d", O_WRONLY | O_CREAT);
		at_result(returned(st, EACCES) &&
				  at_event_seen(&env, 3000, sb.name, "\"file_denied\"", "locked",
						"\"requested\":true", "\"write\":true", flags,
						NULL),
			  "files: an open another layer refused is evented as the write it asked",
			  "%s, or no event with write true and %s", describe(st), flags);
		at_sandbox_free(&sb);
	}

	at_sandbox_new(&env, "acme", &sb);
	st = run_in(&sb, child_uring_open, "/etc/hostname");
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) >= 200)
		at_skipped("files: io_uring openat",
			   "io_uring unavailable here (setup failed, code %d)", WEXITSTATUS(st));
	else if (lsm)
		at_result(returned(st, EACCES),
			  "files: io_uring openat of /etc/hostname gets EACCES", "%s",
			  describe(st));
	else
		at_skipped("files: io_uring openat",
			   "fallback mode does not see io_uring opens (%s); "
			   "the executor's seccomp filter blocks io_uring, LSM mode refuses them",
			   describe(st));
	at_sandbox_free(&sb);
}

void test_exec(void)
{
	struct at_sandbox sb;
	char marker[PATH_MAX], filename[PATH_MAX + 16];
	int st;

	at_sandbox_new(&env, "acme", &sb);
	snprintf(marker, sizeof(marker), "%s/allowed-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ busybox, marker });
	at_result(returned(st, 0) && access(marker, F_OK) == 0, "exec: an allowlisted exec runs",
		  "%s", describe(st));
	snprintf(filename, sizeof(filename), "\"filename\":\"%s\"", busybox);
	at_result(at_event_seen(&env, 3000, sb.name, "\"type\":\"exec\"", filename, "\"touch\"",
				NULL),
		  "exec: evented with filename and argv", "no exec event with %s", filename);
	at_sandbox_free(&sb);

	at_sandbox_new(&env, "acme", &sb);
	snprintf(marker, sizeof(marker), "%s/forbidden-ran", sb.scratch);
	st = run_in(&sb, child_exec, &(struct exec_arg){ forbidden_exe, marker });
	at_result(refused(st) && access(marker, F_OK) != 0,
		  lsm ? "exec: a disallowed exec fails at bprm_check with EACCES"
		      : "exec: a disallowed exec is killed before any of its code runs",
		  "%s, marker %s", describe(st), access(marker, F_OK) ? "absent" : "PRESENT");
	at_result(at_event_seen(&env, 3000, sb.name, "\"exec_denied\"",
				lsm ? "\"mode\":\"lsm\"" : "\"mode\":\"fallback\"", NULL),
		  "exec: the refusal is evented with the mode that refused it", "no event");
	at_sandbox_free(&sb);
}

