"""Counts to the hyperparameter `target`, one step every 0.25 s, saving the count
after each step in /opt/ml/checkpoints/state (write, fsync, rename).  A retried
attempt finds the state and continues from it: `resumed from N` in its log.  The
retry test kills the pool from outside while it counts."""

import json
import os
import time

CKPT = "/opt/ml/checkpoints"
with open("/opt/ml/input/config/hyperparameters.json") as fh:
    target = int(json.load(fh).get("target", 20))
state = os.path.join(CKPT, "state")
count = 0
if os.path.exists(state):
    with open(state) as fh:
        count = int(fh.read())
    print(f"resumed from {count}", flush=True)
else:
    print("fresh start", flush=True)
while count < target:
    count += 1
    with open(state + ".tmp", "w") as fh:
        fh.write(str(count))
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(state + ".tmp", state)
    print(f"count={count}", flush=True)
    time.sleep(0.25)
print(f"done at {count}", flush=True)
