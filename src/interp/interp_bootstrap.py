# sandguard's warm interpreter: the forkserver parent of one tenant's
# sandbox (docs/sandbox.md, "Warm interpreters"). Embedded in the binary
# (src/interp/interp_bootstrap.S) and run as `python3 -c <this> SCRIPT MODULE...` by
# the sandbox's init, as the sandbox's main process: the tenant's slot
# uid, Landlock domain, seccomp filter, namespaces and limits.
#
# It imports the preloaded modules once, then serves calls one at a time
# on its control channel (fd 0, a SOCK_SEQPACKET socket to the executor).
# A PREP (after the previous call, off the next call's path) brings the
# next call's cgroup.procs: the parent forks that call's child at once,
# which joins the cgroup, keeps nothing but its link to the parent,
# copies the parent's writable memory (no copy-on-write faults during the
# call) and waits; it has seen no call's data. The CALL brings the call's
# scratch directory, sys.argv, and four fds (stdin, stdout, stderr, the
# report pipe), which the parent hands on to the waiting child: it takes
# the call's stdio, closes everything else, enters a tighter Landlock
# domain (writes only beneath its scratch; no signals or abstract unix
# sockets outside it), closes the report pipe (the executor's "tenant
# code starts now") and runs SCRIPT as __main__. The parent sends back the
# child's wait status (DONE) and nothing else: it never reads anything
# the child made.
#
# A verifier's parent (`-c <this> --verify`, the policy's warm.verify)
# imports nothing of the tenant's and serves any script: its child runs
# the script as `python3 SCRIPT ARG...` would, in the sandbox's scratch,
# with the modules a cold interpreter starts with (what this file imported
# is dropped), a fresh __main__, stdio made as CPython makes it, and the
# script's first frame at a cold run's recursion depth (cold_main(), the
# end of this file).
import sys

# What `python3 SCRIPT` starts with, taken before this file imports
# anything: a verifier's child has these and nothing else.
COLD_MODULES = frozenset(sys.modules)
COLD_IMPORTER_CACHE = frozenset(sys.path_importer_cache)
COLD_BYTECODE = sys.dont_write_bytecode
if sys.path and sys.path[0] == "":
    del sys.path[0]  # -c's working directory, the scratch: nothing is imported from it
VERIFY = sys.argv[1:] == ["--verify"]

import _signal  # noqa: E402 (a cold interpreter's already)
import atexit  # noqa: E402 (finish()'s: imported here once, not by the import system in each child)
import builtins  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import _socket  # noqa: E402 (not socket: that one imports enum, selectors, collections...)
import struct  # noqa: E402
if not VERIFY:  # a batch call's child runs its script with these: imported once, here
    import importlib  # noqa: E402
    import pkgutil  # noqa: F401,E402 (runpy's)
    import runpy  # noqa: E402
    import traceback  # noqa: E402
# (A verifier's parent imports as little as it can: each test's child
# copies the parent's writable memory, and a smaller parent is a faster
# test.)

MSG = struct.Struct("=IIiI240s")  # struct interp_msg (src/interp/interp_state.h)
MSG_MAGIC = 0x5347574D
READY, FAILED, DONE = 1, 2, 3
CALL = struct.Struct("=III")  # struct interp_call's header
CALL_MAGIC = 0x53475743
CALL_MAX = 12 + 64 * 1024
CALL_FDS = 4
PREP = struct.Struct("=II")  # struct interp_prep's header, then (start, len) pairs
PREP_MAGIC = 0x53475750
MADV_POPULATE_WRITE = 23
PROT_RW, MAP_PRIVATE_ANON_FIXED = 0x3, 0x02 | 0x20 | 0x10  # mmap(2)
RANGE_SHARED = 1 << 63  # INTERP_RANGE_SHARED: a writable shared mapping
REPORT = struct.Struct("=6i")  # struct sb_child_report
REPORT_FAILED = 1
REPORT_EXEC = 4  # SB_REPORT_EXEC
# enum sb_child_step
STEP_CGROUP, STEP_STDIO, STEP_CLOSE_FDS, STEP_CHDIR, STEP_LANDLOCK, STEP_SECCOMP = 1, 4, 5, 10, 12, 13
STEP_FORK = 18

