#!/usr/bin/env python3
"""A hostile tenant against environments' sessions (docs/environments.md,
"Threat model of a long-lived sandbox"): model-written code in steps, and a
client of the HTTP API, with the agent enforcing. Each case is an attack
that must be stopped, and asserts the outcome on the host: root's writes
and reads stay in the session's scratch (put, get, a kernel's code, fork),
no process outlives its step, CPU run by a daemonized process is the
step's, another run's session stays out of reach, and racing calls leave
one final record per session and a live server."""
import importlib
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import sgagent  # noqa: E402
from sgagent import report  # noqa: E402
from sgserve import can_run  # noqa: E402

sessions = importlib.import_module("66-sessions")
Serve, policy, session_records = sessions.Serve, sessions.policy, sessions.session_records
sys.path.insert(0, os.path.join(sgagent.SRC, "clients", "python"))
from sandguard.session import Session, SessionError  # noqa: E402

TENANT = "envt"
SECRET = b"host secret, root's only\n"


def host_targets(agent):
    """A host directory and a root-owned file a planted link points at."""
    d = os.path.join(agent.dir, "host-target")
    os.makedirs(d, exist_ok=True)
    victim = os.path.join(d, "victim")
    with open(victim, "wb") as f:
        f.write(SECRET)
    os.chmod(victim, 0o600)
    return d, victim


def untouched(d, victim):
    """None when the host directory holds only the victim, unchanged."""
    if sorted(os.listdir(d)) != ["victim"]:
        return "root wrote into the host directory: %r" % os.listdir(d)
    with open(victim, "rb") as f:
        if f.read() != SECRET:
            return "root overwrote the host file %s" % victim
    return None


# Move `path` aside and put a symbolic link to `target` in its place.
PY_LINK = ("python3 -c \"import os\n"
           "p, t = '%s', '%s'\n"
           "os.rename(p, p + '.old') if os.path.lexists(p) else None\n"
           "os.symlink(t, p)\"")


def plant(s, d, victim):
    """Links to the host, a FIFO, a hard link and a directory link, from a step."""
    r = s.run("python3 -c \"import os\n"
              "os.symlink('%s', 'dirlink')\n"
              "os.symlink('%s', 'filelink')\n"
              "os.mkfifo('fifo')\n"
              "open('own', 'w').write('mine')\n"
              "os.link('own', 'hard')\n"
              "os.makedirs('sub', exist_ok=True)\n"
              "os.symlink('/', 'sub/root')\"" % (d, victim))
    return None if r["status"] == "ok" else "planting links: %r" % r


def planted(agent, serve):
    """A new session with plant()'s links in its scratch: (s, d, victim, why)."""
    d, victim = host_targets(agent)
    s = Session(serve.url, tenant=TENANT)
    return s, d, victim, plant(s, d, victim)


def case_put_through_links(agent, serve):
    s, d, victim, why = planted(agent, serve)
    try:
        if why:
            return why
        for path in ("dirlink/new", "sub/root%s/new" % d, "fifo"):
            try:
                s.write(path, b"owned by root")
            except SessionError:
                pass  # refused: what matters is the host
        s.write("filelink", b"replaced")   # the link itself is replaced, never followed
        why = untouched(d, victim)
        if why:
            return why
        r = s.run("test -L filelink || cat filelink")
        if r["stdout"] != "replaced":
            return "put over a link: the session sees %r" % r["stdout"]
    finally:
        s.close()
    return None


def case_get_through_links(agent, serve):
    s, d, victim, why = planted(agent, serve)
    try:
        if why:
            return why
        for path in ("filelink", "dirlink/victim", "sub/root%s" % victim, "fifo", "sub/root/etc/shadow"):
            got = s.read(path)
            if got is not None:
                return "get %s returned %d bytes of the host" % (path, len(got))
        if s.read("hard") != b"mine":
            return "get of the tenant's own hard link failed"
    finally:
        s.close()
    return None


