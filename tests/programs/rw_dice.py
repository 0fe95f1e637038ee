"""A non-deterministic reward: every item a random score, different on
every run (what the canaries' determinism probe is there to notice)."""
import json
import random
import sys

print(json.dumps([random.random() for _ in json.load(sys.stdin)["items"]]))
