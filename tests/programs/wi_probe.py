# Warm interpreters: what a call's process can do to its forkserver parent
# (its ppid, same uid). Scores, 1 = as required: signal refused, ptrace
# refused, its environ, maps, fds and memory unreadable; and two controls that
# must work: signalling its own child, reading its own environ.
import ctypes
import json
import os
import signal
import sys

json.load(sys.stdin)
parent = os.getppid()


def refused(fn):
    try:
        fn()
        return 0
    except PermissionError:
        return 1


def read(path):
    with open(path, "rb") as f:
        f.read(1)


libc = ctypes.CDLL(None, use_errno=True)


def ptrace_attach():
    if libc.ptrace(16, parent, None, None) != 0:  # PTRACE_ATTACH
        raise PermissionError(ctypes.get_errno(), "ptrace")


child = os.fork()
if child == 0:
    signal.pause()
    os._exit(0)
own_signal = 1 - refused(lambda: os.kill(child, signal.SIGKILL))
os.waitpid(child, 0)
scores = [
    refused(lambda: os.kill(parent, signal.SIGKILL)),
    refused(lambda: os.kill(parent, 0)),
    refused(ptrace_attach),
    refused(lambda: read("/proc/%d/environ" % parent)),
    refused(lambda: read("/proc/%d/maps" % parent)),
    refused(lambda: os.readlink("/proc/%d/fd/0" % parent)),
    refused(lambda: read("/proc/%d/mem" % parent)),
    own_signal,
    1 - refused(lambda: read("/proc/self/environ")),
]
print(json.dumps(scores))