def case_kernel_files(agent, serve):
    """The kernel's state directory and its cell, swapped for links to the host."""
    d, victim = host_targets(agent)
    s = Session(serve.url, tenant=TENANT, kernel="bash")
    try:
        s.code("true")
        r = s.run(PY_LINK % (".sandguard/cell", victim))
        if r["status"] != "ok":
            return "planting the cell link: %r" % r
        s.code("echo hi")
        why = untouched(d, victim)
        if why:
            return "through .sandguard/cell: " + why
        r = s.run(PY_LINK % (".sandguard", d))
        if r["status"] != "ok":
            return "planting the state link: %r" % r
        try:
            s.code("echo hi")
        except SessionError:
            pass
        why = untouched(d, victim)
        if why:
            return "through .sandguard: " + why
    finally:
        s.close()
    return None


def case_fork_copies_links(agent, serve):
    """A fork copies links as links (root never follows one into the host),
    a FIFO not at all; then neither get nor put in the fork reaches the host."""
    d, victim = host_targets(agent)
    s = Session(serve.url, tenant=TENANT, kernel="bash")
    try:
        why = plant(s, d, victim)
        if why:
            return why
        s.run(PY_LINK % (".sandguard/cell", victim))
        kid = s.fork(1)[0]
        try:
            if kid.read("filelink") is not None or kid.read("dirlink/victim") is not None:
                return "the fork's get read the host"
            r = kid.run("test -L filelink && test -L dirlink && test ! -e fifo && echo links")
            if r["stdout"].strip() != "links":
                return "the fork's copy of links and the FIFO: %r" % r
            kid.code("echo in-the-fork")
            try:
                kid.write("dirlink/new", b"x")
            except SessionError:
                pass
        finally:
            kid.close()
        why = untouched(d, victim)
        if why:
            return why
    finally:
        s.close()
    return None


def procs_of_uid(uid):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as f:
                for ln in f:
                    if ln.startswith("Uid:") and int(ln.split()[1]) == uid:
                        out.append(int(pid))
        except OSError:
            pass
    return out


DAEMON = ("import os, sys, time\n"
          "if os.fork(): sys.exit(0)\n"
          "os.setsid()\n"
          "if os.fork(): os._exit(0)\n"
          "for fd in (0, 1, 2): os.close(fd)\n"
          "while True:\n"
          "    open('beat', 'a').write('x')\n"
          "    time.sleep(0.05)\n")


def case_daemon_outlives_step(agent, serve):
    """A double-forked, setsid daemon: gone at the step's end, on the host
    (no process of the session's uid but its init), and nothing it does
    reaches the next step."""
    s = Session(serve.url, tenant=TENANT, files={"d.py": DAEMON})
    try:
        r = s.run("python3 d.py; sleep 0.3; echo started")
        if r["status"] != "ok":
            return "the daemon step: %r" % r
        uid = int(s.run("python3 -c 'import os; print(os.getuid())'")["stdout"])
        time.sleep(0.3)
        pids = procs_of_uid(uid)
        # Between steps nothing runs as the slot uid (the init is not its).
        if pids:
            return "processes of the session's uid %d after its step: %r" % (uid, pids)
        n1 = len(s.read("beat") or b"")
        time.sleep(0.5)
        n2 = len(s.read("beat") or b"")
        if n2 != n1:
            return "the daemon still writes between steps (%d -> %d)" % (n1, n2)
        r = s.run("echo next")
        if r["session_ended"] or r["stdout"] != "next\n":
            return "the session after a daemon: %r" % r
    finally:
        s.close()
    return None


