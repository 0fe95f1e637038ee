# What one run leaves for the next, and what the next finds of it.
#
#   leave: a file in the scratch (the working directory), in /tmp, in
#          /dev/shm and in /mnt; a daemon (double fork, setsid) holding a file open; a
#          SysV shared memory segment, semaphore set and message queue and a
#          POSIX message queue under fixed names; a child of the process
#          with a pipe it keeps open.
#   check: reports each of those it finds, and any process, environment
#          variable or open descriptor beyond what a fresh run has.
#   both:  leave, then check in the same run (the control: check finds
#          everything leave made).
#
# Verifier mode: the test's input is "leave" or "check"; the output is
# "left" or "clean" (anything else names what survived). Batch mode: argv[1]
# is the mode, stdin the batch; the scores are 1.0 when clean (or left),
# else 0.0, and the findings go to stderr.
import ctypes
import json
import os
import sys
import time

KEY = 0x5347574D  # "SGWM"
MQ = b"/sg-leftover"
FILES = ["left.txt", "/tmp/left.txt", "/dev/shm/left.txt", "/mnt/left.txt"]
IPC_CREAT, O_CREAT, O_RDWR = 0o1000, 0o100, 0o2
ENV = {"PATH", "LANG", "HOME"}

libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]


def leave():
    made = []
    for f in FILES:
        with open(f, "w") as fh:
            fh.write("from an earlier run\n")
        made.append(f)
    if libc.shmget(KEY, 4096, IPC_CREAT | 0o600) >= 0:
        made.append("shm")
    if libc.semget(KEY, 1, IPC_CREAT | 0o600) >= 0:
        made.append("sem")
    if libc.msgget(KEY, IPC_CREAT | 0o600) >= 0:
        made.append("msg")
    if libc.mq_open(MQ, O_CREAT | O_RDWR, 0o600, None) >= 0:
        made.append("mq")
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            keep = open("left.txt")  # noqa: F841 (held open by the daemon)
            time.sleep(3600)
        os._exit(0)
    os.wait()
    os.environ["SG_LEFT_BEHIND"] = "1"
    return made


def check():
    found = [f for f in FILES if os.path.exists(f)]
    if libc.shmget(KEY, 0, 0) >= 0:
        found.append("shm")
    if libc.semget(KEY, 0, 0) >= 0:
        found.append("sem")
    if libc.msgget(KEY, 0, 0) >= 0:
        found.append("msg")
    if libc.mq_open(MQ, O_RDWR, 0, None) >= 0:
        found.append("mq")
    # Every process of the PID namespace, by kill(pid, 0): ours (the
    # sandbox's init is 1, this run's main its child) and anything else.
    me, parent = os.getpid(), os.getppid()
    others = []
    for pid in range(1, 65536):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        if pid not in (me, parent, 1):
            others.append(str(pid))
    if others:
        found.append("processes " + ",".join(others))
    extra_env = sorted(set(os.environ) - ENV)
    if extra_env:
        found.append("environment " + ",".join(extra_env))
    fds = []
    for fd in range(64):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    if fds != [0, 1, 2]:
        found.append("descriptors %s" % fds)
    return found


def main():
    if len(sys.argv) > 1:  # batch mode
        batch = json.load(sys.stdin)
        made = []
        if sys.argv[1] == "both":
            made = leave()
            time.sleep(0.2)
        found = leave() if sys.argv[1] == "leave" else check()
        good = sys.argv[1] != "check" or not found
        sys.stderr.write(json.dumps({"mode": sys.argv[1], "made": made, "found": found}) + "\n")
        print(json.dumps([1.0 if good else 0.0] * len(batch["items"])))
        return
    mode = sys.stdin.read().strip()
    if mode == "leave":
        leave()
        print("left")
        return
    if mode == "both":
        leave()
        time.sleep(0.2)  # the daemon is up
    found = check()
    print("clean" if not found else "survived: " + "; ".join(found))


main()
