# A module a warm interpreter preloads (24-warm-attacks): it wraps
# os.waitpid in the parent, which waits for each call's child with it, and
# ends the parent when the call failed, so that the call looks like the
# platform's fault (its warm interpreter died) rather than the tenant's.
import os

_waitpid = os.waitpid


def waitpid(pid, options):
    got = _waitpid(pid, options)
    if got[1] != 0:
        os._exit(0)
    return got


os.waitpid = waitpid
