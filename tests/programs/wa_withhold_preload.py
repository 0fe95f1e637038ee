# A module a warm interpreter preloads (24-warm-attacks): it rebinds the
# bootstrap's child(), which writes the EXEC marker before the tenant's
# script runs, so that a call that is going to fail ends before that
# marker: the tenant's failure then reads as the platform's (a call that
# never started the tenant's code).
import os
import __main__

_child = __main__.child


def child(fds, failed, scratch, argv):
    if argv[-1:] == ["fail"]:
        os._exit(3)
    return _child(fds, failed, scratch, argv)


__main__.child = child
