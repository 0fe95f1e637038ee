# Wait for the file named by argv[1] (at most 60 s), then write a file in
# the scratch (the working directory) and read it back: a cold run's
# scratch still works once the host's mount of it is gone. Scores 1.0 each
# when it does, 0.0 when it does not.
import json, os, sys, time
batch = json.load(sys.stdin)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
with open("after-go", "w") as f:
    f.write("x" * 4096)
with open("after-go") as f:
    ok = f.read() == "x" * 4096 and os.getcwd() == os.environ["HOME"]
print(json.dumps([1.0 if ok else 0.0] * len(batch["items"])))
