# sandguard's warm interpreter: the forkserver parent of one tenant's
# sandbox (docs/sandbox.md, "Warm interpreters"). Embedded in the binary
# (sandbox_warm_blob.S) and run as `python3 -c <this> SCRIPT MODULE...` by
# the sandbox's init, as the sandbox's main process: the tenant's slot
# uid, Landlock domain, seccomp filter, namespaces and limits.
#
# It imports the preloaded modules once, then serves calls one at a time
# on its control channel (fd 0, a SOCK_SEQPACKET socket to the executor):
# each CALL brings the call's scratch directory, sys.argv, and five fds
# (the call's cgroup.procs, stdin, stdout, stderr, the report pipe). A
# fresh child per call joins its own cgroup, takes the call's stdio,
# closes everything else, enters a tighter Landlock domain (writes only
# beneath its scratch; no signals or abstract unix sockets outside it),
# closes the report pipe (the executor's "tenant code starts now") and
# runs SCRIPT as __main__. The parent sends back the child's wait status
# (DONE) and nothing else: it never reads anything the child made.
import ctypes
import gc
import importlib
import os
import pkgutil  # noqa: F401 (runpy's, imported here once rather than in every child)
import runpy
import socket
import struct
import sys
import traceback

MSG = struct.Struct("=IIiI240s")  # struct sb_warm_msg
MSG_MAGIC = 0x5347574D
READY, FAILED, DONE = 1, 2, 3
CALL = struct.Struct("=III")  # struct sb_warm_call's header
CALL_MAGIC = 0x53475743
CALL_MAX = 12 + 64 * 1024
CALL_FDS = 5
REPORT = struct.Struct("=6i")  # struct sb_child_report
REPORT_FAILED = 1
# enum sb_child_step
STEP_CGROUP, STEP_STDIO, STEP_CLOSE_FDS, STEP_CHDIR, STEP_LANDLOCK, STEP_SECCOMP = 1, 4, 5, 10, 12, 13

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
IPC_MAKERS = {"x86_64": (29, 64, 68, 240), "aarch64": (194, 190, 186, 180)}
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050000 | 1


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
    insns += [(0x06, 0, 0, RET_ALLOW), (0x06, 0, 0, RET_EPERM)]  # BPF_RET | BPF_K
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


def ruleset_for(scratch, abi):
    """The call's own domain, inside the sandbox's: writes only beneath
    its scratch (and to /dev/null), no signals and no abstract unix
    sockets outside it. Reads stay as the sandbox's domain has them.
    Built by the parent (no copy-on-write faults); the child enforces it.
    Its fd, or the OSError that the child reports."""
    writes = supported(TREE_WRITES, abi)
    attr = RulesetAttr(writes, 0, SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL)
    try:
        ruleset = syscall(SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                          ctypes.c_uint32(0))
    except OSError as e:
        return e
    try:
        allow(ruleset, scratch, writes, os.O_DIRECTORY)
        allow(ruleset, "/dev/null", supported(WRITE_FILE | TRUNCATE | IOCTL_DEV, abi), 0)
    except OSError as e:
        os.close(ruleset)
        return e
    return ruleset


def restrict(ruleset):
    if isinstance(ruleset, OSError):
        raise ruleset
    syscall(SYS_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    os.close(ruleset)


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
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120  # as CPython when its final flush fails
    return status


def child(fds, ruleset, scratch, argv):
    procs, stdin, stdout, stderr, report = fds
    step = STEP_CGROUP
    try:
        os.write(procs, b"0")  # into the call's own, fresh cgroup
        os.close(procs)
        step = STEP_STDIO
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        step = STEP_CLOSE_FDS
        keep = sorted((report, ruleset if isinstance(ruleset, int) else report))
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, os.sysconf("SC_OPEN_MAX"))
        step = STEP_LANDLOCK
        restrict(ruleset)
        step = STEP_SECCOMP
        refuse_ipc()
        step = STEP_CHDIR
        os.chdir(scratch)
        os.environ.clear()
        os.environ.update(PATH="/usr/bin:/bin", LANG="C.UTF-8", HOME=scratch, TMPDIR=scratch)
        sys.argv = list(argv)
        sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", errors="backslashreplace",
                                           closefd=False, buffering=1)
        os.close(report)  # EOF: the tenant's code runs from here on
    except OSError as e:
        os.write(report, REPORT.pack(REPORT_FAILED, step, e.errno or 5, -1, 0, 0))
        os._exit(127)
    os._exit(run(argv))


def serve(sock, abi):
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, CALL_MAX, CALL_FDS)
        if not msg:
            return 0  # the executor let go: recycled
        magic, argc, length = CALL.unpack_from(msg)
        strings = msg[CALL.size:CALL.size + length].split(b"\0")[:-1]
        if magic != CALL_MAGIC or len(fds) != CALL_FDS or len(strings) != argc + 1:
            return 2  # not the executor's message: end, the executor books it
        scratch, argv = os.fsdecode(strings[0]), [os.fsdecode(s) for s in strings[1:]]
        ruleset = ruleset_for(scratch, abi)
        pid = os.fork()
        if pid == 0:
            sock.detach()
            child(fds, ruleset, scratch, argv)
        for fd in fds:
            os.close(fd)
        if isinstance(ruleset, int):
            os.close(ruleset)
        _, status = os.waitpid(pid, 0)
        send(sock, DONE, status)


def main():
    script, preload = sys.argv[1], sys.argv[2:]
    sock = socket.socket(fileno=0)  # fds 1 and 2 are /dev/null, the executor's
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    sys.dont_write_bytecode = True
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    abi = landlock_abi()
    try:
        if abi < 6:
            raise OSError(95, "Landlock ABI %d: a warm call needs 6 (scoped signals)" % abi)
        for name in preload:
            importlib.import_module(name)
    except BaseException as e:
        send(sock, FAILED, 0, "".join(traceback.format_exception_only(type(e), e)).strip())
        return 1
    gc.collect()
    gc.freeze()  # children do not touch (copy) the preloaded objects' pages
    send(sock, READY)
    try:
        return serve(sock, abi)
    except BaseException as e:  # the executor books the call; this says why
        send(sock, FAILED, 0, "".join(traceback.format_exception(type(e), e, e.__traceback__)))
        raise


sys.exit(main())
