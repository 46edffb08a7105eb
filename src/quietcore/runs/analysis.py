"""The analysis stored with a spin-mode noise run, as typed views decoded
once: per CPU the event percentiles, the periodic sources found (named where
the evidence allowed) and the counter attribution of the lost time.
attribution.noise writes it as JSON; everything that reads it (the terminal,
the report, the survey's odd-node rule, simulate's source names, tune prove)
reads these views, never the JSON's keys."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: A gap longer than this is longer than any interrupt or softirq the guest
#: handles: a task ran instead (a context switch), or, in a VM, the host ran.
LONG_GAP_NS = 100_000

FREQ_MATCH = 0.02  # two periodic sources within 2 % of each other's frequency are at one rate


def same_frequency(f: float, target: float) -> bool:
    """Whether `f` is `target`'s rate, within FREQ_MATCH: the one rule by which
    naming, the fleet's check and simulate say two periodic sources' rates agree."""
    return abs(f - target) <= FREQ_MATCH * target


#: How the analysis named, in runs stored before names were kept as data (Named), a periodic source faster than
#: any interrupt the guest counted, and a train of a task's turns on the CPU.
OUTSIDE_GUEST = "outside the guest kernel"
SLICES = "another task's time slices"

#: What a periodic source is (Named.kind): the tick; a timer on every k-th tick; timer interrupts at k times the
#: tick's rate; a device's IRQ; a traced event other than the tick; no interrupt of the guest kernel's (the host
#: on a VM, firmware or SMIs on bare metal); another task's turns on the CPU; a 1 s timer; a guest timer at the
#: tick's rate; or what the counters cannot name.
TICK, TICK_TIMER, TICK_MULTIPLE, DEVICE, EVENT = "tick", "tick-timer", "tick-multiple", "device", "event"
OUTSIDE, TURNS, SECOND, AT_TICK_RATE, OPEN = "outside", "turns", "second", "at-tick-rate", "open"
KINDS = (TICK, TICK_TIMER, TICK_MULTIPLE, DEVICE, EVENT, OUTSIDE, TURNS, SECOND, AT_TICK_RATE, OPEN)


@dataclass(frozen=True)
class Named:
    """What a periodic source is and on what evidence, as data (attribution.naming and the trace
    give it; report.sources says it). `by`: "trace", its gaps' traced events, or "counters", the
    kernel's interrupt counts over the run."""

    kind: str  # one of KINDS
    label: str  # what it is, in a table's few words: "the tick", "the host", "IRQ 24 (virtio0-input.0)"
    by: str  # "trace" or "counters"
    event: str | None = None  # by the trace: the event that led most of its gaps; None where none did
    held: int = 0  # by the trace: the gaps that event led (untraced: that no traced event touched)
    of: int = 0  # by the trace: the source's gaps
    counter: str = ""  # by the counters: the row its rate matched, or the fastest one counted
    rate: float = 0.0  # that row's count a second on the CPU
    why: str = ""  # outside, open: how it was told (report.sources' notes): faster, no-room, tick-rate, could
    could: tuple[str, ...] = ()  # open: the counted rows that could hold it
    config_hz: int | None = None  # the tick's rate, CONFIG_HZ
    host: bool = False  # outside: on a VM, where the host is what the guest cannot see
    train: int = 1  # its place among the CPU's sources of one kind and label: a second train at 100 Hz is 2

    @property
    def key(self) -> tuple[str, str]:
        """One kind of source whatever its CPU counted or traced: simulate takes one source from every CPU by it,
        the screen says CPUs that share it in one line."""
        return self.kind, self.label

    def to_json(self) -> dict[str, Any]:
        """Its fields, those that hold nothing left out."""
        out: dict[str, Any] = {"kind": self.kind, "label": self.label, "by": self.by, "train": self.train}
        for key, value in (("event", self.event), ("held", self.held), ("of", self.of), ("counter", self.counter),
                           ("rate", self.rate), ("why", self.why), ("could", list(self.could)),
                           ("config_hz", self.config_hz), ("host", self.host)):  # fmt: skip
            if value:
                out[key] = value
        return out

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Named:
        hz = d.get("config_hz")
        return Named(str(d.get("kind") or OPEN), str(d.get("label") or ""), str(d.get("by") or "counters"),
                     None if d.get("event") is None else str(d["event"]), int(d.get("held") or 0),
                     int(d.get("of") or 0), str(d.get("counter") or ""), float(d.get("rate") or 0.0),
                     str(d.get("why") or ""), tuple(str(c) for c in d.get("could") or ()),
                     int(hz) if isinstance(hz, int | float) else None, bool(d.get("host")),
                     int(d.get("train") or 1))  # fmt: skip


