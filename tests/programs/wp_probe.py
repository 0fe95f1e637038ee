# What a run's main process got, for 33-warm-prerun: scores the batch (1.0
# per item) once the file named by argv[1] exists (at most 60 s; "ready" in
# the scratch says it started), and reports on stderr, as one JSON object,
# its arguments after argv[1], its environment, the length and SHA-256 of
# the stdin it read, its
# working directory, uid and gid, and the descriptors it holds.
import hashlib
import json
import os
import sys
import time

raw = sys.stdin.buffer.read()
open("ready", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)


def is_open(fd):
    try:
        return os.fstat(fd) is not None
    except OSError:
        return False


fds = [fd for fd in range(1024) if is_open(fd)]
batch = json.loads(raw)
sys.stderr.write(json.dumps({"args": sys.argv[2:], "env": dict(os.environ), "stdin": [len(raw), hashlib.sha256(raw).hexdigest()],
                             "cwd": os.getcwd(), "uid": os.getuid(), "gid": os.getgid(), "fds": fds}))
print(json.dumps([1.0] * len(batch["items"])))
