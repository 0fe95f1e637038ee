# Hold its sandbox (and its tenant's concurrency slot) until the file named
# by argv[1] exists (at most 60 s), then score the batch: a run the test
# ends when it chooses. "ready" in the scratch says it started.
import json, os, sys, time
batch = json.load(sys.stdin)
open("ready", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps([1.0] * len(batch["items"])))
