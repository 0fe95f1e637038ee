# Warm verifier tests: marks its start in the working directory (the
# input, how long it sleeps, in ./started), sleeps,
# prints "ok" (a parent killed meanwhile is the platform's fault).
import sys
import time

seconds = sys.stdin.read()
with open("started", "w") as f:
    f.write(seconds)
time.sleep(float(seconds or 0))
print("ok")
