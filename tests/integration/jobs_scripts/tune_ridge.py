#!/usr/bin/python3
"""A small real training for the tuning tests: ridge regression by full-batch
gradient descent (standard library only) on a fixed synthetic data set, over a
learning rate `lr` and an L2 regularisation `reg` from
/opt/ml/input/config/hyperparameters.json (strings, as managed training passes
them): `epochs` steps (default 100), `epoch=N val_loss=X` printed every
`every` steps (default 10), `pause` seconds after each print.  The validation
loss is high for a tiny lr (not learnt yet) and explodes for a large one;
with 8 noisy training rows of 6 features the few steps themselves regularise,
so the best (lr, reg) is a small lr with little reg (200 validation rows).
`train()` is imported by the tests, which find the optimum with a dense grid."""

import json
import math
import random
import sys
import time

D = 6
W_TRUE = [3.0, -3.0, 2.0, 2.0, 1.0, -1.0]


def data(n, rng):
    rows = []
    for _ in range(n):
        x = [rng.gauss(0, 1) for _ in range(D)]
        rows.append((x, sum(a * b for a, b in zip(W_TRUE, x)) + rng.gauss(0, 3.0)))
    return rows


def val_loss(w, val):
    loss = sum((sum(a * b for a, b in zip(w, x)) - y) ** 2 for x, y in val) / len(val)
    return loss if math.isfinite(loss) and loss < 1e6 else 1e6


def train(lr, reg, epochs=100, every=10, report=None, pause=0.0):
    """The validation losses reported (every `every` epochs; the last is the objective)."""
    rng = random.Random(7)
    tr, val = data(8, rng), data(200, rng)
    w = [0.0] * D
    losses = []
    for epoch in range(1, epochs + 1):
        g = [2 * reg * wi for wi in w]
        for x, y in tr:
            e = sum(a * b for a, b in zip(w, x)) - y
            if not math.isfinite(e) or abs(e) > 1e12:
                e = 1e12  # diverged: keep the numbers finite, the loss says so
            for k in range(D):
                g[k] += 2 * e * x[k] / len(tr)
        w = [max(-1e12, min(1e12, wi - lr * gi)) for wi, gi in zip(w, g)]
        if epoch % every == 0 or epoch == epochs:
            losses.append(val_loss(w, val))
            if report:
                report(epoch, losses[-1])
            if pause:
                time.sleep(pause)
    return losses


def main():
    with open("/opt/ml/input/config/hyperparameters.json") as fh:
        hp = json.load(fh)
    train(float(hp["lr"]), float(hp["reg"]), int(hp.get("epochs", "100")),
          int(hp.get("every", "10")),
          lambda e, v: print(f"epoch={e} val_loss={v:.6f}", flush=True),
          float(hp.get("pause", "0")))


if __name__ == "__main__":
    sys.exit(main())
