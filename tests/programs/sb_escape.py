# Try to get out of the sandbox, one probe per argument, and print a JSON
# object {probe: "ok" | errno name | a value}. Probes:
#   write:PATH  read:PATH  list:PATH  environ-parent  kill-parent
#   tcp:PORT  io_uring  unshare  ptrace  exec-scratch
#   udp:PORT udp6:PORT (a datagram to the loopback)  mptcp  netlink  unix:PATH
#   clone-files (a process sharing the fd table)  memfd  memfd-noexec
#   int80 (an i386 getpid: "ENOSYS", "ok", or "killed:SIG")
#   shm:BYTES  msgq (SysV objects, left behind on purpose)
# issue 13's escapes and weaknesses:
#   unix-dgram:PATH (socketpair, then sendto a host path)  unix-unspec:PATH
#   (connect(AF_UNSPEC) first)  abstract-send:NAME  abstract-recv:NAME:MS
#   (bind the name, count datagrams for MS)  tfo:PORT (sendto MSG_FASTOPEN)
#   tfo-connect:PORT (TCP_FASTOPEN_CONNECT)  listen-auto (listen() unbound:
#   the port)  accept:PORT:MS ("none" or "accepted")  udp-to:HOST:PORT
#   loopback-echo:ADDR (a server and its client in this process, over
#   ADDR: "echoed", or the errno of the step that failed)
#   fallocate:MB  nofile:N (how many opened)  utime:PATH  hostname
#   pids:MAX (how many pids kill(pid, 0) finds)  dlopen:SO (copied into the
#   scratch)  ldso:BINARY (copied, run through the loader)  deep:N
#   inotify:DIR,DIR (watch, write "ready", wait for "go", report names)
# and what the process was given (values):
#   fds (open fds above 2)  groups  pdeathsig  no-new-privs  session-leader
#   netns ipcns (the namespace links)
import ctypes, errno, json, mmap, os, shutil, signal, socket, subprocess, sys, time

libc = ctypes.CDLL(None, use_errno=True)
NR = {  # syscall numbers: x86_64, aarch64
    "x86_64": {"io_uring_setup": 425, "unshare": 272, "ptrace": 101, "clone": 56},
    "aarch64": {"io_uring_setup": 425, "unshare": 97, "ptrace": 117, "clone": 220},
}[os.uname().machine]
CLONE_NEWUSER = 0x10000000
PTRACE_TRACEME = 0
CLONE_FILES = 0x400
IPPROTO_MPTCP = 262
MFD_CLOEXEC, MFD_NOEXEC_SEAL = 0x1, 0x8
IPC_PRIVATE, IPC_CREAT = 0, 0o1000


def syscall(name, *args):
    ret = libc.syscall(NR[name], *args)
    if ret < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return ret


def int80_getpid():
    """getpid through the i386 ABI, in a child: a seccomp kill must not
    take the other probes with it."""
    if os.uname().machine != "x86_64":
        return "n/a"
    pid = os.fork()
    if pid == 0:
        code = bytes([0xb8, 20, 0, 0, 0,   # mov eax, 20 (i386 getpid)
                      0xcd, 0x80,          # int 0x80
                      0xc3])               # ret
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
        ret = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
        os._exit(0 if ret == os.getpid() else 1 if ret == -errno.ENOSYS else 2)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "killed:" + signal.Signals(os.WTERMSIG(status)).name
    return {0: "ok", 1: "ENOSYS"}.get(os.WEXITSTATUS(status), "exit %d" % os.WEXITSTATUS(status))


MSG_FASTOPEN = 0x20000000
TCP_FASTOPEN_CONNECT = 30
KEEP = []  # sockets that must outlive their probe


def inotify_names(dirs):
    """Watch the directories, tell the host (a "ready" file in the cwd),
    wait for its "go" file, and list the names the watches reported."""
    IN_ALL = 0xfff
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    watched = [d for d in dirs if libc.inotify_add_watch(fd, d.encode(), IN_ALL) >= 0]
    open("ready", "w").close()
    for _ in range(500):
        if os.path.exists("go"):
            break
        time.sleep(0.01)
    names = []
    try:
        buf = os.read(fd, 65536)
    except BlockingIOError:
        buf = b""
    while buf:
        length = int.from_bytes(buf[12:16], "little")
        names.append(buf[16:16 + length].rstrip(b"\0").decode(errors="replace"))
        buf = buf[16 + length:]
    return "watched %s: %s" % (",".join(watched), ",".join(sorted(set(names))) or "nothing")


PR_GET_PDEATHSIG = 2
PR_GET_NO_NEW_PRIVS = 39


