# Warm interpreters, the call's child forked ahead of the call
# (34-warm-interpreter): scores [its pid in the sandbox, the number N of
# the cgroup run-<N> it is in, the preloaded counter as found, as left]:
# the counter is 0 then 1 in every call if nothing crosses calls.
import json
import os
import sys

import wi_state

json.load(sys.stdin)
with open("/proc/self/cgroup") as f:
    unified = [line.strip()[3:] for line in f if line.startswith("0::")][0]
leaf = os.path.basename(unified)
before = wi_state.COUNTER
wi_state.COUNTER += 1
print(json.dumps([os.getpid(), int(leaf[4:]) if leaf.startswith("run-") else -1, before,
                  wi_state.COUNTER]))