# Landlock (linux/landlock.h)
SYS_CREATE, SYS_ADD_RULE, SYS_RESTRICT = 444, 445, 446
RULE_PATH_BENEATH = 1
WRITE_FILE, TRUNCATE, IOCTL_DEV = 1 << 1, 1 << 14, 1 << 15
TREE_WRITES = WRITE_FILE | sum(1 << b for b in range(4, 14)) | TRUNCATE | IOCTL_DEV
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2
ABI_FOR = {1 << 13: 2, TRUNCATE: 3, IOCTL_DEV: 5}  # rights newer than ABI 1


# The SysV and POSIX IPC objects a call could leave in the parent's IPC
# namespace for a later call (a cold run gets a fresh namespace; a call
# cannot unshare one): making them is refused (EPERM) by a filter of the
# call's own, on top of the sandbox's. shmget, semget, msgget, mq_open.
# A verifier's test, which must see what a cold run sees, is killed
# instead (SIGSYS): the executor runs that test again, cold.
IPC_MAKERS = {"x86_64": (29, 64, 68, 240), "aarch64": (194, 190, 186, 180)}
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_EPERM, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000 | 1, 0x80000000


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]


def ipc_filter():
    """The call's seccomp program (built by the parent, installed by the
    child): load the syscall number, EPERM for the IPC makers, else allow
    (the sandbox's own filter still decides first)."""
    nrs = IPC_MAKERS.get(os.uname().machine)
    if nrs is None:
        return None
    insns = [(0x20, 0, 0, 0)]  # BPF_LD | BPF_W | BPF_ABS, seccomp_data.nr
    for i, nr in enumerate(nrs):  # BPF_JMP | BPF_JEQ | BPF_K: to the EPERM at the end
        insns.append((0x15, len(nrs) - i, 0, nr))
    refuse = RET_KILL_PROCESS if VERIFY else RET_EPERM
    insns += [(0x06, 0, 0, RET_ALLOW), (0x06, 0, 0, refuse)]  # BPF_RET | BPF_K
    prog = (SockFilter * len(insns))(*[SockFilter(*x) for x in insns])
    return SockFprog(len(insns), prog), prog


IPC_FILTER = ipc_filter()


def refuse_ipc():
    if IPC_FILTER is None:
        raise OSError(95, "no IPC filter for %s: a warm call would share SysV IPC" %
                      os.uname().machine)
    if LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(IPC_FILTER[0]), 0, 0):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long)
ABI = 0  # the kernel's Landlock ABI, main()'s


def syscall(nr, *args):
    ret = LIBC.syscall(ctypes.c_long(nr), *args)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def landlock_abi():
    try:
        return syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except OSError:
        return 0


def supported(rights, abi):
    return rights & ~sum(r for r, need in ABI_FOR.items() if abi < need)


