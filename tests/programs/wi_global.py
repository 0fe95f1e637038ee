# Warm interpreters: scores [the preloaded counter as found, as left, how
# many calls the module saw, whether it was preloaded]: 0, 1, 1, 1 in every
# warm call if nothing crosses calls.
import json
import sys

preloaded = "wi_state" in sys.modules
import wi_state  # noqa: E402

batch = json.load(sys.stdin)
before = wi_state.COUNTER
wi_state.COUNTER += 1
wi_state.SEEN.append(len(batch["items"]))
print(json.dumps([before, wi_state.COUNTER, len(wi_state.SEEN), 1 if preloaded else 0]))
