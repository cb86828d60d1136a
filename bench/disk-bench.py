#!/usr/bin/python3
"""disk-bench.py - a runtime's home against the host's disk: sequential and random
read and write, measured with fio in the same invocation, printed as ratios.

The home is the one a labd runtime gets: an ext4 image (15 GB, sparse) attached to a
loop device and mounted by `labbox run --home-image` into a full sandbox, fio running
there as the user.  The host side is a directory next to the image, so both sides
end on the same file system (the one the homes' images live on).  Every job bypasses
the page cache (O_DIRECT: inside, the home's ext4 on the loop device; outside, the
host's file system), except "write+fsync", a buffered write of a new file ended by
fsync, the way a training script saves a checkpoint.  The sides take turns, job by
job; the median of RUNS per side and job is shown, with the CPU time each request cost
(fio's own, plus the kernel worker threads' over the run: where the loop device submits
a home's requests to its image file).

Usage: disk-bench.py --workdir DIR [--summary FILE] [--size-mb 1024] [--seconds 8]
                     [--runs 3] [--only seq-write,...]
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
USER, USER_ID = "diskbench", "9"

# name: (fio arguments, what the table shows). Sizes and times are filled in later.
JOBS = {
    "seq-write": (["--rw=write", "--bs=1M", "--iodepth=8", "--direct=1", "--end_fsync=1"], "MB/s"),
    "seq-read": (["--rw=read", "--bs=1M", "--iodepth=8", "--direct=1"], "MB/s"),
    "rand-write": (["--rw=randwrite", "--bs=4k", "--iodepth=32", "--direct=1", "TIMED"], "IOPS"),
    "rand-read": (["--rw=randread", "--bs=4k", "--iodepth=32", "--direct=1", "TIMED"], "IOPS"),
    "write+fsync": (["--rw=write", "--bs=1M", "--direct=0", "--end_fsync=1"], "MB/s"),
}
# A job that writes a new file (the previous one removed first): a home's data is
# mostly written once (a data set unpacked, a checkpoint saved).
NEW_FILE = {"seq-write", "write+fsync"}


def labbox():
    return os.path.join(ROOT, os.environ.get("BUILD", "build"), "labbox")


def fio_argv(job, path, size_mb, seconds):
    args, _ = JOBS[job]
    timed = ["--time_based=1", f"--runtime={seconds}"] if "TIMED" in args else []
    return ["fio", f"--name={job}", f"--filename={path}", f"--size={size_mb}M",
            "--ioengine=libaio", "--output-format=json", "--invalidate=1",
            *[a for a in args if a != "TIMED"], *timed]


def side_argv(side, workdir, job, size_mb, seconds):
    """The command for one run: on the host in workdir/host, or in the sandbox's home."""
    if side == "host":
        path = os.path.join(workdir, "host", "fio.dat")
    else:
        path = f"/home/{USER}/fio.dat"
    fio = fio_argv(job, path, size_mb, seconds)
    script = ('rm -f "$1"; ' if job in NEW_FILE else "") + 'shift; exec "$@"'
    sh = ["/bin/sh", "-c", script, "sh", path, *fio]
    if side == "host":
        return sh
    return [labbox(), "run", "--user", USER, "--user-id", USER_ID,
            "--state-dir", os.path.join(workdir, "state"),
            "--home-image", os.path.join(workdir, "homes", f"{USER}.img"),
            "--mem", "4G", "--", *sh]


def kernel_threads_ticks():
    """{tid: CPU ticks so far} of the kernel's worker threads (kworker, ksoftirqd): where
    the loop device submits the home's requests to its image file.  System-wide, so
    other work on the host counts too; the host side's figure shows that floor."""
    ticks = {}
    for task in glob.glob("/proc/[0-9]*/task/[0-9]*"):
        try:
            with open(f"{task}/stat") as f:
                st = f.read()
        except OSError:
            continue
        comm, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
        if comm.startswith(("kworker", "ksoftirqd")):
            ticks[task] = int(rest[11]) + int(rest[12])  # utime, stime (fields 14, 15)
    return ticks


def kernel_threads_cpu_s(before, after):
    """CPU seconds the worker threads spent between two snapshots (a thread that ended
    in between is left out: never a negative figure)."""
    return sum(t - before.get(tid, 0) for tid, t in after.items()) / os.sysconf("SC_CLK_TCK")