def allow(ruleset, path, rights, flags):
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC | flags)
    try:
        rule = PathBeneath(rights, fd)
        syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def enter_call_domain(scratch):
    """The call's own domain, inside the sandbox's: writes only beneath
    its scratch (and to /dev/null), no signals and no abstract unix
    sockets outside it. Reads stay as the sandbox's domain has them.
    A verifier's test writes where a cold run may (the sandbox's domain
    decides; its scratch is reset after each test): only the scopes."""
    writes = 0 if VERIFY else supported(TREE_WRITES, ABI)
    attr = RulesetAttr(writes, 0, SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL)
    ruleset = syscall(SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                      ctypes.c_uint32(0))
    if writes:
        allow(ruleset, scratch, writes, os.O_DIRECTORY)
        allow(ruleset, "/dev/null", supported(WRITE_FILE | TRUNCATE | IOCTL_DEV, ABI), 0)
    syscall(SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    os.close(ruleset)


def recv_fds(sock, size, maxfds):
    """One message and the fds it carries (socket.recv_fds without the
    modules socket.py imports: a smaller parent forks and copies faster)."""
    msg, ancillary, _, _ = sock.recvmsg(size, _socket.CMSG_LEN(maxfds * 4))
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += struct.unpack_from("=%di" % (len(data) // 4), data)
    return msg, fds


def send_fds(sock, msg, fds):
    sock.sendmsg([msg], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                          struct.pack("=%di" % len(fds), *fds))])


def send(sock, kind, status=0, text=""):
    sock.send(MSG.pack(MSG_MAGIC, kind, status, 0, text.encode("utf-8", "replace")[-239:]))


def exit_status(code):
    """What `python3 script` exits with for SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def print_error(script):
    """The traceback as `python3 script` prints it: from the script's
    frame on, without this file's and runpy's."""
    kind, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    traceback.print_exception(kind, value, tb)


def run(argv):
    status = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        status = exit_status(e.code)
    except BaseException:
        print_error(argv[0])
        status = 1
    return finish(status)


def finish(status):
    """What Py_FinalizeEx does that the script can see: non-daemon threads
    joined, atexit handlers run, sys.stdout and sys.stderr flushed (120
    when that fails), then the original streams."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120  # as CPython when its final flush fails
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass  # as CPython, which flushes them when it frees them
    return status


def privatize(ranges):
    """The parent's writable shared mappings (a preload's mmap.mmap(-1,
    n)), replaced in place by private copies: a call's writes there die
    with it, like the rest of its memory, and the next call finds what
    the parent holds, never what a call left. Raises OSError."""
    for i in range(0, len(ranges) - 1, 2):
        if ranges[i + 1] & RANGE_SHARED:
            start, length = ranges[i], ranges[i + 1] & ~RANGE_SHARED
            copy = ctypes.create_string_buffer(length)
            ctypes.memmove(copy, start, length)
            if LIBC.mmap(start, length, PROT_RW, MAP_PRIVATE_ANON_FIXED, -1, 0) != start:
                raise OSError(ctypes.get_errno(), "mmap of a shared range")
            ctypes.memmove(start, copy, length)


def prefault(ranges):
    """Copy the parent's private writable memory now (MADV_POPULATE_WRITE),
    while no call waits, rather than one copy-on-write fault at a time
    during the call. Best effort: a range that went away is skipped."""
    for i in range(0, len(ranges) - 1, 2):
        if not ranges[i + 1] & RANGE_SHARED:
            LIBC.madvise(ctypes.c_void_p(ranges[i]), ctypes.c_size_t(ranges[i + 1]),
                         MADV_POPULATE_WRITE)


def waiting_child(procs, link, ranges):
    """The next call's child, forked at PREP: into the call's own, fresh
    cgroup first, then nothing but its link to the parent, the call's IPC
    filter and its memory copied, then wait for the call. It has none of
    the call's data until the CALL the parent hands on."""
    failed = None
    try:
        os.write(procs, b"0")
    except OSError as e:
        failed = (STEP_CGROUP, e)
    os.close(procs)
    os.dup2(1, 0)  # the executor's channel: /dev/null instead (fd 1's)
    os.closerange(3, link)
    os.closerange(link + 1, os.sysconf("SC_OPEN_MAX"))
    if failed is None:
        try:
            privatize(ranges)
        except OSError as e:
            failed = (STEP_FORK, e)
    if failed is None:
        try:
            refuse_ipc()
        except OSError as e:
            failed = (STEP_SECCOMP, e)
    prefault(ranges)
    link = _socket.socket(fileno=link)
    msg, fds = recv_fds(link, CALL_MAX, CALL_FDS)
    link.close()
    if len(fds) != CALL_FDS:
        os._exit(0)  # the parent ended before a call: nothing ran
    length = CALL.unpack_from(msg)[2]
    strings = [os.fsdecode(s) for s in msg[CALL.size:CALL.size + length].split(b"\0")[:-1]]
    child(fds, failed, strings[0], strings[1:])


def child(fds, failed, scratch, argv):
    stdin, stdout, stderr, report = fds
    step = STEP_STDIO
    try:
        if failed is not None:
            step = failed[0]
            raise failed[1]
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        step = STEP_CLOSE_FDS
        os.closerange(3, report)
        os.closerange(report + 1, os.sysconf("SC_OPEN_MAX"))
        step = STEP_LANDLOCK
        enter_call_domain(scratch)
        step = STEP_CHDIR
        os.chdir(scratch)
        sys.argv = list(argv)
        if VERIFY:  # the environment is the sandbox's, as a cold run's
            sys.orig_argv = sys.orig_argv[:1] + list(argv)
            cold_stdio()
        else:
            os.environ.clear()
            os.environ.update(PATH="/usr/bin:/bin", LANG="C.UTF-8", HOME=scratch,
                              TMPDIR=scratch)
            sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
            sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
            sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", errors="backslashreplace",
                                               closefd=False, buffering=1)
        # EXEC, then EOF: the tenant's code runs from here on. (An EOF
        # alone: this child ended before, not by the tenant's doing.)
        try:
            os.write(report, REPORT.pack(REPORT_EXEC, 0, 0, 0, 0, 0))
        except OSError:
            pass  # the executor gave up on the call: it runs regardless
        os.close(report)
    except OSError as e:
        os.write(report, REPORT.pack(REPORT_FAILED, step, e.errno or 5, -1, 0, 0))
        os._exit(127)
    if VERIFY:
        raise RunMain(argv)
    os._exit(run(argv))


