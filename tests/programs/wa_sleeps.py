# Warm attacks (24-warm-attacks): `wa_sleeps.py ok`: scores [1] * n;
# `wa_sleeps.py fail`: sleeps past any deadline, the tenant's timeout.
import json
import sys
import time

n = len(json.load(sys.stdin)["items"])
if sys.argv[1:] == ["fail"]:
    time.sleep(100)
print(json.dumps([1] * n))
