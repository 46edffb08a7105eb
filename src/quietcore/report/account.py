"""One account of where a CPU's lost time went, which every table, sentence
and figure that shows it reads, so that one source has one figure.

Where the run was traced, each gap goes whole to the traced source that
covered the most of it (an interrupt, a softirq, a task: the one that led
it), and the gaps no traced event touched are untraced: on a VM, the
host's. A gap's whole length counts, not only the traced handler's part:
the tick's gap on a VM is its handler and the VM exit and entry around it,
all of it time the tick took. Without a trace, the kernel's counters: each
source's count times its cost (measured from the run's own gaps where a
periodic source matches the counter, as the tick matches LOC; else a
typical cost, said so), and what they leave is unexplained. Either way the
rows and the rest add up to the time lost, and the basis says which.

The tracer's older runs stored no `led_ns`, and a run over --max-events
matched only the gaps it recorded: they are accounted by the counters, as
runs without a trace are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quietcore.runs.analysis import CpuAnalysis

#: The trace's name of the tick's interrupt (the local APIC timer vector), and the counters'.
TICK_TRACED, TICK_COUNTED = "local_timer", "LOC"


@dataclass(frozen=True)
class Row:
    name: str
    count: int | None  # traced: the gaps it led; counted: the events the kernel counted
    ns: float
    basis: str


#: The rest's basis where no counter was read with the gaps (an imported trace).
UNCOUNTED = "no counters were read with these gaps"


@dataclass(frozen=True)
class Account:
    cpu: int
    lost_ns: float
    rows: tuple[Row, ...]  # biggest first
    rest: Row  # untraced (traced) or unexplained (counted)
    traced: bool
    # traced: the gaps over runs.analysis.LONG_GAP_NS no traced event touched, and their length (the host's
    # on a VM); None where the trace's match did not keep them (an older run)
    long_untraced: tuple[int, float] | None = None

    @property
    def uncounted(self) -> bool:
        """No counter was read with the gaps (an imported trace): all is `unexplained`, and nothing says why."""
        return not self.traced and not self.rows and self.rest.basis == UNCOUNTED

    def share(self, row: Row) -> float:
        """Of the time lost; never over all of it (steal's 10 ms ticks can read more)."""
        return min(row.ns / self.lost_ns, 1.0) if self.lost_ns > 0 else 0.0

    def tick(self) -> Row | None:
        """The tick's row: its interrupt traced, or LOC counted."""
        if self.traced:
            return next((r for r in self.rows if r.name == TICK_TRACED), None)
        return next((r for r in self.rows if r.name.split(" ")[0] == TICK_COUNTED), None)

    def rest_words(self) -> str:
        """What the rest is, in a sentence's words."""
        return rest_words(self.share(self.rest), self.traced)


def rest_words(share: float, traced: bool) -> str:
    """What an account's rest is, `share` of the lost time, in a sentence's words (a CPU's, or a group's summed)."""
    if traced:
        return f"{share:.0%} of the lost time is in gaps no traced event touched"
    return f"{share:.0%} of the lost time is not explained by the kernel's counters"


def to_json(a: Account) -> dict[str, Any]:
    """The account as `noise --json` gives it: the same rows and shares as its table."""

    def row(r: Row) -> dict[str, Any]:
        return {"name": r.name, "count": r.count, "lost_ns": r.ns, "share": a.share(r), "basis": r.basis}

    return {"by": "trace" if a.traced else "counters", "lost_ns": a.lost_ns, "rows": [row(r) for r in a.rows],
            "rest": row(a.rest)}  # fmt: skip


def account(cpu: CpuAnalysis, traced: Mapping[str, Any] | None, lost_ns: float, gaps: int,
            gap_sum_ns: float, measured_ns: float | None = None) -> Account | None:  # fmt: skip
    """The account of one CPU: by its trace when it has one that gives each
    source's led gaps (`traced`, tracer.match_gaps's entry for it), else by
    its counters; None when it has neither. `gaps` and `gap_sum_ns` are the
    run's recorded gaps and their summed length: each gap's lost time is its
    length less the loop's period (the probe's definition), spread evenly."""
    if traced is not None and all("led_ns" in s for s in traced["sources"]) and "gap_ns" in traced["unmatched"]:
        loop = (gap_sum_ns - lost_ns) / gaps if gaps else 0.0  # the loop's period in each gap, not lost
        rows = [Row(s["name"], int(s["gaps"]), float(s["led_ns"]) - int(s["gaps"]) * loop, "traced: the gaps it led")
                for s in traced["sources"] if s["gaps"]]  # fmt: skip
        un = traced["unmatched"]
        rest_ns = float(un["gap_ns"]) - int(un["gaps"]) * loop
        rest = Row("untraced", int(un["gaps"]), max(rest_ns, 0.0), "gaps no traced event touched")
        long = (int(un["long_gaps"]), float(un["long_gap_ns"])) if "long_gaps" in un else None
        return Account(cpu.cpu, lost_ns, tuple(sorted(rows, key=lambda r: -r.ns)), rest, traced=True,
                       long_untraced=long)  # fmt: skip
    a = cpu.attribution
    if a is None:
        return None
    # The counts came over the counters' window, start-up and end in it; the estimates are of the measured
    # time, and so are the events shown beside them (count x cost = lost, row by row).
    inside = min(measured_ns / a.counted_ns, 1.0) if measured_ns and a.counted_ns else 1.0
    rows = [Row(s.name, round(s.count * inside) if s.cost_ns is not None else s.count or None, s.estimate_ns,
                _counted_basis(s.basis, s.cost_ns)) for s in a.sources]  # fmt: skip
    counted = a.counted_ns is not None or bool(a.sources)
    rest = Row("unexplained", None, a.unexplained_ns, "lost time no counter accounts for" if counted else UNCOUNTED)
    return Account(cpu.cpu, a.lost_ns, tuple(rows), rest, traced=False)


def _counted_basis(basis: str, cost_ns: float | None) -> str:
    if cost_ns is None or basis.startswith(("counted", "the probe")):
        return basis
    cost = f"{cost_ns / 1000:,.1f} µs"
    if basis.startswith("measured"):
        return f"counted x {cost}, {basis}"
    if basis == "typical":
        return f"counted x {cost}, a typical cost"
    return f"counted x {cost}: {basis}"


def of_run(run: Any) -> dict[int, Account]:
    """Every CPU's account of a noise run (a runs.model.Run). Its gaps' count and
    sum come from the run's per-CPU summary where the probe recorded every gap
    (its own count and sum: the events need not be read, 27 million at 384 CPUs
    x 30 s), else from its trace."""
    if run.spin_cpus is None:
        return {}
    rows = {int(r["cpu"]): r for r in run.summary}
    whole = all(c.cpu in rows and not rows[c.cpu].get("events_dropped") for c in run.noise.cpus)
    trace = None if whole else run.trace
    tracer = run.noise.tracer
    traced = {int(c["cpu"]): c for c in tracer.get("cpus", ())} if tracer.get("used") else {}
    out = {}
    for cpu in run.noise.cpus:
        if trace is None:
            r = rows[cpu.cpu]
            lost, events, gap_sum, measured = (float(r["lost_ns"]), int(r["gaps"]), float(r["total_gap_ns"]),
                                               float(r["measured_ns"]))  # fmt: skip
            dropped = 0
        else:
            t = trace.cpu(cpu.cpu)
            lost, events, gap_sum, measured = float(t.lost_ns), t.events, float(t.duration_ns.sum()), t.measured_ns
            dropped = t.dropped
        by_trace = traced.get(cpu.cpu) if not dropped else None  # the trace matched the recorded gaps only
        one = account(cpu, by_trace, lost, events, gap_sum, measured)
        if one is not None:
            out[cpu.cpu] = one
    return out
