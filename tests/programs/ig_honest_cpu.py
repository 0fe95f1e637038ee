# A correct, CPU-heavy verifier solution: reads n from stdin and prints
# sum(i*i for i < n) mod 1000000007, computed the slow way (a pure Python
# loop: ~0.5-1 s of CPU for the n the tests choose). The right answer has
# a closed form, (n-1)n(2n-1)/6 mod p, which the tests compute.
import sys

n = int(sys.stdin.read().split()[0])
s = 0
for i in range(n):
    s += i * i
print(s % 1000000007)