def run_once(side, workdir, job, size_mb, seconds):
    """(MB/s or IOPS, CPU µs per request: fio's own and the kernel's worker threads')
    of one fio run."""
    k0 = kernel_threads_ticks()
    r = subprocess.run(side_argv(side, workdir, job, size_mb, seconds), capture_output=True,
                       text=True, timeout=600)
    k1 = kernel_threads_ticks()
    if r.returncode != 0:
        sys.exit(f"disk-bench: {side} {job} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    out = json.loads(r.stdout[r.stdout.index("{"):])
    j = out["jobs"][0]
    io = j["write"] if "write" in job else j["read"]
    runtime_s = j["job_runtime"] / 1000.0
    fio_cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * runtime_s
    cpu_us = (fio_cpu_s + kernel_threads_cpu_s(k0, k1)) * 1e6 / max(io["total_ios"], 1)
    if JOBS[job][1] == "IOPS":
        return io["iops"], cpu_us
    # bytes over the whole job, fsync included (fio's bw leaves out end_fsync)
    return io["io_bytes"] / runtime_s / 1e6, cpu_us


def loop_dio(workdir):
    """Whether the home's loop device does direct I/O on its backing file ("on", "off"
    or "?") and its logical block size, read from the host's sysfs while a sandbox
    holds the home (the device detaches itself when the last mount goes)."""
    image = os.path.realpath(os.path.join(workdir, "homes", f"{USER}.img"))
    p = subprocess.Popen([labbox(), "run", "--user", USER, "--user-id", USER_ID,
                          "--state-dir", os.path.join(workdir, "state"), "--home-image", image,
                          "--", "/bin/sleep", "30"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    found = "?"
    try:
        deadline = time.monotonic() + 20
        while found == "?" and time.monotonic() < deadline and p.poll() is None:
            for dev in os.listdir("/sys/block"):
                try:
                    with open(f"/sys/block/{dev}/loop/backing_file") as f:
                        if f.read().strip() != image:
                            continue
                    with open(f"/sys/block/{dev}/loop/dio") as f:
                        found = {"1": "on", "0": "off"}.get(f.read().strip(), "?")
                    with open(f"/sys/block/{dev}/queue/logical_block_size") as f:
                        found += f", {f.read().strip()}-byte blocks"
                except OSError:
                    continue
            time.sleep(0.05)
    finally:
        p.terminate()
        p.wait()
    return found


def fs_of(path):
    r = subprocess.run(["findmnt", "-n", "-o", "SOURCE,FSTYPE,OPTIONS", "--target", path],
                       capture_output=True, text=True)
    return r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--summary")
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default=",".join(JOBS))
    a = ap.parse_args()
    jobs = a.only.split(",")
    for j in jobs:
        if j not in JOBS:
            sys.exit(f"disk-bench: no job {j} (one of {', '.join(JOBS)})")
    for d in ("state", "homes", "host"):
        os.makedirs(os.path.join(a.workdir, d), exist_ok=True)
    results = {(j, s): [] for j in jobs for s in ("home", "host")}
    cpu = {(j, s): [] for j in jobs for s in ("home", "host")}
    dio = loop_dio(a.workdir)  # also creates the home (first use) before any timing
    try:
        for run in range(a.runs):
            for j in jobs:
                # the sides take turns, the first side alternating by run
                for side in (("home", "host") if run % 2 == 0 else ("host", "home")):
                    rate, cpu_us = run_once(side, a.workdir, j, a.size_mb, a.seconds)
                    results[(j, side)].append(rate)
                    cpu[(j, side)].append(cpu_us)
    finally:
        subprocess.run([labbox(), "gc", "--all", "--state-dir", os.path.join(a.workdir, "state")],
                       capture_output=True)
    print(f"home: 15 GB ext4 image on a loop device (direct I/O {dio}), image on "
          f"{fs_of(os.path.join(a.workdir, 'homes'))}")
    print(f"host: {fs_of(os.path.join(a.workdir, 'host'))}; fio {a.size_mb} MiB files, random "
          f"jobs {a.seconds} s, median of {a.runs}")
    print("cpu: µs of CPU per request (fio's own + the kernel's worker threads', "
          "system-wide), home / host")
    print(f"{'job':<12} {'unit':>5} {'home':>9} {'host':>9} {'ratio':>7} {'cpu home/host':>15}")
    rows = []
    for j in jobs:
        home = statistics.median(results[(j, "home")])
        host = statistics.median(results[(j, "host")])
        cpu_home = statistics.median(cpu[(j, "home")])
        cpu_host = statistics.median(cpu[(j, "host")])
        rows.append((j, JOBS[j][1], home, host))
        print(f"{j:<12} {JOBS[j][1]:>5} {home:>9.0f} {host:>9.0f} {home / host:>6.2f}x "
              f"{cpu_home:>7.1f} / {cpu_host:<6.1f}")
    if a.summary:
        with open(a.summary, "a") as fh:
            for j, unit, home, host in rows:
                ratio = home / host
                fh.write(f"home {j}\t{unit}\t{home:.0f}\thost\t{host:.0f}\t{ratio:.2f}x\t>=0.9x\t"
                         f"{'yes' if ratio >= 0.9 else 'no'}\n")


if __name__ == "__main__":
    main()
