# A module a warm interpreter preloads (24-warm-attacks): the parent ends
# during its start, before READY, with no exception (so no FAILED): every
# warm start would read as the platform's fault.
import os

os._exit(0)
