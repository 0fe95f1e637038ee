# What the warm-attack programs of 24-warm-attacks share (imported from the
# script's own directory, which is on sys.path warm and cold).
import ctypes
import os

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
NR = {"x86_64": {"pidfd_send_signal": 424, "pidfd_getfd": 438, "process_vm_readv": 310,
                 "kcmp": 312, "ioprio_set": 251},
      "aarch64": {"pidfd_send_signal": 424, "pidfd_getfd": 438, "process_vm_readv": 270,
                  "kcmp": 272, "ioprio_set": 30}}[os.uname().machine]


def sys_call(name, *args):
    """The raw syscall `name`: its result, or OSError."""
    ret = LIBC.syscall(ctypes.c_long(NR[name]), *args)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def refused(fn):
    """1 if fn() raised OSError, else 0."""
    try:
        fn()
        return 0
    except OSError:
        return 1
