# A verifier-mode solution: "hog" on stdin allocates and touches 16 MB
# blocks until something stops it; anything else is summed.
import sys
text = sys.stdin.read()
if text.strip() == "hog":
    hog = []
    for _ in range(4096):
        hog.append(bytearray(16 << 20))
print(sum(int(x) for x in text.split()))
