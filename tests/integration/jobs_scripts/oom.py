"""Allocates (and touches) memory 16 MiB at a time until the sandbox's memory
limit kills it: the out-of-memory job."""

import time

held = []
while True:
    held.append(bytearray(16 << 20))  # zero-filled: every page is touched
    print(f"held={len(held) * 16} MiB", flush=True)
    time.sleep(0.01)
