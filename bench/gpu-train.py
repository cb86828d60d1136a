"""The PyTorch loop of bench/gpu-job.sh: a ResNet-like CNN on synthetic 3x64x64
images, batch 256, mixed precision (autocast + GradScaler), channels-last, on
cuda:0.  Warms up for WARMUP seconds (cuDNN autotuning, allocator), then trains
for SECONDS and prints `samples_per_s=X` (and the GPU it saw).  The same file
runs on the host and as a labd GPU job, so the two numbers compare the same work.
Standard library + torch only.  Usage: gpu-train.py [SECONDS] [WARMUP]"""

import sys
import time

import torch
from torch import nn


def block(cin, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def net():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        block(64, 128, 2), block(128, 256, 2), block(256, 512, 2), block(512, 512, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60
    warmup = float(sys.argv[2]) if len(sys.argv) > 2 else 15
    if not torch.cuda.is_available():
        print("gpu-train: torch sees no CUDA device", flush=True)
        return 2
    dev = torch.device("cuda:0")
    print(f"gpu-train: torch {torch.__version__} on {torch.cuda.get_device_name(dev)}", flush=True)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = net().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()
    loss_fn = nn.CrossEntropyLoss()
    bs = 256
    x = torch.randn(bs, 3, 64, 64, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (bs,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    end = time.monotonic() + warmup
    while time.monotonic() < end:
        step()
    torch.cuda.synchronize()
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        loss = step()
        n += 1
        if n % 50 == 0:
            print(f"step={n} loss={loss.item():.4f}", flush=True)
    torch.cuda.synchronize()
    dt = time.monotonic() - t0
    print(f"samples_per_s={n * bs / dt:.1f} steps={n} seconds={dt:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
