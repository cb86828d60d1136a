"""Counts ticks until stopped; on SIGTERM saves the count to the checkpoint
folder (/opt/ml/checkpoints/state) and exits 0, as a script given a stop grace
period does.  Prints `tick=N` every 0.2 s and `saved tick=N` after saving."""

import os
import signal
import sys
import time

CKPT = os.environ.get("LABD_CHECKPOINT_DIR", "/opt/ml/checkpoints")
tick = 0


def save(signum, frame):
    path = os.path.join(CKPT, "state")
    with open(path + ".tmp", "w") as fh:
        fh.write(f"{tick}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(path + ".tmp", path)
    print(f"saved tick={tick} signal={signum}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, save)
while True:
    tick += 1
    print(f"tick={tick}", flush=True)
    time.sleep(0.2)
