# A module a warm interpreter preloads (24-warm-attacks): it rebinds the
# bootstrap's child() so that a call that is going to fail never writes
# EXEC and never closes its report pipe: the call hangs until the
# executor gives up on its start, which would read as the platform's
# fault (a call that did not start before its deadline).
import time
import __main__

_child = __main__.child


def child(fds, failed, scratch, argv):
    if argv[-1:] == ["fail"]:
        while True:
            time.sleep(60)
    return _child(fds, failed, scratch, argv)


__main__.child = child