def named_of(d: Mapping[str, Any]) -> Named | None:
    """A stored periodic source's Named: its own, or, in a run stored before names were data, read from its
    name (legacy_name)."""
    if isinstance(d.get("named"), Mapping):
        return Named.from_json(d["named"])
    name = d.get("name")
    return legacy_name(name) if isinstance(name, str) and name else None


_HELD = re.compile(r"(?:traced: (?P<event>\S+(?: \S+)?) in|no traced event in) (?P<held>[\d,]+) of (?P<of>[\d,]+) gaps")
_COUNTED = re.compile(r"\b(?P<counter>LOC|IRQ \d+)(?: \([^)]*\))?,?(?: counted)? (?:at )?(?P<rate>[\d,.]+)/s")
#: How a legacy name said why a source was no interrupt of the guest's (Named.why).
_WHY = (
    ("untraced", "untraced"),
    ("faster than any", "faster"),
    ("no interrupt this CPU counted", "no-room"),
    ("at the tick's rate", "tick-rate"),
    ("not named by the counters", "could"),
)
_TRAIN = re.compile(r", a (?:second|third|(?P<n>\d+)th) train at [\d,.]+ Hz")


def legacy_name(name: str) -> Named:
    """A name as quietcore stored it before names were data (one sentence: "the scheduler tick, CONFIG_HZ=250
    (traced: local_timer in 2,404 of 2,479 gaps)"), read once into a Named: stored sessions and references
    keep saying what they found."""
    held, counted = _HELD.search(name), _COUNTED.search(name)
    train = _TRAIN.search(name)
    n = 1 if train is None else {"second": 2, "third": 3}.get(train.group(0).split()[2], int(train["n"] or 1))
    basis: dict[str, Any] = {"by": "counters"}
    if held is not None:
        basis = {"by": "trace", "event": held["event"], "held": int(held["held"].replace(",", "")),
                 "of": int(held["of"].replace(",", ""))}  # fmt: skip
    elif counted is not None:
        basis["counter"], basis["rate"] = counted["counter"], float(counted["rate"].replace(",", ""))
    hz = re.search(r"CONFIG_HZ=(\d+)", name)
    basis["config_hz"] = int(hz.group(1)) if hz else None
    basis["why"] = next((why for words, why in _WHY if words in name), "")
    host = "the host" in name or " VM" in name
    kinds = (
        (OUTSIDE_GUEST, OUTSIDE, "the host" if host else "firmware or SMIs"),
        ("the scheduler tick", TICK, "the tick"),
        (SLICES, TURNS, SLICES),
        ("IRQ ", DEVICE, None),
        ("every ", TICK_TIMER, None),
        ("once a second", SECOND, "a 1 s timer"),
        ("not named by the counters", OPEN, "not named"),
        ("at the tick's rate", AT_TICK_RATE, "a guest timer"),
    )
    for prefix, kind, label in kinds:  # fmt: skip
        if name.startswith(prefix):
            text = label or source_kind(name).split(" (")[0]
            return Named.from_json({**basis, "kind": kind, "label": text, "train": n, "host": kind == OUTSIDE and host})
    if "x the tick rate" in name:
        return Named.from_json({**basis, "kind": TICK_MULTIPLE, "label": source_kind(name), "train": n})
    return Named.from_json({**basis, "kind": EVENT, "label": source_kind(name), "train": n})


def of_outside_guest(named: Named | None) -> bool:
    """Whether a source was told no interrupt of the guest's: on a VM, the host's."""
    return named is not None and named.kind == OUTSIDE


def of_slices(d: Mapping[str, Any]) -> bool:
    """Whether a stored periodic source (its JSON) is a co-runner's turns on the CPU, not noise."""
    named = named_of(d)
    return named is not None and named.kind == TURNS


#: Lengths of one source on CPUs side by side: a VM's tick ran 5.3-16.2 µs across the GPU node's CPUs (the
#: host's timer landing in it), one source; a planted 200 µs beside a host's 17 µs at 100 Hz is another.
SAME_SOURCE = 4.0


def same_source(freq_a: float, length_a: float, freq_b: float, length_b: float, factor: float = SAME_SOURCE) -> bool:
    """Whether two periodic sources (a rate and a median length each, in one unit) are one source in two
    places, two CPUs or two sessions: the same frequency, and lengths within `factor`. The one rule by which
    the screen groups a source over CPUs, `reference show` over a reference's, and `compare` tells a source
    dearer in B from one new in B."""
    return (same_frequency(freq_a, freq_b) and length_a > 0 and length_b > 0
            and 1 / factor <= length_a / length_b <= factor)  # fmt: skip


def source_kind(name: str) -> str:
    """A source's name without what its CPU counted (attribution.naming writes
    those counts in parentheses or after ", counted at"): "the scheduler tick,
    CONFIG_HZ=250 (LOC 255/s)" on one CPU and "... (LOC 256/s)" on another are
    one kind; "IRQ 24 (virtio0-input.0), counted at 100/s on this CPU" is "IRQ
    24". tests/unit/test_naming.py runs every name naming makes through it."""
    return re.split(r" \(|, counted at ", name, maxsplit=1)[0]


