# Warm attacks (24-warm-attacks): `wa_fails.py ok`: scores [1] * n;
# `wa_fails.py fail`: exits 3, the tenant's crash.
import json
import sys

n = len(json.load(sys.stdin)["items"])
if sys.argv[1:] == ["fail"]:
    sys.exit(3)
print(json.dumps([1] * n))
