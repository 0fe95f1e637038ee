# Issue 31's attack: a wrong program that tries to dodge its 0 by starving
# itself. It never answers. It pins itself to one CPU (sched_setaffinity
# on itself, which seccomp allows), forks two more processes that inherit
# the pin, and the three spin together for the first 45 ms of every
# 100 ms and sleep the rest: over a run it gets ~0.45 of one CPU, and its
# own cgroup's PSI "some" shows it waiting ~45% of the time, a wait made
# entirely by its own tasks queueing behind each other on that CPU.
# argv[1], optional: the CPU to pin to (default: the lowest allowed).
import os
import sys
import time

cpu = int(sys.argv[1]) if len(sys.argv) > 1 else min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})
for _ in range(2):
    if os.fork() == 0:
        break
PERIOD, BUSY = 0.1, 0.045
while True:
    phase = time.monotonic() % PERIOD
    if phase < BUSY:
        end = time.monotonic() - phase + BUSY
        while time.monotonic() < end:
            pass
    else:
        time.sleep(PERIOD - phase)
