# A module a warm interpreter preloads (24-warm-attacks): it takes the
# names of the executor's future call directories in the scratch
# (call-<n>), so that the executor cannot make them (EEXIST): every call
# would read as the platform's fault.
import os

for d in {os.getcwd(), os.environ.get("HOME", "")}:
    if d:
        for n in range(1, 300):
            try:
                os.mkdir(os.path.join(d, "call-%d" % n))
            except OSError:
                pass
