"""A small CNN trained on synthetic data: the real PyTorch job of the jobs tests.

CPU only, one thread, seeded, so two runs print the same losses.  The task is
learnable on purpose (the class is which quadrant of a 12x12 image is bright, plus
noise), so the loss falls within a few dozen steps.  Prints `step=N loss=X` once
per step (the tests' metric regex reads it), then writes model.pt to the model
folder.  Hyperparameters (epochs, lr, steps_per_epoch, batch_size) come from the
hyperparameters file labd writes; values may be numbers or strings, as managed
training passes them.  On the host (no job) it falls back to ./model and defaults.
"""

import json
import os
import sys

import torch
from torch import nn

CLASSES = 4
SIDE = 12


def hyperparameters():
    path = os.environ.get("LABD_HYPERPARAMETERS",
                          "/opt/ml/input/config/hyperparameters.json")
    try:
        with open(path) as fh:
            hp = json.load(fh)
    except FileNotFoundError:
        hp = {}
    return {
        "epochs": int(hp.get("epochs", 2)),
        "lr": float(hp.get("lr", 0.05)),
        "steps_per_epoch": int(hp.get("steps_per_epoch", 10)),
        "batch_size": int(hp.get("batch_size", 32)),
    }


def batch(gen, n):
    """n noisy images whose brightest quadrant is the label."""
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = torch.randn(n, 1, SIDE, SIDE, generator=gen) * 0.5
    half = SIDE // 2
    for i in range(n):
        r, c = divmod(int(y[i]), 2)
        x[i, 0, r * half:(r + 1) * half, c * half:(c + 1) * half] += 1.0
    return x, y


def model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * (SIDE // 4) ** 2, CLASSES))


def main():
    torch.set_num_threads(1)
    torch.manual_seed(7)
    gen = torch.Generator().manual_seed(11)
    hp = hyperparameters()
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=hp["lr"], momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    print(f"cnn: {json.dumps(hp, sort_keys=True)}", flush=True)
    step = 0
    for epoch in range(hp["epochs"]):
        for _ in range(hp["steps_per_epoch"]):
            x, y = batch(gen, hp["batch_size"])
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            step += 1
            print(f"step={step} loss={loss.item():.6g}", flush=True)
        print(f"epoch={epoch + 1} done", flush=True)
    out = os.environ.get("SM_MODEL_DIR") or os.environ.get("LABD_MODEL_DIR") or "model"
    os.makedirs(out, exist_ok=True)
    torch.save(net.state_dict(), os.path.join(out, "model.pt"))
    print(f"saved {os.path.join(out, 'model.pt')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
