# A module a warm interpreter preloads (34-warm-interpreter): state that a
# call may change in its own copy and no later call may see.
COUNTER = 0
SEEN = []