def case_cpu_of_daemon(agent, serve):
    """CPU burnt by a process that left the step's process tree is the step's."""
    burn = ("import os, sys, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork(): os._exit(0)\n"
            "    t = time.process_time()\n"
            "    while time.process_time() - t < 1.0: pass\n"
            "    open('done', 'w').write('burnt')\n"
            "    os._exit(0)\n"
            "os.wait()\n"
            "while not os.path.exists('done'):\n"
            "    time.sleep(0.05)\n")
    s = Session(serve.url, tenant=TENANT, files={"burn.py": burn})
    try:
        r = s.run("python3 burn.py")
        if r["status"] != "ok":
            return "the burn step: %r" % r
        if r["cpu_s"] < 0.8:
            return "a daemonized process's CPU escaped the step's accounting: cpu_s %r" % r["cpu_s"]
    finally:
        s.close()
    return None


def case_fork_sibling_ids(agent, serve):
    """A fork's sessions are its run's: another run sees none of them."""
    s = Session(serve.url, tenant=TENANT, run_id="run-p")
    try:
        kids = s.fork(2)
        other = Session.list(serve.url, tenant=TENANT, run_id="run-q")
        if any(x["session"] in [k.id for k in kids] + [s.id] for x in other):
            return "another run lists the forks"
        for k in kids:
            try:
                Session.attach(serve.url, k.id, tenant=TENANT, run_id="run-q").run("true")
                return "another run ran a step in a fork"
            except SessionError as e:
                if e.status != 404:
                    return "another run on a fork: %s" % e
        kids[0].write("mine", b"first")
        if kids[1].read("mine") is not None or s.read("mine") is not None:
            return "a fork's put reached its sibling or its parent"
        for k in kids:
            k.close()
    finally:
        s.close()
    return None


