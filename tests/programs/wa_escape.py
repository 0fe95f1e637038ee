# Warm attacks (24-warm-attacks): a call's other ways at its warm parent
# (with /proc readable in its policy), past the ones 34-warm-interpreter's
# wi_probe.py tries. Scores, 1 = refused: pidfd_send_signal(SIGKILL) to the
# parent, pidfd_getfd of the parent's fd 0 (its channel to the executor),
# process_vm_readv of the parent, kcmp with the parent, writing the
# parent's /proc oom_score_adj (1000: the OOM killer's first choice) and
# comm; then how many descriptors besides 0, 1 and 2 the call holds (0
# wanted: scored 1 when none), and a control: pidfd_open of the parent
# works (the parent is there to be attacked).
import ctypes
import json
import os
import signal
import sys

from wa_lib import refused, sys_call

n = len(json.load(sys.stdin)["items"])
parent = os.getppid()


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def vm_read():
    buf = ctypes.create_string_buffer(8)
    local = Iovec(ctypes.addressof(buf), 8)
    remote = Iovec(id(None), 8)  # an address the parent has mapped (the same interpreter)
    sys_call("process_vm_readv", ctypes.c_int(parent), ctypes.byref(local), ctypes.c_ulong(1),
             ctypes.byref(remote), ctypes.c_ulong(1), ctypes.c_ulong(0))


def write(path, data):
    with open(path, "w") as f:
        f.write(data)


def own_fds():
    held = 0
    for fd in range(3, 1024):
        try:
            os.fstat(fd)
            held += 1
        except OSError:
            pass
    return held


pidfd = os.pidfd_open(parent)
fds = own_fds() - 1  # not the pidfd
scores = [
    refused(lambda: sys_call("pidfd_send_signal", ctypes.c_int(pidfd), ctypes.c_int(signal.SIGKILL),
                             None, ctypes.c_uint(0))),
    refused(lambda: sys_call("pidfd_getfd", ctypes.c_int(pidfd), ctypes.c_int(0), ctypes.c_uint(0))),
    refused(vm_read),
    refused(lambda: sys_call("kcmp", ctypes.c_int(os.getpid()), ctypes.c_int(parent), ctypes.c_int(0),
                             ctypes.c_ulong(0), ctypes.c_ulong(0))),
    refused(lambda: write("/proc/%d/oom_score_adj" % parent, "1000")),
    refused(lambda: write("/proc/%d/comm" % parent, "pwned")),
    1 if fds == 0 else 0,
    1,  # pidfd_open worked
]
print(json.dumps((scores + [0] * n)[:n]))
