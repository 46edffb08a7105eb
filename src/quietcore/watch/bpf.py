"""watch's in-kernel account: native/bpf/watch.bpf.c, loaded by the system's libbpf (libbpf.so.1, through
ctypes), adds up on each CPU what ran there, net of nesting, in per-CPU maps. A look reads the sums and takes
the difference with the last: the watcher's cost is a read of a few hundred entries a look, not a line a
trace event. Where there is no libbpf, no BTF or no object, watch traces with tracefs instead (`usable`).

The object's maps and numbers are the C file's: kinds, vectors, and the key and sum layouts."""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from quietcore.attribution.telling import Symbols
from quietcore.errors import CommandError
from quietcore.probes.runner import probe_path

#: The object, beside the native probe in the package
OBJECT = Path(__file__).resolve().parent.parent / "bin" / "watch.bpf.o"


def object_path() -> Path:
    """The package's object; else the one beside $QUIETCORE_PROBE (a build tree's), which runner.probe_path
    has checked as root checks a binary it runs."""
    if OBJECT.is_file():
        return OBJECT
    try:
        return probe_path().parent / OBJECT.name
    except CommandError:
        return OBJECT


TASK, IRQ, SOFTIRQ, VECTOR, WORK, TIMER, CALL = 1, 2, 3, 4, 5, 6, 7
VECTORS = ("local_timer", "reschedule", "call_function", "call_function_single", "irq_work", "thermal_apic",
           "x86_platform_ipi")  # fmt: skip
SOFTIRQS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
_KEY = struct.Struct("<IIQQQ")  # kind, pad, id, cpuset cgroup, cgroup v2
_SUM = struct.Struct("<QQQ")  # ns, count, longest
_EVENTS = Path("/sys/kernel/tracing/events")


@dataclass(frozen=True)
class Entry:
    """One source's figures on one CPU over a look."""

    cpu: int
    kind: int
    id: int
    cpuset: int
    cgroup: int
    ns: int
    count: int
    longest: int


def _lib() -> ctypes.CDLL:
    lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
    p, c = ctypes.c_void_p, ctypes.c_char_p
    for name, res, args in (
        ("bpf_object__open_file", p, [c, p]), ("bpf_object__load", ctypes.c_int, [p]),
        ("bpf_object__close", None, [p]), ("bpf_object__next_program", p, [p, p]),
        ("bpf_program__section_name", c, [p]), ("bpf_program__set_autoload", ctypes.c_int, [p, ctypes.c_bool]),
        ("bpf_program__attach", p, [p]), ("bpf_link__destroy", ctypes.c_int, [p]),
        ("bpf_object__find_map_fd_by_name", ctypes.c_int, [p, c]),
        ("bpf_map_get_next_key", ctypes.c_int, [ctypes.c_int, p, p]),
        ("bpf_map_lookup_elem", ctypes.c_int, [ctypes.c_int, p, p]),
        ("bpf_map_delete_elem", ctypes.c_int, [ctypes.c_int, p]),
        ("libbpf_num_possible_cpus", ctypes.c_int, []), ("libbpf_set_print", p, [p]),
    ):  # fmt: skip
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    lib.libbpf_set_print(None)  # its own messages on stderr: watch says what failed, in a line
    return lib


def usable() -> tuple[bool, str]:
    """Whether the in-kernel account can run here, and why not."""
    if os.geteuid() != 0:
        return False, "it needs root"
    if not object_path().is_file():
        return False, f"{OBJECT} is missing (built where clang and libbpf's headers were found)"
    if not Path("/sys/kernel/btf/vmlinux").is_file():
        return False, "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    try:
        _lib()
    except OSError:
        return False, "no libbpf.so.1 on this node (Debian and Ubuntu: libbpf1; RHEL: libbpf)"
    return True, ""


def _has_event(name: str) -> bool:
    """Whether the kernel has the tracepoint (x86's vectors are x86's alone)."""
    try:
        return any((group / name).is_dir() for group in _EVENTS.iterdir())
    except OSError:
        return True  # tracefs not mounted: let the load say