def case_racing_calls(agent, serve):
    """exec, fork, put, get and close of one session at once, from many
    clients: each answered (no 5xx), the session ended once, its forks
    closed, and the server alive."""
    s = Session(serve.url, tenant=TENANT, run_id="run-race")
    errors = []

    def call(fn):
        try:
            fn()
        except SessionError as e:
            if e.status >= 500:
                errors.append(str(e))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    kids = []
    calls = [lambda: s.run("sleep 0.5"), lambda: kids.extend(s.fork(2)), lambda: s.write("f", b"x"),
             lambda: s.read("f"), lambda: s.run("true"), s.close, s.close]
    threads = [threading.Thread(target=call, args=(fn,)) for fn in calls * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k in kids:
        k.close()
    if errors:
        return "racing calls: %r" % errors
    finals = [r for r in session_records(agent, s.id) if r["final"]]
    if len(finals) != 1:
        return "%d final records after racing closes" % len(finals)
    if Session.list(serve.url, tenant=TENANT, run_id="run-race"):
        return "sessions left after the race"
    return None


def case_signal_init(agent, serve):
    """A step signals the sandbox's init (pid 1 of its namespace) to end the
    session as the platform's fault: refused, the session lives on, its end
    is the client's close."""
    s = Session(serve.url, tenant=TENANT)
    try:
        for sig in ("KILL", "TERM", "SEGV", "STOP"):
            r = s.run("kill -%s 1; echo rc=$?" % sig)
            if r["stdout"].strip() != "rc=1" or r["session_ended"]:
                return "kill -%s 1: %r" % (sig, r)
        r = s.run("echo alive")
        if r["stdout"] != "alive\n" or r["session_ended"]:
            return "the session after signalling its init: %r" % r
    finally:
        s.close()
    finals = [r for r in session_records(agent, s.id) if r["final"]]
    if [(f["cause"], f.get("session_end")) for f in finals] != [("ok", "closed")]:
        return "the final record: %r" % finals
    return None


ESCAPES = ("import ctypes\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "print('io_uring_setup', libc.syscall(425, 8, ctypes.create_string_buffer(120)))\n"
           "print('unshare', libc.unshare(0x10020000))\n"
           "print('ptrace', libc.ptrace(16, 1, 0, 0))\n")


def host_mounts():
    with open("/proc/self/mountinfo") as f:
        return f.read()


def case_escape_calls(agent, serve):
    """io_uring (workers outside the step's accounting), a user and mount
    namespace (mounts in the scratch) and ptrace of the init are refused;
    the host's mount table is unchanged."""
    before = host_mounts()
    s = Session(serve.url, tenant=TENANT, files={"esc.py": ESCAPES})
    try:
        r = s.run("python3 esc.py")
        want = "io_uring_setup -1\nunshare -1\nptrace -1\n"
        if r["stdout"] != want:
            return "escape calls from a step: %r" % r
        # Other executors' scratches come and go (a shared machine): only a
        # mount that is not a sandguard scratch, or is one under ours, counts.
        mine = [ln for ln in host_mounts().splitlines() if ln not in before and agent.scratch not in ln
                and " - tmpfs sandguard-scratch " not in ln]
        if mine:
            return "new host mounts after the step: %r" % mine
    finally:
        s.close()
    return None


def case_deep_tree_close(agent, serve):
    """A 2000-deep tree (put makes each directory): the close removes the
    scratch on the host, the server lives on."""
    s = Session(serve.url, tenant=TENANT)
    sandbox = s.info()["sandbox"]
    try:
        s.write("/".join(["d"] * 2000) + "/f", b"deep")
        if s.read("/".join(["d"] * 2000) + "/f") != b"deep":
            return "the deep file does not read back"
    finally:
        s.close()
    if os.path.exists(os.path.join(agent.scratch, TENANT, sandbox)):
        return "the deep scratch is left on the host"
    finals = [r for r in session_records(agent, s.id) if r["final"]]
    if [f.get("session_end") for f in finals] != ["closed"]:
        return "the final record: %r" % finals
    return None


def case_run_id_near_collision(agent, serve):
    """Two runs whose ids differ in their last (127th) character are two
    owners: neither lists nor reaches the other's session."""
    a, b = "r" * 126 + "A", "r" * 126 + "B"
    s = Session(serve.url, tenant=TENANT, run_id=a)
    try:
        if any(x["session"] == s.id for x in Session.list(serve.url, tenant=TENANT, run_id=b)):
            return "the other run lists the session"
        try:
            Session.attach(serve.url, s.id, tenant=TENANT, run_id=b).run("true")
            return "the other run ran a step in it"
        except SessionError as e:
            if e.status != 404:
                return "the other run: %s" % e
        if s.run("echo mine")["stdout"] != "mine\n":
            return "its own run cannot use it"
    finally:
        s.close()
    return None


def expect_refused(fn, statuses, what):
    """None when fn() raised a SessionError with one of statuses."""
    try:
        fn()
        return "%s was served" % what
    except SessionError as e:
        return None if e.status in statuses else "%s: %s" % (what, e)


def case_deep_fork(agent, serve):
    """A scratch deeper than a fork copies (256 levels) is refused as the
    request's (409), and the server lives; a 200-deep one is copied whole.
    (The copy once recursed on a server thread's 256 KiB stack: a 29-deep
    tree and a fork crashed serve for every tenant.)"""
    s = Session(serve.url, tenant=TENANT)
    try:
        s.run("python3 -c \"import os; os.makedirs('/'.join(['d'] * 300))\"")
        why = expect_refused(lambda: s.fork(1), (409,), "a fork of a 300-deep scratch")
        if why or serve.proc.poll() is not None:
            return why or "serve died"
        s.run("python3 -c \"import os, shutil; shutil.rmtree('d'); p = '/'.join(['e'] * 200); "
              "os.makedirs(p); open(p + '/f', 'w').write('deep')\"")
        kid = s.fork(1)[0]
        try:
            if kid.read("/".join(["e"] * 200) + "/f") != b"deep":
                return "the fork lacks the 200-deep file"
        finally:
            kid.close()
    finally:
        s.close()
    return None


def case_busy_past_lifetime(agent, serve):
    """A session kept busy does not outlive max_lifetime_s (3 s here): a
    call after it is a 410, the end is booked "lifetime", and no step ran
    past it."""
    s = Session(serve.url, tenant="envlife")
    start = time.monotonic()
    ended = None
    try:
        while time.monotonic() - start < 8:
            try:
                s.run("sleep 0.2")
            except SessionError as e:
                ended = e
                break
    finally:
        s.close()
    # 410 once it has ended; 409 for a call that found the reaper ending it.
    if not ended or ended.status not in (409, 410) or time.monotonic() - start > 5:
        return "steps went on for %.1f s: %r" % (time.monotonic() - start, ended)
    finals = [r for r in session_records(agent, s.id) if r["final"]]
    if [f.get("session_end") for f in finals] != ["lifetime"]:
        return "the final record: %r" % finals
    return None


def case_fork_keeps_budget(agent, serve):
    """A fork goes on with its parent's CPU used: burn, fork, close the
    parent, burn again, and the fork's session ends "cpu" (cpu_seconds 1)."""
    burn = "python3 -c \"import time; t = time.process_time()\nwhile time.process_time() - t < 0.7: pass\""
    s = Session(serve.url, tenant="envcpu")
    try:
        s.run(burn)
        kid = s.fork(1)[0]
    finally:
        s.close()
    try:
        r = kid.run(burn)
        if not r["session_ended"]:
            return "the fork's budget started over: %r" % r
    finally:
        kid.close()
    finals = [x for x in session_records(agent, kid.id) if x["final"]]
    if [f.get("session_end") for f in finals] != ["cpu"]:
        return "the fork's final record: %r" % finals
    return None


def case_create_files_are_the_requests(agent, serve):
    """Files that conflict are a 400 before anything is made; files larger
    than the scratch are a 507 and the session's end is booked nobody's
    fault ("closed"), never the platform's."""
    why = expect_refused(lambda: Session(serve.url, tenant=TENANT, files={"a": "x", "a/b": "y"}),
                         (400,), "files a and a/b")
    if why:
        return why
    before = len(sessions.sgjournal.read(agent.env["SANDGUARD_STATE_DIR"]))
    why = expect_refused(lambda: Session(serve.url, tenant="envsmall", files={"big": b"x" * (3 << 20)}),
                         (507,), "files past scratch_mb")
    if why:
        return why
    new = [r for r in sessions.sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])[before:]
           if r.get("mode") == "session"]
    if not new or any(r["class"] == "platform" for r in new):
        return "booked: %r" % [(r["cause"], r["class"], r.get("session_end")) for r in new]
    s = Session(serve.url, tenant=TENANT)
    try:
        s.run("echo x > afile")
        why = expect_refused(lambda: s.write("afile/x", "y"), (409,), "put under a file")
    finally:
        s.close()
    return why


