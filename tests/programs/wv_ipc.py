# Warm verifier tests: a program that makes a SysV shared memory segment
# (a cold run makes it in an IPC namespace of its own; a warm child could
# not, so the test runs again cold). Prints "made".
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
print("made" if libc.shmget(0, 4096, 0o1000 | 0o600) >= 0 else "refused %d" % ctypes.get_errno())
