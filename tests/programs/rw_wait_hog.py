# Wait until the file named by argv[1] exists (at most 30 s), then allocate
# and touch 16 MB blocks until something stops us: a memory hog whose kill
# the test arranges (a limit above the sandbox's, on its tenant's cgroup).
import os, sys, time
sys.stdin.read()
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
hog = []
for _ in range(4096):
    hog.append(bytearray(16 << 20))
print("[0.5]")