def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def probe(p):
    kind, _, arg = p.partition(":")
    if kind == "write":
        with open(arg, "w") as f:
            f.write("escaped\n")
    elif kind == "read":
        with open(arg) as f:
            f.read()
    elif kind == "list":
        os.listdir(arg)
    elif kind == "environ-parent":
        with open("/proc/%d/environ" % os.getppid(), "rb") as f:
            f.read()
    elif kind == "kill-parent":
        os.kill(os.getppid(), 0)
    elif kind == "tcp":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(("127.0.0.1", int(arg)))
        s.sendall(b"leak")
        s.close()
    elif kind in ("udp", "udp6"):
        family, host = (socket.AF_INET, "127.0.0.1") if kind == "udp" else (socket.AF_INET6, "::1")
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.sendto(b"leak", (host, int(arg)))
        s.close()
    elif kind == "mptcp":
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP).close()
    elif kind == "netlink":
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
    elif kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(arg)
        s.close()
    elif kind == "clone-files":
        pid = syscall("clone", CLONE_FILES | signal.SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    elif kind == "memfd":
        os.close(os.memfd_create("x", MFD_CLOEXEC))
    elif kind == "memfd-noexec":
        os.close(os.memfd_create("x", MFD_CLOEXEC | MFD_NOEXEC_SEAL))
    elif kind == "int80":
        return int80_getpid()
    elif kind == "shm":
        if libc.shmget(IPC_PRIVATE, ctypes.c_size_t(int(arg)), IPC_CREAT | 0o600) < 0:
            raise OSError(ctypes.get_errno(), "shmget")
    elif kind == "msgq":
        if libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600) < 0:
            raise OSError(ctypes.get_errno(), "msgget")
    elif kind in ("netns", "ipcns"):
        return os.readlink("/proc/self/ns/" + kind[:-2])
    elif kind in ("unix-dgram", "unix-unspec"):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        if kind == "unix-unspec":
            unspec = ctypes.create_string_buffer(16)  # sa_family AF_UNSPEC (0)
            if libc.connect(a.fileno(), unspec, 2) < 0:
                raise OSError(ctypes.get_errno(), "connect AF_UNSPEC")
        a.sendto(b"leak", arg)
    elif kind == "abstract-send":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"leak", "\0" + arg)
    elif kind == "abstract-recv":
        name, ms = arg.rsplit(":", 1)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind("\0" + name)
        s.settimeout(int(ms) / 1000)
        got = 0
        try:
            while True:
                s.recv(64)
                got += 1
        except socket.timeout:
            pass
        return "received %d" % got
    elif kind == "tfo":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.sendto(b"leak", MSG_FASTOPEN, ("127.0.0.1", int(arg)))
    elif kind == "tfo-connect":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
        s.settimeout(2)
        s.connect(("127.0.0.1", int(arg)))
        s.sendall(b"leak")
    elif kind == "listen-auto":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.listen(8)
        KEEP.append(s)
        return str(s.getsockname()[1])
    elif kind == "loopback-echo":
        family = socket.AF_INET6 if ":" in arg else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        server.bind((arg, 0))
        server.listen(1)
        server.settimeout(5)
        client = socket.socket(family, socket.SOCK_STREAM)
        client.settimeout(5)
        client.connect(server.getsockname()[:2])
        peer = server.accept()[0]
        client.sendall(b"ping")
        peer.sendall(peer.recv(64))
        return "echoed" if client.recv(64) == b"ping" else "garbled"
    elif kind == "accept":
        port, ms = arg.split(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", int(port)))
        s.listen(8)
        s.settimeout(int(ms) / 1000)
        try:
            s.accept()[0].sendall(b"from the sandbox")
            return "accepted"
        except socket.timeout:
            return "none"
    elif kind == "udp-to":
        host, port = arg.rsplit(":", 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"leak", (host, int(port)))
    elif kind == "fallocate":
        fd = os.open("fill.bin", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, int(arg) << 20)
        finally:
            os.close(fd)
            os.unlink("fill.bin")
    elif kind == "nofile":
        fds = []
        try:
            for _ in range(int(arg)):
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        n = len(fds)
        for fd in fds:
            os.close(fd)
        return str(n)
    elif kind == "utime":
        os.utime(arg, (0, 0))
    elif kind == "hostname":
        return socket.gethostname()
    elif kind == "pids":
        found = 0
        for pid in range(1, int(arg)):
            try:
                os.kill(pid, 0)
                found += 1
            except ProcessLookupError:
                pass
            except PermissionError:
                found += 1
        return str(found)
    elif kind == "dlopen":
        shutil.copy(arg, "copied.so")
        ctypes.CDLL(os.path.abspath("copied.so"))
    elif kind == "ldso":
        shutil.copy(arg, "copied.bin")
        os.chmod("copied.bin", 0o755)
        loader = "/lib64/ld-linux-x86-64.so.2" if os.uname().machine == "x86_64" else "/lib/ld-linux-aarch64.so.1"
        r = subprocess.run([loader, os.path.abspath("copied.bin")], capture_output=True)
        if r.returncode:
            return "failed: " + r.stderr.decode(errors="replace").strip().split("\n")[-1][-80:]
    elif kind == "deep":
        for _ in range(int(arg)):
            os.mkdir("d")
            os.chdir("d")
        return "made"
    elif kind == "inotify":
        return inotify_names(arg.split(","))
    elif kind == "io_uring":
        params = ctypes.create_string_buffer(120)
        syscall("io_uring_setup", 4, params)
    elif kind == "unshare":
        syscall("unshare", CLONE_NEWUSER)
    elif kind == "ptrace":
        syscall("ptrace", PTRACE_TRACEME, 0, 0, 0)
    elif kind == "exec-scratch":
        with open("run.sh", "w") as f:
            f.write("#!/bin/sh\necho ran\n")
        os.chmod("run.sh", 0o755)
        subprocess.run(["./run.sh"], check=True, stdout=subprocess.DEVNULL)
    elif kind == "fds":
        return ",".join(str(fd) for fd in range(3, 1024) if is_open(fd)) or "none"
    elif kind == "groups":
        return "%d/%d %s" % (os.getgid(), os.getuid(), os.getgroups())
    elif kind == "pdeathsig":
        sig = ctypes.c_int(0)
        libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
        return str(sig.value)
    elif kind == "no-new-privs":
        return str(libc.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0))
    elif kind == "session-leader":
        return str(os.getsid(0) == os.getpid())
    else:
        raise SystemExit("unknown probe " + p)
    return "ok"


results = {}
for p in sys.argv[1:]:
    try:
        results[p] = probe(p)
    except OSError as e:
        results[p] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
print(json.dumps(results))
