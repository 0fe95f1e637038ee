# Warm verifier tests: one program, what it does chosen by its first input
# line; each mode's expected output is "ok" (docs/warm-interpreters.md,
# "Warm interpreters for verifier tests"). The same tests run cold and warm must
# get the same verdicts, exit codes and stderr.
import atexit
import os
import sys
import threading
import time

mode = sys.stdin.readline().strip()
if mode == "pass":
    print("ok")
elif mode == "wrong":
    print("no")
elif mode == "hang":
    while True:
        pass
elif mode == "segv":
    os.kill(os.getpid(), 11)
elif mode == "raise":
    raise ValueError("bad input: " + mode)
elif mode == "chained":
    try:
        {}["missing"]
    except KeyError as e:
        raise RuntimeError("while looking it up") from e
elif mode == "exit3":
    print("ok")
    sys.exit(3)
elif mode == "exitmsg":
    sys.exit("a message for stderr")
elif mode == "_exit4":
    print("ok")  # buffered: lost, as cold
    os._exit(4)
elif mode == "atexit":
    atexit.register(print, "ok")
elif mode == "unflushed":
    sys.stdout.write("ok")
elif mode == "thread":
    threading.Thread(target=lambda: (time.sleep(0.2), print("ok"))).start()
elif mode == "interrupt":
    raise KeyboardInterrupt
elif mode == "recursion":
    def down(n):
        return down(n + 1)
    down(0)
elif mode == "excepthook":
    sys.excepthook = lambda t, v, tb: print("hooked", t.__name__, file=sys.stderr)
    raise ValueError("x")
else:
    print("unknown mode %r" % mode)
