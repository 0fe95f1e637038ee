# Warm attacks (24-warm-attacks): a call that leaves a daemon behind (fork,
# setsid, fork again, SIGTERM and SIGHUP ignored) to outlive it and wait
# for the next call of the same parent. Scores [1] * n at once.
import json
import os
import signal
import sys
import time

n = len(json.load(sys.stdin)["items"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.closerange(0, 3)
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
print(json.dumps([1] * n))
