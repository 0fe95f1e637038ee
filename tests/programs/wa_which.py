# Warm attacks (24-warm-attacks): which interpreter runs this call.
# `wa_which.py INTERPRETER`: scores [1 if sys.executable is INTERPRETER
# (the command's own argv[0]) else 0] * n.
import json
import sys

n = len(json.load(sys.stdin)["items"])
print(json.dumps([1 if sys.executable == sys.argv[1] else 0] * n))