def cold_stdio():
    """sys.stdin, stdout and stderr on fds 0-2 as CPython's create_stdio()
    makes them: the parent's own were made so, for the same environment
    and for fds that are no terminals either (encoding, errors, line
    buffering); newline "\n" (no translation) as on every POSIX system."""
    made = []
    for fd, like, mode in ((0, sys.__stdin__, "rb"), (1, sys.__stdout__, "wb"),
                           (2, sys.__stderr__, "wb")):
        buf = io.open(fd, mode, -1, closefd=False)
        buf.raw.name = like.buffer.raw.name
        made.append(io.TextIOWrapper(buf, like.encoding, like.errors, "\n", like.line_buffering,
                                     like.write_through))
        made[-1].mode = like.mode
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = made


class RunMain(BaseException):
    """Raised by a verifier's child once its call is set up: it unwinds to
    this file's top level, where the script runs as a cold run's first
    frame."""

    def __init__(self, argv):
        super().__init__()
        self.argv = argv


def recursion_counter():
    """The interpreter's count of the frames left before RecursionError
    (tstate->recursion_remaining, CPython 3.11's cpython/pystate.h), seen
    to behave as that; None when it does not (then a verifier's tests stay
    cold: their depth could not be a cold run's)."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return None
    get = ctypes.pythonapi.PyThreadState_Get
    get.restype = ctypes.c_void_p
    state = get()
    remaining = ctypes.c_int.from_address(state + 32)
    limit = ctypes.c_int.from_address(state + 36)
    old = sys.getrecursionlimit()
    seen = [limit.value == old]
    sys.setrecursionlimit(old + 7)
    seen.append(limit.value == old + 7 and 0 < remaining.value <= old + 7)
    sys.setrecursionlimit(old)
    here = remaining.value
    seen.append((lambda: remaining.value)() == here - 1)
    return remaining if all(seen) else None


def cold_main(argv):
    """`python3 SCRIPT ARG...` as it starts: the modules a cold interpreter
    has (what this file imported dropped), a fresh __main__ as CPython
    makes it, the script's directory first on sys.path. The script's
    bytes, its absolute path, __main__'s dict; OSError when the script
    cannot be read."""
    for name in [n for n in sys.modules if n not in COLD_MODULES]:
        del sys.modules[name]
    for path in [p for p in sys.path_importer_cache if p not in COLD_IMPORTER_CACHE]:
        del sys.path_importer_cache[path]
    sys.dont_write_bytecode = COLD_BYTECODE
    path = os.path.abspath(argv[0])
    sys.path.insert(0, os.path.dirname(os.path.realpath(argv[0])))
    with open(path, "rb") as f:
        source = f.read()
    main = type(sys)("__main__")
    loader = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    main.__dict__.update(__loader__=loader, __annotations__={}, __builtins__=builtins,
                         __file__=path, __cached__=None)
    sys.modules["__main__"] = main
    return source, path, main.__dict__


def uncaught(path, value):
    """PyErr_Print for an exception out of the script: its traceback from
    the script's frame on, through sys.excepthook (the script's, if it set
    one). 1, or None for a KeyboardInterrupt (CPython then ends by
    SIGINT)."""
    tb = value.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    value = value.with_traceback(tb)
    sys.last_type, sys.last_value, sys.last_traceback = type(value), value, tb
    try:
        sys.excepthook(type(value), value, tb)
    except BaseException:
        sys.__excepthook__(type(value), value, tb)
    return None if isinstance(value, KeyboardInterrupt) else 1


def prefork(sock, msg, fds):
    """PREP: fork the next call's child now. Its pid and the parent's end
    of their link, or None for a message that is not the executor's."""
    n = PREP.unpack_from(msg)[1] if len(msg) >= PREP.size else -1
    if len(fds) != 1 or len(msg) != PREP.size + 16 * n:
        return None
    ranges = struct.unpack_from("=%dQ" % (2 * n), msg, PREP.size)
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        sock.detach()
        ours.detach()
        waiting_child(fds[0], theirs.detach(), ranges)
    theirs.close()
    os.close(fds[0])
    return pid, ours