class Account:
    """The object loaded and attached; `read` gives what each CPU ran since the last read."""

    def __init__(self) -> None:
        self.lib = _lib()
        path = object_path()
        self.obj = self.lib.bpf_object__open_file(str(path).encode(), None)
        self.links: list[int] = []
        if not self.obj:
            raise OSError(ctypes.get_errno(), f"libbpf could not open {path}")
        try:
            prog = self.lib.bpf_object__next_program(self.obj, None)
            progs = []
            while prog:
                section = (self.lib.bpf_program__section_name(prog) or b"").decode()
                wanted = _has_event(section.split("/", 1)[-1])
                self.lib.bpf_program__set_autoload(prog, wanted)
                if wanted:
                    progs.append(prog)
                prog = self.lib.bpf_object__next_program(self.obj, prog)
            if self.lib.bpf_object__load(self.obj) != 0:
                raise OSError(ctypes.get_errno(), "the kernel refused watch's BPF programs")
            for prog in progs:
                link = self.lib.bpf_program__attach(prog)
                if not link:
                    raise OSError(ctypes.get_errno(), "a BPF program could not be attached")
                self.links.append(link)
            self.sums = self.lib.bpf_object__find_map_fd_by_name(self.obj, b"sums")
            self.names = self.lib.bpf_object__find_map_fd_by_name(self.obj, b"names")
        except BaseException:
            self.close()
            raise
        self.ncpu = self.lib.libbpf_num_possible_cpus()
        self.last: dict[tuple[int, bytes], tuple[int, int, int]] = {}
        self.symbols = Symbols()
        self.at = time.monotonic_ns()
        self.read()  # what ran before: not the first look's

    def close(self) -> None:
        for link in self.links:
            self.lib.bpf_link__destroy(link)
        self.links = []
        if self.obj:
            self.lib.bpf_object__close(self.obj)
            self.obj = None

    def __enter__(self) -> Account:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _keys(self, fd: int, size: int) -> Iterable[bytes]:
        key, nxt = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
        at: ctypes.c_char_p | None = None
        while self.lib.bpf_map_get_next_key(fd, at, nxt) == 0:
            yield nxt.raw
            ctypes.memmove(key, nxt, size)
            at = ctypes.cast(key, ctypes.c_char_p)

    def read(self) -> tuple[list[Entry], float]:
        """What each CPU ran since the last read, the sums' growth entry by entry; and the time since, in ns."""
        now = time.monotonic_ns()
        wall, self.at = now - self.at, now
        out: list[Entry] = []
        values = ctypes.create_string_buffer(_SUM.size * self.ncpu)
        seen: dict[tuple[int, bytes], tuple[int, int, int]] = {}
        for raw in list(self._keys(self.sums, _KEY.size)):
            if self.lib.bpf_map_lookup_elem(self.sums, raw, values) != 0:
                continue  # evicted since it was listed
            kind, _, ident, cpuset, cgroup = _KEY.unpack(raw)
            for cpu, (ns, count, longest) in enumerate(_SUM.iter_unpack(values.raw)):
                if not count:
                    continue
                seen[(cpu, raw)] = (ns, count, longest)
                was_ns, was_count, _ = self.last.get((cpu, raw), (0, 0, 0))
                if count < was_count:  # evicted and made again: all of it is new
                    was_ns, was_count = 0, 0
                if count > was_count:
                    out.append(Entry(cpu, kind, ident, cpuset, cgroup, ns - was_ns, count - was_count, longest))
            if kind == TASK and ident and not os.path.exists(f"/proc/{ident}"):
                # a task that has ended runs no more: its sums are read, and its entry would only fill the map
                # (a node of short jobs makes thousands an hour), each read reading it again
                self.lib.bpf_map_delete_elem(self.sums, raw)
                for cpu in range(self.ncpu):
                    seen.pop((cpu, raw), None)
        self.last = seen
        return out, float(wall)

    def comm(self, pid: int) -> str | None:
        """A task's name as it was last switched out."""
        value = ctypes.create_string_buffer(16)
        if self.lib.bpf_map_lookup_elem(self.names, struct.pack("<I", pid), value) != 0:
            return None
        return value.raw.split(b"\0", 1)[0].decode("utf-8", "replace")

    def name(self, e: Entry) -> tuple[str, str]:
        """(kind, name) as `intruders` names the source, but for tasks (named by the caller)."""
        if e.kind == IRQ:
            return "irq", f"irq {e.id} ({_irq_name(e.id)})"
        if e.kind == SOFTIRQ:
            return "softirq", f"softirq {SOFTIRQS[e.id] if e.id < len(SOFTIRQS) else e.id}"
        if e.kind == VECTOR:
            return "vector", VECTORS[e.id] if e.id < len(VECTORS) else f"vector {e.id}"
        what = {WORK: "work", TIMER: "timer", CALL: "ipi"}.get(e.kind, "other")
        return what, self.symbols.name(e.id)


def _irq_name(irq: int) -> str:
    """An IRQ's handler's name (the `name` irq_handler_entry gives), from sysfs."""
    with contextlib.suppress(OSError):
        return Path(f"/sys/kernel/irq/{irq}/actions").read_text(errors="replace").strip().split(",")[0] or "?"
    return "?"
