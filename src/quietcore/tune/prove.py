"""`quietcore tune prove`: what the run-time tuning buys, measured. Noise
on the targets with the tuning off and on, in several rounds whose order
is shuffled (seeded), so that the host's drift does not fall on one side;
the tuning goes through the journal as temporary changes, so it is undone
at the end (and after a crash, by the next command) unless --keep."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from quietcore.actions import Action
from quietcore.facts.root import Root
from quietcore.levers.journal import Journal
from quietcore.runs.model import Run
from quietcore.stats.compare import ALPHA, ratio_ci
from quietcore.stats.percentiles import tail
from quietcore.stats.rank import mann_whitney
from quietcore.tune.state import LEVER, restorable

#: name and unit of each figure, per CPU of one noise run
METRICS: tuple[tuple[str, str], ...] = (
    ("lost time", "ms/s"),
    ("max gap", "µs"),
    ("p99.9 gap", "µs"),
    ("events", "/s"),
    ("task preemptions", "/s"),
    ("device interrupts", "/s"),
    ("IPIs", "/s"),
    ("softirqs", "/s"),
)
#: the attribution's source kinds behind the per-source counts
KINDS = {"task preemptions": "switch", "device interrupts": "irq", "IPIs": "ipi", "softirqs": "softirq"}


Figures = dict[str, dict[str, float]]  # where ("CPU 1", or a workload's cell) -> metric -> value


def figures(run: Run) -> Figures:
    """Each metric per CPU of one noise run, per second where it is a count:
    the gaps from the run's events, the counts by source from the kernel's
    counters (the attribution)."""

    analysis = run.noise
    trace = run.trace
    out = {}
    for row in run.summary:
        cpu = int(row["cpu"])
        seconds = float(row["measured_ns"]) / 1e9 or 1.0
        cpu_analysis = analysis.of(cpu)
        attribution = cpu_analysis.attribution if cpu_analysis is not None else None
        counts = {name: (attribution.count_of(kind) if attribution is not None else 0) / seconds
                  for name, kind in KINDS.items()}  # fmt: skip
        gaps = trace.cpu(cpu).duration_ns if trace is not None and cpu in {c.cpu for c in trace.cpus} else None
        # no p99.9 from fewer than 1,000 gaps (stats.percentiles): the round then has no such figure
        p999 = tail(gaps, 0.999) if gaps is not None else None
        out[f"CPU {cpu}"] = {
            "lost time": float(row["lost_ns"]) / 1e6 / seconds,
            "max gap": float(row["max_gap_ns"]) / 1e3,
            **({"p99.9 gap": p999 / 1e3} if p999 is not None else {}),
            "events": float(row["events_per_s"]),
            **counts,
        }
    return out


def workload_figures(run: Run, where: str, units: dict[str, str]) -> Figures:
    """An experiment cell's metric from one run of its workload; its unit
    goes into `units`."""
    metric = run.result["metric"]
    units[metric["name"]] = metric["unit"]
    return {where: {metric["name"]: float(metric["value"])}}


@dataclass(frozen=True)
class Row:
    where: str  # "CPU 1", or the workload of an experiment's cell
    metric: str
    unit: str
    before: float  # medians over the rounds
    after: float
    ratio: float | None  # after / before; None when before is 0
    ci: tuple[float, float] | None
    p: float | None
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return self.__dict__ | {"ci": list(self.ci) if self.ci else None}


Verdict = tuple[float | None, tuple[float, float] | None, float | None, str]  # ratio, its CI, p, words


def _verdict(before: list[float], after: list[float]) -> Verdict:
    mb, ma = float(np.median(before)), float(np.median(after))
    if min(len(before), len(after)) < 2:
        return (ma / mb if mb else None), None, None, "too few rounds for a verdict (--rounds 5 or more)"
    p = mann_whitney(after, before)[1]
    if mb == 0:
        return None, None, p, ("more (none before)" if p < ALPHA and ma > 0 else "no detectable difference")
    ratio = ma / mb
    with np.errstate(divide="ignore", invalid="ignore"):  # rounds of 0 (no device interrupt) resample to 0/0
        low, high = ratio_ci(before, after)
    if not (np.isfinite(low) and np.isfinite(high)):
        return ratio, None, p, "fewer" if p < ALPHA and ratio < 1 else ("more" if p < ALPHA else
                                                                        "no detectable difference")  # fmt: skip
    if p < ALPHA and high < 1:
        return ratio, (low, high), p, f"fewer: {1 - ratio:.0%} less"
    if p < ALPHA and low > 1:
        return ratio, (low, high), p, f"more: {ratio - 1:.0%} more"
    return ratio, (low, high), p, "no detectable difference"


def table(measured: dict[str, list[Figures]], units: dict[str, str] | None = None) -> list[Row]:
    units = {**dict(METRICS), **(units or {})}
    rows = []
    places = list(dict.fromkeys(where for m in measured["before"] for where in m))
    for where in places:
        names = list(dict.fromkeys(metric for m in measured["before"] if where in m for metric in m[where]))
        for metric in names:
            before = [m[where][metric] for m in measured["before"] if metric in m.get(where, {})]
            after = [m[where][metric] for m in measured["after"] if metric in m.get(where, {})]
            # A figure every round has, or none: a p99.9 needs 1,000 gaps, and medians over the rounds that
            # had that many would set one state's busier rounds against all of the other's.
            if not before or len(before) < len(measured["before"]) or len(after) < len(measured["after"]):
                continue
            ratio, ci, p, words = _verdict(before, after)
            rows.append(Row(where, metric, units.get(metric, ""), statistics.median(before), statistics.median(after),
                            ratio, ci, p, words))  # fmt: skip
    return rows


def prove(
    journal: Journal,
    root: Root,
    actions: list[Action],
    rounds: int,
    seed: int,
    measure: Callable[[str, int], Figures],
    units: dict[str, str] | None = None,
) -> tuple[list[Row], list[str]]:
    """measure(state, round) runs and stores one noise run (and the
    experiment's workloads) and returns their figures. Returns the table
    and the refusals met while applying."""
    rng = random.Random(seed)
    measured: dict[str, list[Figures]] = {"before": [], "after": []}
    refusals: list[str] = []
    for r in range(rounds):
        order = ["before", "after"]
        rng.shuffle(order)
        for state in order:
            if state == "after":
                for action in actions:
                    refusal = journal.apply(LEVER, action, root, restorable(root, action.kind, action.target))
                    if refusal and r == 0:
                        refusals.append(f"{action.note or action.target}: {refusal.rsplit(': ', 1)[-1]}")
            else:
                journal.undo()
            measured[state].append(measure(state, r))
    journal.undo()
    return table(measured, units), refusals
