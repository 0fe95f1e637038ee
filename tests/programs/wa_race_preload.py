# A module a warm interpreter preloads (24-warm-attacks): a thread that
# stays in the parent (whose working directory is the scratch, writable in
# the sandbox's own Landlock domain) and swaps each call's directory, which
# the executor makes as root (mkdir, then chown), for a symlink to a host
# path (<test dir>/victim): a chown that follows it gives that host file to
# the sandbox's slot uid.
import os
import threading

TARGET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "victim")


def race():
    # Each parent's first call is call-1 (a lost race ends the parent: its
    # call fails, and the next call gets a new one): spin on that name.
    while True:
        try:
            os.rmdir("call-1")
        except OSError:
            continue
        try:
            os.symlink(TARGET, "call-1")
        except OSError:
            pass


threading.Thread(target=race, daemon=True).start()
