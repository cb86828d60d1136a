"""Jobs built to trigger one profiling rule each (docs/jobs.md, "Profiling
rules"), and a healthy one that triggers none.  Usage: rules.py MODE [SECONDS]
  healthy   `step=N loss=X` every 0.1 s, little memory, no disk
  io        4 threads of 4 KiB writes, each followed by fsync, into the output
            folder: some thread waits on the disk nearly all the time (IOBottleneck);
            with the `gate` hyperparameter (a file name in the output folder) it
            first waits for that file (the test throttles the job's writes, then
            makes it), and writes at least twice as long as it waited
  memory    grows to 94 % of the memory limit and holds it (MemoryNearLimit)
  quiet     one line, then silence (NoLogOutput)
  slowinit  silence first, then steps (SlowInitialization)
  steps     steady `step_time=` values, then one far outlier (StepOutlier)
  cpu       a busy loop (CPUBottleneck, which needs a GPU job to apply)
The memory limit: the `limit_bytes` hyperparameter or the cgroup's, the smaller."""

import json
import os
import sys
import threading
import time


def hp():
    try:
        with open(os.environ.get("LABD_HYPERPARAMETERS",
                                 "/opt/ml/input/config/hyperparameters.json")) as fh:
            return json.load(fh)
    except OSError:
        return {}


def say(text):
    print(text, flush=True)


def healthy(seconds):
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
        say(f"step={n} loss={1.0 / n:.6f}")
        time.sleep(0.1)


def io(seconds):
    """Four threads, each writing 4 KiB and fsyncing it in a file of its own, so
    that some thread waits on the disk nearly all the time (fsync lets go of the
    GIL); one fsync loop alone waited about a quarter of the time here.  The
    writes of a gated job are throttled (test_jobs_rules.py): each fsync then
    waits for its turn on the device, whatever the load on the CPUs.  The
    samples taken while it waits for the gate show no I/O: it writes at least
    twice that long, so that those stay a minority."""
    out = os.environ.get("LABD_OUTPUT_DIR", "/opt/ml/output")
    gate = hp().get("gate")
    waited = 0.0
    if gate:
        t0 = time.monotonic()
        while not os.path.exists(os.path.join(out, gate)):
            if time.monotonic() - t0 > 60:
                say("the gate never opened: writing unthrottled")
                break
            time.sleep(0.05)
        waited = time.monotonic() - t0
        say(f"gate open after {waited:.2f} s")
    end = time.monotonic() + max(seconds, 2 * waited + 1)
    counts = [0] * 4

    def writer(k):
        block = os.urandom(4096)
        fd = os.open(os.path.join(out, f"io{k}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while time.monotonic() < end:
                os.pwrite(fd, block, (counts[k] % 256) * 4096)
                os.fsync(fd)
                counts[k] += 1
        finally:
            os.close(fd)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        say(f"fsyncs={sum(counts)}")


def memory_limit():
    """The smallest of the limits in sight: the hyperparameter, cgroup v2's
    memory.max, cgroup v1's memory.limit_in_bytes (a sandbox without a cgroup
    namespace may show a parent's, larger one; the smallest is the one that bites)."""
    found = []
    if "limit_bytes" in hp():
        found.append(int(hp()["limit_bytes"]))
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(f) as fh:
                v = fh.read().strip()
            if v != "max":
                found.append(int(v))
        except (OSError, ValueError):
            pass
    return min(found)


def rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory(seconds):
    limit = memory_limit()
    held = []
    while rss_bytes() < limit * 0.94:
        held.append(bytearray(1 << 20))
    say(f"holding rss={rss_bytes()} of limit={limit}")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)
        say(f"still holding {len(held)} MiB")


def quiet(seconds):
    say("one line, then nothing")
    time.sleep(seconds)
    say("done")


def slowinit(seconds):
    time.sleep(seconds)
    healthy(1)


def steps(seconds):
    for i in range(40):
        say(f"step={i + 1} step_time={0.010 + (i % 3) * 0.0005:.4f}")
        time.sleep(0.05)
    say("step=41 step_time=0.5000")
    for i in range(60):  # training goes on: rules run while a job trains
        say(f"step={42 + i} step_time=0.0100")
        time.sleep(0.05)


def cpu(seconds):
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(100000):
            n += 1
        say(f"spins={n}")


MODES = {"healthy": healthy, "io": io, "memory": memory, "quiet": quiet,
         "slowinit": slowinit, "steps": steps, "cpu": cpu}

if __name__ == "__main__":
    MODES[sys.argv[1]](float(sys.argv[2]) if len(sys.argv) > 2 else 4.0)
