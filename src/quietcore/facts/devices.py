"""GPUs and network devices, from the PCI bus's sysfs files: what each is,
the NUMA node and CPUs near it, its interrupt vectors and their threaded
handlers (the `irq/N-name` kthreads), and the driver bound to it.

Devices are named by their PCI class and vendor, from files the kernel
writes (no command's output): a GPU is a display or 3D controller (class
0x0300, 0x0302) of NVIDIA, AMD or Intel; a NIC is an Ethernet (0x0200),
InfiniBand (0x0207) or other network (0x0280) controller. A virtio device
is the hypervisor's stand-in, not a device of the node: it is left out, so
a VM's fingerprint does not change with its virtual NIC. NVIDIA's driver
gives each GPU's model in /proc/driver/nvidia/gpus/ADDR/information.

A file missing or malformed (a snapshot of an older quietcore, a root
made by hand) leaves that fact unknown, listed in `unknown`; never an
error."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from quietcore.facts.cpulist import format_cpulist, parse_cpulist
from quietcore.facts.root import Root
from quietcore.facts.tasks import Task

PCI = "sys/bus/pci/devices"
NVIDIA_GPUS = "proc/driver/nvidia/gpus"
VENDORS = {
    0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x15B3: "Mellanox", 0x17DB: "HPE Cray", 0x14E4: "Broadcom",
    0x1D0F: "Amazon", 0x1077: "QLogic", 0x1924: "Solarflare", 0x19A2: "Emulex", 0x1FC1: "QLogic (Pathscale)",
    0x1CD7: "Cornelis",
}  # fmt: skip
GPU_VENDORS = frozenset({0x10DE, 0x1002, 0x8086})
VIRTIO = 0x1AF4  # Red Hat's virtio: the hypervisor's device
GPU_CLASSES = (0x0300, 0x0302)
NIC_CLASSES = {0x0200: "Ethernet", 0x0207: "InfiniBand", 0x0280: "network"}
_ADDR = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_MODEL = re.compile(r"^Model:\s*(.+?)\s*$", re.M)


@dataclass
class Device:
    address: str  # 0000:00:06.0
    kind: str  # gpu, nic
    pci_class: int
    vendor: int
    device: int
    driver: str | None
    numa_node: int | None  # None: unknown, or -1 in sysfs (no locality given, as in most VMs)
    local_cpus: frozenset[int] | None
    irq: int | None  # the legacy INTx line (or the first MSI vector)
    msi_irqs: list[int] = field(default_factory=list)
    model: str | None = None  # the driver's own name for it, where it gives one
    unknown: list[str] = field(default_factory=list)  # facts that could not be read: "numa_node: missing"

    @property
    def vendor_name(self) -> str:
        return VENDORS.get(self.vendor, f"vendor 0x{self.vendor:04x}")

    @property
    def name(self) -> str:
        """ "NVIDIA H200 at 0000:00:06.0", "Mellanox InfiniBand (mlx5_core) at 0000:17:00.0"."""
        if self.model:
            what = self.model if self.model.startswith(self.vendor_name) else f"{self.vendor_name} {self.model}"
        elif self.kind == "gpu":
            what = f"{self.vendor_name} GPU 0x{self.device:04x}"
        else:
            what = f"{self.vendor_name} {NIC_CLASSES.get(self.pci_class, 'network')}"
            what += f" ({self.driver})" if self.driver else ""
        return f"{what} at {self.address}"

    @property
    def vectors(self) -> list[int]:
        """Its interrupts: the MSI/MSI-X vectors, else the legacy line."""
        return self.msi_irqs or ([self.irq] if self.irq else [])

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "kind": self.kind, "name": self.name, "class": f"0x{self.pci_class:04x}",
                "vendor": f"0x{self.vendor:04x}", "device": f"0x{self.device:04x}", "driver": self.driver,
                "numa_node": self.numa_node,
                "local_cpus": format_cpulist(self.local_cpus) if self.local_cpus is not None else None,
                "irq": self.irq, "msi_irqs": self.msi_irqs, "model": self.model, "unknown": self.unknown}  # fmt: skip


def _hex(root: Root, rel: str) -> int | None:
    text = root.read_line(rel)
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def _kind(pci_class: int, vendor: int) -> str | None:
    if vendor == VIRTIO:
        return None
    top = pci_class >> 8  # the class file holds class, subclass and programming interface: 0x030200
    if top in GPU_CLASSES and vendor in GPU_VENDORS:
        return "gpu"
    if top in NIC_CLASSES:
        return "nic"
    return None


def driver_of(root: Root, base: str) -> str | None:
    """The bound driver's name: the `driver` link's last part (read as a
    link, never followed: it leads out of a snapshot)."""
    try:
        target = os.readlink(root.resolve(f"{base}/driver"))
    except OSError:
        return None
    name = target.rstrip("/").rsplit("/", 1)[-1]
    return name if re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", name) else None


def read_devices(root: Root) -> list[Device]:
    """The node's GPUs and NICs, by PCI address."""
    out = []
    for address in root.listdir(PCI):
        if not _ADDR.match(address):
            continue
        base = f"{PCI}/{address}"
        pci_class, vendor = _hex(root, f"{base}/class"), _hex(root, f"{base}/vendor")
        if pci_class is None or vendor is None:
            continue  # not even what it is: nothing to say of it
        kind = _kind(pci_class, vendor)
        if kind is None:
            continue
        unknown: list[str] = []
        device = _hex(root, f"{base}/device")
        if device is None:
            unknown.append(f"device: {root.read(f'{base}/device')[1] or 'malformed'}")
        node_text = root.read_line(f"{base}/numa_node")
        numa_node = int(node_text) if node_text and re.fullmatch(r"-?\d+", node_text) else None
        if numa_node is None:
            unknown.append(f"numa_node: {root.read(f'{base}/numa_node')[1] or 'malformed'}")
        elif numa_node < 0:
            numa_node = None
            unknown.append("numa_node: -1 (no locality given: a VM's, or a one-node machine's)")
        local: frozenset[int] | None = None
        text = root.read_line(f"{base}/local_cpulist")
        try:
            local = parse_cpulist(text) if text else None
        except ValueError:
            local = None
        if local is None:
            unknown.append(f"local_cpulist: {root.read(f'{base}/local_cpulist')[1] or 'malformed'}")
        irq_text = root.read_line(f"{base}/irq")
        irq = int(irq_text) if irq_text and irq_text.isdigit() and int(irq_text) > 0 else None
        msi = sorted(int(n) for n in root.listdir(f"{base}/msi_irqs") if n.isdigit())
        driver = driver_of(root, base)
        if driver is None:
            unknown.append("driver: none bound, or its link not kept")
        model = None
        info = root.read_text(f"{NVIDIA_GPUS}/{address}/information") if vendor == 0x10DE else None
        if info and (m := _MODEL.search(info)):
            model = m.group(1)[:80]
        out.append(Device(address, kind, pci_class >> 8, vendor, device or 0, driver, numa_node, local, irq, msi,
                          model, unknown))  # fmt: skip
    return out


