"""Stand-in GPU hosts for the shared-GPU tests (docs/gpu.md, "Testing without a card"):
card and driver nodes made with mknod (nothing answers behind them), the driver's MIG
capability files in a [gpu] caps_dir and their /dev/nvidia-caps nodes. The stand-in
NVML's cards JSON stays with each test: what it reads is what the test is about."""

import os
import stat


def free_major():
    """A character major no driver holds (the capability nodes' stand-in): an open
    through the device cgroup is ENXIO, not a real device."""
    used = set()
    with open("/proc/devices") as fh:
        for line in fh:
            if line.startswith("Block"):
                break
            if line.strip() and line.split()[0].isdigit():
                used.add(int(line.split()[0]))
    return next(m for m in range(500, 512) if m not in used)


def card_nodes(nodes, minors):
    """/dev/nvidia<minor> of each card, nvidiactl, nvidia-uvm and an empty nvidia-caps/
    under nodes (made)."""
    os.makedirs(os.path.join(nodes, "nvidia-caps"))
    for name, major, minor in ([(f"nvidia{m}", 195, m) for m in minors]
                               + [("nvidiactl", 195, 255), ("nvidia-uvm", 235, 0)]):
        os.mknod(os.path.join(nodes, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def cap_node(nodes, capmaj, minor):
    """/dev/nvidia-caps/nvidia-cap<minor> under nodes."""
    os.mknod(os.path.join(nodes, "nvidia-caps", f"nvidia-cap{minor}"), 0o444 | stat.S_IFCHR,
             os.makedev(capmaj, minor))


def add_instance(caps, card, gi, ci, gi_minor, ci_minor, nodes=None, capmaj=None):
    """The driver's access files of one compute instance and its GPU instance; with
    nodes, also their two capability nodes."""
    d = os.path.join(caps, f"gpu{card}", "mig", f"gi{gi}")
    os.makedirs(os.path.join(d, f"ci{ci}"), exist_ok=True)
    for path, minor in ((os.path.join(d, "access"), gi_minor),
                        (os.path.join(d, f"ci{ci}", "access"), ci_minor)):
        with open(path, "w") as fh:
            fh.write(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
        if nodes:
            cap_node(nodes, capmaj, minor)
