# Warm interpreters, with the agent: one connect the tenant's policy denies
# (an event for the call's batch), then one score per item: 1 if refused.
import json
import socket
import sys

batch = json.load(sys.stdin)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.connect(("10.255.0.1", 9))
    refused = 0
except PermissionError:
    refused = 1
except OSError:
    refused = 0
print(json.dumps([refused] * len(batch["items"])))