def serve(sock):
    waiting = None  # (pid, link) of the next call's child
    while True:
        msg, fds = recv_fds(sock, CALL_MAX, CALL_FDS)
        if not msg:
            return 0  # the executor let go: recycled
        magic = struct.unpack_from("=I", msg)[0] if len(msg) >= 4 else 0  # a PREP may be 8 bytes
        if magic == PREP_MAGIC and waiting is None:
            waiting = prefork(sock, msg, fds)
            if waiting is not None:
                continue
        argc, length = CALL.unpack_from(msg)[1:] if magic == CALL_MAGIC else (0, 0)
        strings = msg[CALL.size:CALL.size + length].split(b"\0")[:-1]
        if magic != CALL_MAGIC or waiting is None or len(fds) != CALL_FDS or \
                len(strings) != argc + 1:
            return 2  # not the executor's message: end, the executor books it
        pid, link = waiting
        waiting = None
        try:
            send_fds(link, msg, fds)
            handed = True
        except OSError:
            handed = False
        link.close()
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        if not handed:  # not the call's doing: a platform error, this parent ends
            send(sock, FAILED, status, "the call's child ended before its call (wait status "
                 "%d)" % status)
            return 3
        send(sock, DONE, status)


def main():
    script, preload = (None, []) if VERIFY else (sys.argv[1], sys.argv[2:])
    sock = _socket.socket(fileno=0)  # fds 1 and 2 are /dev/null, the executor's
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    sys.dont_write_bytecode = True
    if not VERIFY:
        sys.argv = [script]
        sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    global ABI
    ABI = landlock_abi()
    try:
        if ABI < 6:
            raise OSError(95, "Landlock ABI %d: a warm call needs 6 (scoped signals)" % ABI)
        if VERIFY and COUNTER is None:
            raise OSError(95, "this interpreter's recursion depth cannot be set as a cold "
                          "run's (CPython 3.11 only): verifier tests stay cold")
        for name in preload:
            importlib.import_module(name)
    except BaseException as e:
        import traceback
        send(sock, FAILED, 0, "".join(traceback.format_exception_only(type(e), e)).strip())
        return 1
    gc.collect()
    gc.freeze()  # children do not touch (copy) the preloaded objects' pages
    send(sock, READY)
    try:
        return serve(sock)
    except RunMain:
        raise  # a verifier's child, on its way to run the script
    except BaseException as e:  # the executor books the call; this says why
        import traceback
        send(sock, FAILED, 0, "".join(traceback.format_exception(type(e), e, e.__traceback__)))
        raise


# A verifier's parent: how many frames exec() itself takes, so that its
# child's script starts as deep as a cold run's first frame (this one).
COUNTER = recursion_counter() if VERIFY else None
EXEC_DEPTH = 0
if COUNTER is not None:
    PROBE = {"COUNTER": COUNTER}
    EXEC_DEPTH = COUNTER.value
    exec("R = COUNTER.value", PROBE)
    EXEC_DEPTH -= PROBE["R"]
try:
    STATUS = main()
except RunMain as call:
    CALL_ARGV = call.argv
else:
    sys.exit(STATUS)
# A verifier's child, from here on `python3 SCRIPT` itself.
MAIN = INTERRUPTED = None
try:
    MAIN = cold_main(CALL_ARGV)
except OSError as e:
    print("%s: can't open file %r: [Errno %d] %s" %
          (sys.orig_argv[0], os.path.abspath(CALL_ARGV[0]), e.errno, e.strerror),
          file=sys.stderr)
    STATUS = 2
if MAIN is not None:
    COUNTER.value += EXEC_DEPTH
    try:
        exec(compile(MAIN[0], MAIN[1], "exec", dont_inherit=True), MAIN[2])
        STATUS = 0
    except SystemExit as e:
        STATUS = exit_status(e.code)
    except BaseException as e:
        STATUS = uncaught(MAIN[1], e)
        INTERRUPTED = STATUS is None
STATUS = finish(STATUS or 0)
if INTERRUPTED:
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    os.kill(os.getpid(), _signal.SIGINT)
    STATUS = 128 + _signal.SIGINT
os._exit(STATUS)
