# Warm attacks (24-warm-attacks): a call that leaves its batch's id in a
# preloaded module's buffer (wa_shared_preload.BUF) and reports what an
# earlier call left there. Scores: [1 if an earlier call's batch id was
# found else 0, 1 if the buffer is the preloaded one (the call ran warm)].
import json
import sys

preloaded = "wa_shared_preload" in sys.modules
import wa_shared_preload  # noqa: E402

batch = json.load(sys.stdin)
n = len(batch["items"])
buf = wa_shared_preload.BUF
left = bytes(buf[:64]).rstrip(b"\0").decode("utf-8", "replace")
mine = batch["batch_id"].encode()[:63]
buf[:64] = mine + b"\0" * (64 - len(mine))
print(json.dumps(([1 if left and left != batch["batch_id"] else 0, 1 if preloaded else 0]
                  + [0] * n)[:n]))