def case_paused_makes_nothing(agent, serve):
    """A paused tenant gets no session with a setup, no fork (423)."""
    s = Session(serve.url, tenant="envpause")
    try:
        agent.run(["tenant", "pause", "envpause", "--reason", "attack test"])
        why = (expect_refused(lambda: Session(serve.url, tenant="envpause", setup="echo ran"), (423,),
                              "create with a setup while paused") or
               expect_refused(lambda: s.fork(2), (423,), "a fork while paused"))
        if why:
            return why
    finally:
        agent.run(["tenant", "resume", "envpause"])
        s.close()
    return None


def case_get_bounded(agent, serve):
    """One get holds a bounded amount: a path asked twice is a 400, a file
    past 16 MiB a 413."""
    s = Session(serve.url, tenant=TENANT)
    try:
        s.run("python3 -c \"open('big', 'wb').write(b'x' * 20971520)\"")
        why = (expect_refused(lambda: s._call("get", {"paths": ["big", "big"]}), (400,), "a path twice") or
               expect_refused(lambda: s.read("big"), (413,), "a 20 MiB file"))
    finally:
        s.close()
    return why


def case_missing_command(agent, serve):
    """A tool call whose argv names a program its exec rule allows but that
    is not there (/usr/bin/python3* allows /usr/bin/python3-none): the
    step's answer is a shell's: status error, exit 127 and "command not
    found" on its stderr, cause ok, and the session goes on. It was booked a
    platform_error, the sandbox broken: a model could turn any failing
    step into the platform's, retried and blamed on nobody."""
    s = Session(serve.url, tenant=TENANT)
    try:
        r = s.exec_argv(["/usr/bin/python3-none", "-c", "1"])
        if r.get("status") != "error" or r.get("cause") != "ok" or r.get("exit_code") != 127 \
                or r.get("session_ended") or "command not found" not in r.get("stderr", ""):
            return "a missing allowed command: %r" % r
        r = s.run("echo next")
        if r.get("session_ended") or r.get("stdout") != "next\n":
            return "the step after it: %r" % r
    finally:
        s.close()
    bad = [o for o in session_records(agent, s.id) if o.get("cause") == "platform_error"]
    return "booked platform_error: %r" % bad if bad else None


