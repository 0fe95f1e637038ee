# Warm attacks (24-warm-attacks). `wa_parent_knobs.py set`: a call tries to change its warm parent
# (its ppid: same uid, same process group) through the calls that check
# only the uid, not ptrace access or Landlock's scopes. What it changed
# would be inherited by every later call's child: a channel from one call
# to the next, and a way to break (or starve) the next call. Scores, 1 =
# refused: prlimit of the parent (RLIMIT_NOFILE), setpriority of the parent, of its process
# group and of the slot uid, sched_setscheduler (SCHED_IDLE), sched_setaffinity,
# ioprio_set; then two controls that must still work: the same calls on
# the call's own process (pid 0).
# `wa_parent_knobs.py read`: what this call's process inherited from the
# parent that an earlier call could have set there: its nice value, its
# RLIMIT_NOFILE soft limit, whether its policy is SCHED_IDLE, how many CPUs
# it may run on, then 0s.
import json
import os
import resource
import sys

from wa_lib import refused, sys_call

n = len(json.load(sys.stdin)["items"])
if sys.argv[1:] == ["read"]:
    print(json.dumps(([os.getpriority(os.PRIO_PROCESS, 0),
                       resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                       1 if os.sched_getscheduler(0) == os.SCHED_IDLE else 0,
                       len(os.sched_getaffinity(0))] + [0] * n)[:n]))
    sys.exit(0)
parent = os.getppid()
IOPRIO_WHO_PROCESS, IOPRIO_CLASS_IDLE = 1, 3
MARK = 77  # an RLIMIT_NOFILE soft limit no sandbox has


def ioprio_set(pid):
    sys_call("ioprio_set", IOPRIO_WHO_PROCESS, pid, IOPRIO_CLASS_IDLE << 13)


soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
cpus = os.sched_getaffinity(0)
controls = [  # first: the process group's and the uid's setpriority renice this process too
    1 - refused(lambda: resource.prlimit(0, resource.RLIMIT_NOFILE, (soft - 1, hard))),
    1 - refused(lambda: os.setpriority(os.PRIO_PROCESS, 0, 1)),
]
scores = [
    refused(lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE, (MARK, hard))),
    refused(lambda: os.setpriority(os.PRIO_PROCESS, parent, 19)),
    refused(lambda: os.setpriority(os.PRIO_PGRP, 0, 18)),
    refused(lambda: os.setpriority(os.PRIO_USER, 0, 17)),
    refused(lambda: os.sched_setscheduler(parent, os.SCHED_IDLE, os.sched_param(0))),
    refused(lambda: os.sched_setaffinity(parent, {min(cpus)})),
    refused(lambda: ioprio_set(parent)),
] + controls
print(json.dumps(scores))
