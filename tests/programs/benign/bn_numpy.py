# Benign: numpy, where it is installed (the runner skips it otherwise).
import json, sys
import numpy as np

batch = json.load(sys.stdin)
a = np.random.default_rng(0).standard_normal((200, 200))
assert np.allclose(a @ np.linalg.inv(a), np.eye(200), atol=1e-6)
assert np.fft.fft(np.ones(8))[0] == 8
print(json.dumps([1.0] * len(batch["items"])))