CASES = [
    ("put through planted links, a FIFO, a dir link: nothing of the host written", case_put_through_links),
    ("get through planted links and a FIFO: nothing of the host read", case_get_through_links),
    ("the kernel's cell and state dir swapped for host links", case_kernel_files),
    ("fork copies links as links; the fork reaches no host file", case_fork_copies_links),
    ("a double-forked setsid daemon ends with its step", case_daemon_outlives_step),
    ("a daemonized process's CPU is its step's", case_cpu_of_daemon),
    ("forks are invisible to another run", case_fork_sibling_ids),
    ("racing exec, fork, put, get and close", case_racing_calls),
    ("a step signals the sandbox's init: refused, booked the client's", case_signal_init),
    ("io_uring, a user+mount namespace and ptrace refused in a step", case_escape_calls),
    ("a 2000-deep tree: closed, its scratch gone from the host", case_deep_tree_close),
    ("run ids differing in their 127th character are two owners", case_run_id_near_collision),
    ("a fork of a scratch deeper than 256 levels: 409, serve lives", case_deep_fork),
    ("a busy session does not outlive max_lifetime_s", case_busy_past_lifetime),
    ("a fork goes on with its parent's CPU budget", case_fork_keeps_budget),
    ("bad or oversized create files are the request's, never the platform's", case_create_files_are_the_requests),
    ("a paused tenant: no create with a setup, no fork", case_paused_makes_nothing),
    ("a get is bounded: no path twice, no file past 16 MiB", case_get_bounded),
    ("a tool call's missing command is exit 127, never the platform's", case_missing_command),
]


def attack_all(agent):
    """Each case against one server; a server that died is itself a FAIL."""
    serve = Serve(agent)
    try:
        for name, case in CASES:
            try:
                why = case(agent, serve)
            except Exception as e:  # noqa: BLE001
                why = "exception: %r" % e
            if why:
                report("FAIL", name, why)
            else:
                report("PASS", name)
            if serve.proc.poll() is not None:
                report("FAIL", "serve lived through: " + name, "exit %r" % serve.proc.returncode)
                serve = Serve(agent)
    finally:
        serve.stop()


def main():
    if not can_run("session attacks"):
        return 0
    agent = sgagent.Agent({}, name="session-attacks")
    agent.write_policy(TENANT, policy(agent))
    agent.write_policy("envlife", policy(agent, {"session": {"max_lifetime_s": 3}}))
    agent.write_policy("envcpu", policy(agent, {"session": {"cpu_seconds": 1}}))
    agent.write_policy("envsmall", policy(agent, {"files": {"scratch_mb": 1}}))
    agent.write_policy("envpause", policy(agent))
    try:
        if agent.start():
            attack_all(agent)
        else:
            report("FAIL", "agent start", agent.log_tail())
    finally:
        agent.stop()
        agent.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
