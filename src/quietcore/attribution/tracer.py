"""Attribution with a tracer: irq, softirq, vector and sched_switch
tracepoints, recorded during the run and matched to each gap by time.

quietcore traces in a tracefs instance of its own (instances/quietcore-PID,
Documentation/trace/ftrace.rst "Instances"), so the node's own tracing is
left as it was; the instance is removed when the run ends, and tracefs is
unmounted again if quietcore mounted it. Tracing costs each traced event a
little time, which the gaps then include."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from quietcore.attribution import eventformat, rawtrace, telling
from quietcore.attribution.instances import MOUNTS, PREFIX, close, mounted, remove_stale
from quietcore.attribution.traceline import LINE
from quietcore.facts.cpulist import format_cpumask, parse_cpulist
from quietcore.runs.analysis import LONG_GAP_NS

#: (event, the part of its name the interval is called by)
EVENTS = (
    "irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
    "irq_vectors/local_timer_entry", "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry", "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_entry", "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry", "irq_vectors/call_function_single_exit",
    "irq_vectors/irq_work_entry", "irq_vectors/irq_work_exit",
    "sched/sched_switch",
)  # fmt: skip


def usable() -> tuple[bool, str]:
    """Whether tracepoints can be used here, and if not, why."""
    if os.geteuid() != 0:
        return False, "tracefs needs root: run as root for traced attribution"
    if "tracefs" not in Path("/proc/filesystems").read_text():
        return False, "this kernel has no tracefs (CONFIG_TRACING off)"
    base = mounted() or MOUNTS[0]
    if not (base / "instances").is_dir() and not base.is_dir():
        return False, f"{base} does not exist to mount tracefs on"
    return True, "irq, softirq, irq_vectors and sched_switch tracepoints"


def osnoise_state() -> str:
    """Whether the osnoise tracer is built in; quietcore matches its own
    probe's gaps to tracepoints in either case, since the osnoise tracer
    runs a workload of its own."""
    base = mounted()
    if base is None:
        return "unknown (tracefs not mounted)"
    tracers = (base / "available_tracers").read_text().split()
    return "built in" if "osnoise" in tracers else "not built (CONFIG_OSNOISE_TRACER)"


@dataclass
class TraceSession:
    """`cpus`: where events are recorded (None: every CPU, to see the
    senders of IPIs and the wakers of tasks); `events` (system/event):
    those that exist here are enabled, the rest named in `errors`."""

    cpus: frozenset[int] | None
    events: tuple[str, ...] = EVENTS
    buffer_kb: int = 8192
    #: event (system/event) -> trigger, e.g. "stacktrace if CPU == 1"; set
    #: after the events, removed before them
    triggers: dict[str, str] = field(default_factory=dict)
    clock: str = ""
    mounted_here: bool = False
    instance: Path | None = None
    errors: list[str] = field(default_factory=list)
    #: the events' formats, read once for the session's runs, and how each is told (rawtrace)
    teller: telling.Teller | None = None
    #: task names by pid, kept for the session's runs
    comms: telling.Comms | None = None
    opened: list[rawtrace.CpuBuffers] = field(default_factory=list)
    woken: bool = False  # a reader of the raw buffers is woken by the kernel as one fills (buffer_percent)

    def __enter__(self) -> TraceSession:
        try:
            return self._setup()
        except BaseException:
            self.__exit__(None, None, None)  # setup that failed half-way leaves no instance and no mount behind
            raise

    def _setup(self) -> TraceSession:
        base = mounted()
        if base is None:
            base = MOUNTS[0]
            subprocess.run([_tool("mount"), "-t", "tracefs", "nodev", str(base)], check=True, capture_output=True)
            self.mounted_here = True
        remove_stale(base)
        self.instance = base / "instances" / f"{PREFIX}{os.getpid()}"
        self.instance.mkdir()
        self._write("tracing_on", "0")  # a new instance traces at once: not while its events are being enabled
        clocks = (self.instance / "trace_clock").read_text().replace("[", "").replace("]", "").split()
        self.clock = "x86-tsc" if "x86-tsc" in clocks else "mono_raw"
        self._write("trace_clock", self.clock)
        if self.cpus is not None:
            self._write("tracing_cpumask", format_cpumask(self.cpus))
        self._write("buffer_size_kb", str(self.buffer_kb))
        # a reader polling a buffer is woken once it is this full (rawtrace.CpuBuffers.due), where a burst would
        # outrun the reads it times; the kernel's default, 50 %, leaves half the buffer to fill meanwhile
        if (self.instance / "buffer_percent").exists():
            self._write("buffer_percent", str(round(rawtrace.FILL * 100)))
            self.woken = True
        for event in self.events:
            path = self.instance / "events" / event / "enable"
            if path.exists():
                path.write_text("1")
            else:
                self.errors.append(f"no tracepoint {event}")
        for event, trigger in self.triggers.items():
            path = self.instance / "events" / event / "trigger"
            try:
                path.write_text(trigger)
            except OSError as exc:  # a kernel without triggers, or this filter: the trace goes on without stacks
                self.errors.append(f"no trigger on {event}: {exc.strerror}")
        self._write("tracing_on", "1")
        return self

    def _write(self, name: str, value: str) -> None:
        assert self.instance is not None
        (self.instance / name).write_text(value)

    def read(self) -> str:
        """Every CPU's buffer as one text, merged in time order by the kernel."""
        self.stop()
        assert self.instance is not None
        return (self.instance / "trace").read_text(errors="replace")

    def stop(self) -> None:
        """Tracing off: the buffers hold what they hold, to be read."""
        self._write("tracing_on", "0")

    def read_cpu(self, cpu: int) -> str:
        """One CPU's buffer as text (after stop): a run's spans are each one CPU's, so a
        noise run is matched a CPU at a time, and holds one CPU's text, not the node's
        (a busy CPU's full 8 MB buffer was 26 MB of text here)."""
        assert self.instance is not None
        return (self.instance / "per_cpu" / f"cpu{int(cpu)}" / "trace").read_text(errors="replace")

    def mark(self) -> None:
        """A line in the trace with CLOCK_MONOTONIC_RAW's time: two of them
        give the trace clock's rate and origin (`marked_clock`)."""
        assert self.instance is not None
        self._write("trace_marker", f"{MARK} {time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)}")

    def drain(self) -> str:
        """What the buffers hold since the last drain, consumed through
        trace_pipe while tracing goes on: one instance serves many runs
        without emptying the buffers (writing `trace` to empty them waits
        for RCU, tens of ms), and each read costs what it returns."""
        assert self.instance is not None
        fd = os.open(self.instance / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        chunks = []
        try:
            while True:
                try:
                    data = os.read(fd, 1 << 20)
                except BlockingIOError:  # nothing more, for now
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(fd)
        return b"".join(chunks).decode(errors="replace")

    def buffers(self) -> rawtrace.CpuBuffers | None:
        """Each traced CPU's buffer, open to be read raw, a page at a time;
        None where this kernel's page header is not the one known here (the
        merged text is read then)."""
        assert self.instance is not None
        data_at = rawtrace.layout(self.instance / "events")
        if data_at is None:
            return None
        cpus = sorted(self.cpus) if self.cpus is not None else _online()
        try:
            page = int((self.instance / "buffer_subbuf_size_kb").read_text()) * 1024
        except (OSError, ValueError):  # before sub-buffers could be sized (6.8), a sub-buffer is a page
            page = os.sysconf("SC_PAGE_SIZE")
        files = {cpu: self.instance / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw" for cpu in cpus}
        buffers = rawtrace.CpuBuffers(files, page, data_at, self.buffer_kb * 1024, woken=self.woken)
        self.opened.append(buffers)  # closed with the session at the latest: an open file keeps the instance
        return buffers

    def tell(self, buffers: rawtrace.CpuBuffers, progress: Callable[[float], None] | None = None) -> str:
        """What `buffers` read, as the kernel's text (attribution.telling; `progress`: its share told)."""
        assert self.instance is not None
        if self.comms is None:
            self.comms = telling.Comms(self.instance.parent.parent / "saved_cmdlines")
        self.comms.fresh = False
        if self.teller is None:
            self.teller = telling.Teller(eventformat.formats(self.instance / "events", self.events), _SYMBOLS)
        return telling.tell(buffers.pages, self.teller, self.clock == "x86-tsc", self.comms, buffers.data_at,
                            progress)  # fmt: skip

    def skip(self) -> None:
        """Empty the buffers of what came since the last read (between two
        runs), without formatting it: raw where it can be."""
        buffers = self.buffers()
        if buffers is None:
            self.drain()
            return
        try:
            buffers.drain()
        finally:
            buffers.close()
            self.opened.remove(buffers)

    def lost(self) -> int:
        """Events the kernel could not keep (a full buffer overwrites the
        oldest, or drops the newest), summed over the CPUs."""
        return sum(self.lost_by_cpu().values())

    def lost_by_cpu(self) -> dict[int, int]:
        """lost, per CPU buffer (those that lost any): at 384 CPUs, which buffers to give more."""
        assert self.instance is not None
        out: dict[int, int] = {}
        for stats in (self.instance / "per_cpu").glob("cpu*/stats"):
            cpu = stats.parent.name.removeprefix("cpu")
            if not cpu.isdigit():
                continue
            for line in stats.read_text().splitlines():
                name, _, value = line.partition(":")
                if name.strip() in ("overrun", "dropped events") and value.strip().isdigit():
                    out[int(cpu)] = out.get(int(cpu), 0) + int(value)
        return {cpu: n for cpu, n in sorted(out.items()) if n}

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        # Undo in reverse, whatever happened: buffers closed, events off, instance gone, unmount.
        for buffers in self.opened:
            buffers.close()
        self.opened.clear()
        if self.instance is not None and self.instance.exists():
            close(self.instance, tuple(self.events), self.triggers)
        if self.mounted_here:
            subprocess.run([_tool("umount"), str(MOUNTS[0])], check=False, capture_output=True)


class Stream:
    """The trace read as it is written: a thread drains a buffer at once
    when the kernel says it is a quarter full, and a quiet one once a
    second (where the kernel says nothing, at set times every `every_s`:
    rawtrace.CpuBuffers), so the kernel's buffers need to hold only that
    long's events, whatever the run's length. It reads each CPU's buffer raw, a
    page at a time, and the text is told after the run (rawtrace); where
    the kernel's pages are not known here, it reads the merged trace_pipe.
    The thread keeps off `away` (the measured CPUs), where it has somewhere
    else to run. Its text holds a clock mark as it starts and another as it
    ends (TraceSession.mark; marked_clock reads them)."""

    def __init__(self, session: TraceSession, away: frozenset[int] = frozenset(), every_s: float = 0.05,
                 raw: bool = True) -> None:  # fmt: skip
        self.session, self.away, self.every_s, self.raw = session, away, every_s, raw
        self.chunks: list[str] = []
        self.buffers: rawtrace.CpuBuffers | None = None
        self.tid = 0  # the reader's thread id, quietcore's own in the trace
        # what reading cost: the reader's CPU time over its time, and where it ran (at 384 CPUs it reads 384
        # buffers every 50 ms, on the housekeeping CPUs: it should take a few % of one); then what telling the
        # raw pages as text took, after the run
        self.cpu_ns, self.wall_ns, self.where, self.told_ns = 0, 0, frozenset[int](), 0
        self.read = "merged text"
        # events the kernel lost while this stream read, by CPU (those that lost any), known once its text is
        # read: counted from its start, so a session's earlier runs are not this one's
        self.lost_by_cpu: dict[int, int] = {}
        self._lost_before: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="quietcore-trace", daemon=True)

    def _drain(self, everything: bool = True) -> None:
        if self.buffers is not None:
            self.buffers.drain(everything)
        else:
            self.chunks.append(self.session.drain())

    def _read(self) -> None:
        self.tid = threading.get_native_id()
        started = time.monotonic_ns()
        elsewhere = os.sched_getaffinity(0) - self.away
        if elsewhere:
            os.sched_setaffinity(0, elsewhere)
        self.where = frozenset(os.sched_getaffinity(0))
        while True:
            if self.buffers is not None:  # woken by a buffer filling, or at every_s
                full = self.buffers.due(self.buffers.next_wait(self.every_s))
                if self._stop.is_set():
                    break
                self.buffers.drain(everything=False, full=full)
            elif self._stop.wait(self.every_s):
                break
            else:
                self._drain(everything=False)
        self.cpu_ns, self.wall_ns = time.thread_time_ns(), time.monotonic_ns() - started

    def cost(self) -> dict[str, Any]:
        """The reader's own cost, once it has stopped: ms of CPU, as a share
        of one CPU, and where; how it read; and the ms of CPU that telling
        the pages as text took after the run."""
        share = self.cpu_ns / self.wall_ns if self.wall_ns else 0.0
        return {"cpu_ms": self.cpu_ns / 1e6, "share_of_one": share, "cpus": sorted(self.where), "read": self.read,
                "told_ms": self.told_ns / 1e6}  # fmt: skip

    def __enter__(self) -> Stream:
        try:
            self.buffers = self.session.buffers() if self.raw else None
        except OSError:  # per-CPU files that would not open (too many open files): the merged text, then
            self.buffers = None
        self.read = "per-CPU raw pages" if self.buffers is not None else "merged text"  # as it was opened
        self._lost_before = self.session.lost_by_cpu()
        self._mark()
        self._thread.start()
        return self

    def _mark(self) -> None:
        """A clock mark (TraceSession.mark), read at once: the buffers are
        drained first, the mark written, then drained again, so that it waits
        in its CPU's buffer for no more than a write and a read. A small buffer
        overwrites its oldest page as it fills: written before the buffers were
        opened, the first mark was lost under a burst of TLB-flush IPIs on its
        CPU (`intruders --buffer-kb 4` after the fleet tests: two runs in two,
        its CPU's buffer held 38,835 events and only the last mark)."""
        self._drain()
        self.session.mark()
        self._drain()

    def _stop_reading(self) -> None:
        self._stop.set()
        if self.buffers is not None:
            self.buffers.wake()
        if self._thread.is_alive():
            self._thread.join()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop_reading()
        if kind is not None:
            self.close()
            return
        self._mark()  # the stream's last: its text spans the two marks

    def close(self) -> None:
        """Stopped, its pages dropped and its files closed: a run that ended
        without its text (interrupted)."""
        self._stop_reading()
        if self.buffers is not None:
            self.buffers.close()
            if self.buffers in self.session.opened:
                self.session.opened.remove(self.buffers)
            self.buffers = None

    def text(self, progress: Callable[[float], None] | None = None) -> str:
        """Everything read, and what is left in the buffers now. The events
        lost by then are `lost_by_cpu`: what the buffers lose while the pages
        are told, read by no one, is after the run, not the run's.
        `progress`: called with the share of the pages' records told."""
        self._drain()
        before = self._lost_before
        self.lost_by_cpu = {cpu: n - before.get(cpu, 0) for cpu, n in self.session.lost_by_cpu().items()
                            if n > before.get(cpu, 0)}  # fmt: skip
        if self.buffers is None:
            return "".join(self.chunks)
        buffers, self.buffers = self.buffers, None
        buffers.close()
        if buffers in self.session.opened:
            self.session.opened.remove(buffers)
        started = time.thread_time_ns()
        text = self.session.tell(buffers, progress)
        self.told_ns = time.thread_time_ns() - started
        return text


def _online() -> list[int]:
    """The online CPUs (their per_cpu buffers are the ones written)."""
    try:
        return sorted(parse_cpulist(Path("/sys/devices/system/cpu/online").read_text()))
    except (OSError, ValueError):
        return sorted(os.sched_getaffinity(0))


#: kernel symbols, loaded once a process and only if a pointer is told
_SYMBOLS = telling.Symbols()


def _tool(name: str) -> str:
    """A system tool by its place in the system's directories, never by
    $PATH, which is the caller's (and quietcore may run as root)."""
    return shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") or f"/usr/bin/{name}"


@dataclass(frozen=True)
class Interval:
    cpu: int
    start: float  # ns from the probe's origin
    end: float
    name: str


def _name(event: str, rest: str) -> str:
    if event.startswith("irq_handler"):
        match = re.search(r"name=(\S+)", rest)
        irq = re.search(r"irq=(\d+)", rest)
        return f"irq {irq.group(1) if irq else '?'} ({match.group(1) if match else '?'})"
    if event.startswith("softirq"):
        match = re.search(r"action=(\w+)", rest)
        return f"softirq {match.group(1) if match else '?'}"
    return event.rsplit("_", 1)[0]  # local_timer, reschedule, call_function...


def intervals(text: str, to_ns: Callable[[str], float], probe_comm: str = "quietcore-probe") -> list[Interval]:
    """Entry/exit pairs per CPU, and the spans in which another task ran in
    place of the probe (from its sched_switch out to the one back in)."""
    started: dict[tuple[int, str], tuple[float, str]] = {}
    out: list[Interval] = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        cpu, ts, event, rest = int(m["cpu"]), to_ns(m["ts"]), m["event"], m["rest"]
        if event == "sched_switch":
            prev = re.search(r"prev_comm=(.*?) prev_pid=", rest)
            nxt = re.search(r"next_comm=(.*?) next_pid=", rest)
            if prev and prev.group(1) == probe_comm:
                started[(cpu, "switch")] = (ts, f"task {nxt.group(1) if nxt else '?'}")
            elif nxt and nxt.group(1) == probe_comm and (cpu, "switch") in started:
                begin, name = started.pop((cpu, "switch"))
                out.append(Interval(cpu, begin, ts, name))
            continue
        kind = event.rsplit("_", 1)[0]
        if event.endswith("_entry"):
            started[(cpu, kind)] = (ts, _name(event, rest))
        elif event.endswith("_exit") and (cpu, kind) in started:
            begin, name = started.pop((cpu, kind))
            out.append(Interval(cpu, begin, ts, name))
    return out


#: Span length classes for matching: a gap is compared with the spans of a
#: class that start within the class's longest length before it, so short
#: spans (most of them) are looked up in a short window. No span starting
#: over 10 ms before a gap is taken to explain it.
SPAN_CLASSES_NS = (1e4, 1e5, 1e6, 1e7)


def _overlaps(
    g_start: NDArray[np.float64], g_end: NDArray[np.float64], s_start: NDArray[np.float64],
    s_end: NDArray[np.float64],
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:  # fmt: skip
    """Every (gap, span, overlap ns) pair that overlaps, spans sorted by
    start; found with searchsorted per length class, so the work grows with
    the pairs that can overlap, not with gaps x spans."""
    length = s_end - s_start
    gaps: list[NDArray[np.intp]] = []
    spans: list[NDArray[np.intp]] = []
    floor = -np.inf
    for limit in SPAN_CLASSES_NS:
        longest = limit == SPAN_CLASSES_NS[-1]  # longer spans go in the last class, looked up 10 ms back
        ids = np.flatnonzero((length > floor) & ((length <= limit) | longest))
        floor = limit
        if not len(ids):
            continue
        starts = s_start[ids]
        lo = np.searchsorted(starts, g_start - limit, side="left")
        hi = np.searchsorted(starts, g_end, side="left")
        counts = np.maximum(hi - lo, 0)
        gap_i = np.repeat(np.arange(len(g_start)), counts)
        offsets = np.cumsum(counts) - counts
        gaps.append(gap_i)
        spans.append(ids[lo[gap_i] + np.arange(len(gap_i)) - offsets[gap_i]])
    gap_i = np.concatenate(gaps) if gaps else np.zeros(0, dtype=np.intp)
    span_j = np.concatenate(spans) if spans else np.zeros(0, dtype=np.intp)
    overlap = np.minimum(s_end[span_j], g_end[gap_i]) - np.maximum(s_start[span_j], g_start[gap_i])
    hit = overlap > 0
    return gap_i[hit], span_j[hit], overlap[hit]


def match_gaps(
    cpu: int, gap_starts: NDArray[np.float64], gap_lengths: NDArray[np.float64], spans: list[Interval]
) -> dict[str, Any]:
    """Each traced span explains the part of a gap it overlaps; a gap counts
    once, for the span that overlaps it most. What no span covers (a whole
    gap, or the rest of one) is untraced time: in a VM, the host, which the
    guest cannot trace. In array operations, linear in gaps and spans."""
    return match_and_lead(cpu, gap_starts, gap_lengths, spans)[0]


def match_and_lead(
    cpu: int, gap_starts: NDArray[np.float64], gap_lengths: NDArray[np.float64], spans: list[Interval]
) -> tuple[dict[str, Any], list[str | None]]:
    """match_gaps, and each gap's leader (the span that counts it), None where no
    traced span touched it: what a periodic source's member gaps held, by which
    it is named (attribution.noise). One matching for both."""
    mine = [s for s in spans if s.cpu == cpu]
    code: dict[str, int] = {}
    s_name = np.fromiter((code.setdefault(s.name, len(code)) for s in mine), dtype=np.intp, count=len(mine))
    s_start = np.fromiter((s.start for s in mine), dtype=np.float64, count=len(mine))
    s_end = np.fromiter((s.end for s in mine), dtype=np.float64, count=len(mine))
    by_start = np.argsort(s_start, kind="stable")  # the tracer's order where starts are equal
    s_start, s_end, s_name = s_start[by_start], s_end[by_start], s_name[by_start]
    names = list(code)  # in the order first seen, for ties in the ranking
    g_end = gap_starts + gap_lengths
    gap_i, span_j, overlap = _overlaps(gap_starts, g_end, s_start, s_end)
    total = np.bincount(gap_i, weights=overlap, minlength=len(gap_starts))
    covered = np.minimum(total, gap_lengths)
    hit_gaps = total > 0
    share = overlap * np.divide(covered[gap_i], total[gap_i])
    ns = np.bincount(s_name[span_j], weights=share, minlength=len(names))
    # The span that overlaps each gap most (the earliest of equals) counts the gap.
    order = np.lexsort((span_j, -overlap, gap_i))
    first = np.ones(len(order), dtype=bool)
    first[1:] = gap_i[order][1:] != gap_i[order][:-1]
    leader = s_name[span_j[order[first]]]
    counted = np.bincount(leader, minlength=len(names))
    # The whole of each gap, to the source that led it: the account of where the time went (report.account)
    # gives a gap to one source, so that its rows add up to the time lost.
    led = np.bincount(leader, weights=gap_lengths[gap_i[order[first]]], minlength=len(names))
    seen = np.bincount(s_name[span_j], minlength=len(names)) > 0
    ranked = sorted((i for i in range(len(names)) if seen[i]), key=lambda i: -ns[i])
    sources = [{"name": names[i], "gaps": int(counted[i]), "ns": float(ns[i]), "led_ns": float(led[i])}
               for i in ranked]  # fmt: skip
    untraced_ns = float((gap_lengths - covered).sum())
    # the long gaps no traced event touched: the host's on a VM, by what the trace did not cover, not by length
    # (a guest tick with its VM exit runs past 100 µs and is still the tick's)
    long_untraced = gap_lengths[~hit_gaps & (gap_lengths >= LONG_GAP_NS)]
    unmatched = {"gaps": int((~hit_gaps).sum()), "ns": untraced_ns, "gap_ns": float(gap_lengths[~hit_gaps].sum()),
                 "long_gaps": int(long_untraced.size), "long_gap_ns": float(long_untraced.sum())}  # fmt: skip
    leaders: list[str | None] = [None] * len(gap_starts)
    for g, k in zip(gap_i[order[first]].tolist(), leader.tolist(), strict=True):
        leaders[g] = names[k]
    return {"cpu": cpu, "sources": sources, "unmatched": unmatched}, leaders


MARK = "quietcore-clock"
_MARK_LINE = re.compile(rf"\s(?P<ts>\d+(?:\.\d+)?):\s+tracing_mark_write:\s+{MARK} (?P<ns>\d+)")


def marked_clock(text: str, clock: str) -> tuple[Callable[[str], float], tuple[float, float]]:
    """Trace timestamps to CLOCK_MONOTONIC_RAW ns, and the span between the
    session's first and last marks (`TraceSession.mark`), whose text holds
    that clock's time: mono_raw's seconds convert directly; x86-tsc's raw
    counts through the two marks."""
    marks = [(float(m["ts"]), float(m["ns"])) for m in _MARK_LINE.finditer(text)]
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        raise ValueError("the trace lost its clock marks")
    (t0, n0), (t1, n1) = marks[0], marks[-1]
    if clock != "x86-tsc":
        return (lambda ts: float(ts) * 1e9), (t0 * 1e9, t1 * 1e9)
    scale = (n1 - n0) / (t1 - t0)
    return (lambda ts: (float(ts) - t0) * scale + n0), (n0, n1)


def converter(clock: str, origin: dict[str, Any], hz: float) -> Callable[[str], float]:
    """Trace timestamps to ns from the probe's origin: raw TSC counts with the
    x86-tsc clock, seconds with mono_raw (the probe gives its origin in both)."""
    if clock == "x86-tsc":
        ticks, scale = float(origin["ticks"]), 1e9 / hz
        return lambda ts: (float(ts) - ticks) * scale
    raw = float(origin["monotonic_raw_ns"])
    return lambda ts: float(ts) * 1e9 - raw
