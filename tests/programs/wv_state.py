# Warm verifier tests: nothing of one test reaches the next. Input "leave":
# leave a file in the working directory, in /tmp and in /mnt, a daemon that
# keeps touching /tmp/heartbeat, a changed module global, environment and
# recursion limit, the times and the modes of the working directory, /tmp,
# /dev/shm and /mnt (a channel of 2 x 64 bits each, and 12 bits), then look
# again (the control: each is seen where it
# was left). Every test prints what it sees of an earlier one first
# ("clean": nothing).
import builtins
import json
import os
import sys
import time

MARK = 1234567890  # the times a test leaves on its directories
MODE = 0o701  # and the mode
SHARED_DIRS = (".", "/tmp", "/dev/shm", "/mnt")


def look():
    seen = []
    if os.path.exists("left.txt"):
        seen.append("file")
    if os.path.exists("/tmp/left.txt"):
        seen.append("tmp")
    if os.path.exists("/mnt/left.txt"):
        seen.append("mnt")
    if hasattr(builtins, "left_by_test") or hasattr(sys, "left_by_test") or \
            hasattr(json, "left_by_test"):
        seen.append("global")
    if sys.getrecursionlimit() != 1000:
        seen.append("limit")
    if "LEFT_BY_TEST" in os.environ:
        seen.append("env")
    try:
        os.remove("/tmp/heartbeat")
    except OSError:
        pass
    time.sleep(0.3)  # a daemon left running touches its file again meanwhile
    if os.path.exists("/tmp/heartbeat"):
        seen.append("daemon")
    if any(int(t) == MARK for d in SHARED_DIRS for t in (os.stat(d).st_atime, os.stat(d).st_mtime)):
        seen.append("times")
    if any(os.stat(d).st_mode & 0o7777 == MODE for d in SHARED_DIRS):
        seen.append("modes")
    return " ".join(seen) or "clean"


def leave():
    for path in ("left.txt", "/tmp/left.txt", "/mnt/left.txt"):
        with open(path, "w") as f:
            f.write("left")
    builtins.left_by_test = sys.left_by_test = json.left_by_test = 1
    os.environ["LEFT_BY_TEST"] = "1"
    sys.setrecursionlimit(5000)
    for d in SHARED_DIRS:
        os.utime(d, (MARK, MARK))
        os.chmod(d, MODE)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            fd = os.open("/dev/null", os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(fd, target)
            for _ in range(3000):
                open("/tmp/heartbeat", "w").close()
                time.sleep(0.01)
        os._exit(0)


before = look()
if sys.stdin.read().strip() == "leave":
    leave()
    print(before, "|", look())
else:
    print(before)