def fingerprint_part(devices: list[Device]) -> list[dict[str, Any]]:
    """What of the devices goes into the node's fingerprint: which are there,
    bound to what (a node that lost a GPU, or whose NIC's driver changed, is
    another configuration); none at all on a node without GPUs and NICs."""
    return [{"address": d.address, "kind": d.kind, "name": d.name, "vendor": f"0x{d.vendor:04x}",
             "device": f"0x{d.device:04x}", "driver": d.driver, "numa_node": d.numa_node}
            for d in devices]  # fmt: skip


def irq_threads(tasks: list[Task], vectors: list[int]) -> dict[int, list[Task]]:
    """The threaded handlers of these vectors: kthreads named irq/N-name, by N."""
    wanted = set(vectors)
    out: dict[int, list[Task]] = {}
    for t in tasks:
        m = re.match(r"^irq/(\d+)-", t.comm)
        if m and t.kthread and int(m.group(1)) in wanted:
            out.setdefault(int(m.group(1)), []).append(t)
    return out


PERSISTENCED = "nvidia-persistenced"
COMM_MAX = 15  # the kernel keeps a task's name to 15 characters: the daemon's comm is "nvidia-persiste"


def persistence(root: Root, tasks: list[Task]) -> tuple[bool | None, str]:
    """NVIDIA's persistence: on when nvidia-persistenced runs; else what a
    snapshot asked nvidia-smi as it was taken (optional evidence); else
    unknown. Off, the driver tears the GPU down when no client holds it
    and sets it up again for the next job, on the node's CPUs."""
    daemon = next((t for t in tasks if t.comm == PERSISTENCED[:COMM_MAX]), None)
    if daemon is not None:
        return True, f"nvidia-persistenced runs (pid {daemon.pid})"
    smi = (root.manifest().get("live") or {}).get("nvidia_smi") or {}
    modes = smi.get("persistence") if isinstance(smi, dict) else None
    if isinstance(modes, dict) and modes:
        on = all(str(v).lower() == "enabled" for v in modes.values())
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(modes.items()))
        return on, f"nvidia-smi -q when the snapshot was taken: {shown}"
    return None, "no nvidia-persistenced task, and nvidia-smi's answer not recorded"


def irq_owners(root: Root) -> dict[int, str]:
    """Each GPU's and NIC's interrupt vectors, by IRQ number, with the device's name."""
    return {n: d.name for d in read_devices(root) for n in d.vectors}
