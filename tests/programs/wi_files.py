# Warm interpreters: scores [an earlier call's file is in the working
# directory, an earlier call's file is in /tmp, writing /tmp worked,
# writing next to the call's directory worked, writing /mnt worked]: all 0
# in a warm call (a cold run may write /mnt: 65-serve-sandboxfusion).
import json
import os
import sys

json.load(sys.stdin)


def writes(path):
    try:
        with open(path, "w") as f:
            f.write("left by an earlier call")
        return 1
    except OSError:
        return 0


found_here = 1 if os.path.exists("left.txt") else 0
found_tmp = 1 if os.path.exists("/tmp/wi-left.txt") else 0
with open("left.txt", "w") as f:
    f.write("left by an earlier call")
print(json.dumps([found_here, found_tmp, writes("/tmp/wi-left.txt"), writes("../wi-left.txt"),
                  writes("/mnt/wi-left.txt")]))