def _float(value: Any, default: float = 0.0) -> float:
    return float(value) if value is not None else default


@dataclass(frozen=True)
class Periodic:
    """A source that came back at a steady period."""

    frequency_hz: float
    period_ns: float
    events: int  # periods in which it was seen
    expected: int  # periods the run spanned
    coverage: float
    jitter_ns: float
    median_duration_ns: float
    lost_ns: float
    share_of_lost: float | None  # of the CPU's lost time
    named: Named | None  # what it is, or None when nothing could say

    @property
    def name(self) -> str | None:
        """What it is in a few words ("the tick", "the host"), or None."""
        return self.named.label if self.named is not None else None

    @property
    def outside_guest(self) -> bool:
        """Named by the analysis as no interrupt of the guest's: the host's (as runs.reference.Periodic's)."""
        return of_outside_guest(self.named)

    @property
    def slices(self) -> bool:
        """Named by the analysis as a co-runner's turns on the CPU, not noise."""
        return self.named is not None and self.named.kind == TURNS

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Periodic:
        share = d.get("share_of_lost")
        return Periodic(
            frequency_hz=_float(d.get("frequency_hz")),
            period_ns=_float(d.get("period_ns")),
            events=int(d.get("events") or 0),
            expected=int(d.get("expected") or 0),
            coverage=_float(d.get("coverage")),
            jitter_ns=_float(d.get("jitter_ns")),
            median_duration_ns=_float(d.get("median_duration_ns")),
            lost_ns=_float(d.get("lost_ns")),
            share_of_lost=None if share is None else float(share),
            named=named_of(d),
        )


@dataclass(frozen=True)
class Source:
    """One source of lost time the kernel's counters name."""

    name: str
    kind: str  # irq, ipi, softirq, steal, switch
    count: int
    cost_ns: float | None  # per event; None when only the total is known
    basis: str  # how the cost was had: "measured ...", "typical", ...
    estimate_ns: float

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Source:
        cost = d.get("cost_ns")
        return Source(str(d.get("name", "")), str(d.get("kind", "")), int(d.get("count") or 0),
                      None if cost is None else float(cost), str(d.get("basis", "")),
                      _float(d.get("estimate_ns")))  # fmt: skip


@dataclass(frozen=True)
class Attribution:
    """Where one CPU's lost time went, by the counters."""

    lost_ns: float
    explained_ns: float
    unexplained_ns: float
    long_gaps: int
    long_gap_ns: float
    verdict: str
    sources: tuple[Source, ...]
    counted_ns: float | None = None  # the counters' window (None in runs stored before it was kept)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Attribution:
        lost, explained = _float(d.get("lost_ns")), _float(d.get("explained_ns"))
        counted = d.get("counted_ns")
        return Attribution(
            lost_ns=lost,
            explained_ns=explained,
            unexplained_ns=_float(d.get("unexplained_ns"), max(lost - explained, 0.0)),
            long_gaps=int(d.get("long_gaps") or 0),
            long_gap_ns=_float(d.get("long_gap_ns")),
            verdict=str(d.get("verdict", "")),
            sources=tuple(Source.from_json(s) for s in d.get("sources") or ()),
            counted_ns=_float(counted) if counted is not None else None,
        )

    def count_of(self, kind: str) -> int:
        """Events of one kind (irq, ipi, softirq, switch) over every source of it."""
        return sum(s.count for s in self.sources if s.kind == kind)


@dataclass(frozen=True)
class CpuAnalysis:
    cpu: int
    event_ns: Mapping[str, float | None]  # percentiles of the gap lengths, None where too few
    periodic: tuple[Periodic, ...]
    attribution: Attribution | None  # None in a run stored before attribution existed

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CpuAnalysis:
        attribution = d.get("attribution")
        return CpuAnalysis(
            cpu=int(d["cpu"]),
            event_ns=dict(d.get("event_ns") or {}),
            periodic=tuple(Periodic.from_json(p) for p in d.get("periodic") or ()),
            attribution=Attribution.from_json(attribution) if attribution else None,
        )


@dataclass(frozen=True)
class NoiseAnalysis:
    cpus: tuple[CpuAnalysis, ...]
    tracer: Mapping[str, Any]  # the traced attribution as stored (empty when none ran)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> NoiseAnalysis:
        """The analysis of a noise run; empty for a run that has none (fwq, ftq)."""
        return NoiseAnalysis(
            cpus=tuple(CpuAnalysis.from_json(c) for c in d.get("cpus") or () if "cpu" in c),
            tracer=dict(d.get("tracer") or {}),
        )

    def of(self, cpu: int) -> CpuAnalysis | None:
        return next((c for c in self.cpus if c.cpu == cpu), None)
