# Warm interpreters: the IPC objects a call could leave for a later call in
# its parent's IPC namespace. Scores, 1 = refused: a SysV shared memory
# segment, semaphore set and message queue, a POSIX message queue.
import ctypes
import json
import os
import sys

json.load(sys.stdin)
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000


def refused(ret):
    return 1 if ret == -1 and ctypes.get_errno() == 1 else 0  # EPERM


print(json.dumps([
    refused(libc.shmget(0, 4096, IPC_CREAT | 0o600)),
    refused(libc.semget(0, 1, IPC_CREAT | 0o600)),
    refused(libc.msgget(0, IPC_CREAT | 0o600)),
    refused(libc.mq_open(b"/wi-left", os.O_CREAT | os.O_RDWR, 0o600, None)),
]))
