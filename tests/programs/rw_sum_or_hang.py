# A verifier-mode solution: "hang" on stdin sleeps until its deadline;
# anything else is summed at once.
import sys
import time
text = sys.stdin.read()
if text.strip() == "hang":
    time.sleep(3600)
print(sum(int(x) for x in text.split()))
