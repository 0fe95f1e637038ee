# A correct, CPU-bound reward: burns argv[1] ms of CPU time (not wall
# time: on a loaded node it takes longer), then scores every item 0.5.
import json, sys, time
batch = json.load(sys.stdin)
need = int(sys.argv[1]) / 1000.0
start = time.process_time()
x = 0
while time.process_time() - start < need:
    for i in range(10000):
        x += i * i
print(json.dumps([0.5] * len(batch["items"])))
