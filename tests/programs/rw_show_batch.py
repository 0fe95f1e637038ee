"""Writes the batch it read to stderr and exits 3: what the tenant's code
sees, in the failed result's stderr excerpt (the canary suite checks the
probes' shape and ids; an ok batch's result carries no stderr when the
tenant has canaries)."""
import sys

sys.stderr.write(sys.stdin.read())
sys.exit(3)
