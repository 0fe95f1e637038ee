# Warm attacks (24-warm-attacks): a call that runs its sandbox out of
# memory so that the OOM killer takes its warm parent rather than the
# call. The memory is a memfd's pages, charged to the sandbox's memory
# cgroup but mapped by no process (no process's RSS), written by a fresh,
# small interpreter that replaced the call's process (exec): the biggest
# process left in the cgroup is the parent. `fill`: that; else the scores
# [1] * n.
import json
import os
import sys

n = len(json.load(sys.stdin)["items"])
if sys.argv[1:] != ["fill"]:
    print(json.dumps([1] * n))
    sys.exit(0)
FILL = """
import os
fd = os.memfd_create("fill", 0x1 | 0x8)  # MFD_CLOEXEC | MFD_NOEXEC_SEAL (the sandbox's rule)
chunk = b"x" * (1 << 20)
while True:
    os.write(fd, chunk)
"""
sys.stdout.flush()
os.execv(sys.executable, [sys.executable, "-S", "-c", FILL])
