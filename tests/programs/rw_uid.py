# Score every item with the uid the program runs as: which slot it got.
import json, os, sys
batch = json.load(sys.stdin)
print(json.dumps([float(os.getuid())] * len(batch["items"])))
