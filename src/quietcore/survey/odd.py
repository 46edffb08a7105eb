"""Rank 0's step over every node's summary: which nodes are odd, and how
their configuration differs from the majority. Linear in the nodes; it
sees only the small per-node summaries, never the events.

The rule, per metric, for each node against the others:
- its value is at least the metric's ratio times the median of the other
  nodes and exceeds it by the metric's floor (an absolute difference too
  small to matter is never odd), and
- with MIN_FOR_Z nodes or more, also its robust z-score (0.6745 * (x -
  median) / MAD, Iglewicz and Hoaglin) is over Z_LIMIT, so that one node in
  a noisy but uniform job is not called odd for the spread all share.
Only the high side is odd: a node quieter than the rest is not a problem.
With fewer than MIN_NODES nodes there is no majority to stand out from:
no node is called odd, and the same rule says instead how they differ
(`Verdict.differs`)."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from quietcore.runs.analysis import NoiseAnalysis

Z_LIMIT = 3.5
MIN_FOR_Z = 5
MIN_NODES = 3  # below this no node can be called odd: two nodes that differ are just different
#: metric -> (unit, floor, ratio): a node must exceed the others' median by
#: the floor and by the ratio. A single gap (the max, the p99.9) moves far
#: from run to run on a VM whose host stalls it for milliseconds, so those
#: two need a wide margin; the time lost and the periodic sources are
#: steadier.
METRICS: dict[str, tuple[str, float, float]] = {
    "noise fraction": ("%", 0.5, 2.0),
    "max gap": ("µs", 2000.0, 4.0),
    "p99.9 gap": ("µs", 2000.0, 4.0),  # in a 2 s run of ~1,000 gaps, the p99.9 is about the max
    "events": ("/s", 500.0, 2.0),
}
SOURCE_FLOOR, SOURCE_RATIO = 0.5, 2.0  # % of the time one periodic source takes
#: configuration fields set side by side across nodes
CONFIG_FIELDS = ("kernel", "preemption", "cmdline", "clocksource", "thp", "thp_defrag", "governors", "isolated",
                 "nohz_full", "smt", "irqbalance", "virtualization")  # fmt: skip


@dataclass
class NodeSummary:
    """What one rank sends of its node: its place, its figures, its config."""

    name: str  # "host:rank"
    figures: dict[str, float]  # METRICS' names -> value
    sources: dict[str, float] = field(default_factory=dict)  # periodic source ("100 Hz") -> % of the time lost
    config: dict[str, str] = field(default_factory=dict)


@dataclass
class Verdict:
    name: str
    odd: bool
    reasons: list[str]  # why it is odd; with fewer than MIN_NODES nodes, how it differs from the others
    differs: bool = False  # fewer than MIN_NODES nodes, and this one stands above the others


def _others_medians(values: list[float]) -> list[float]:
    """For each value, the median of all the others: one sort, then each
    answer in constant time (linear in the nodes after the sort)."""
    n = len(values)
    if n < 2:
        return list(values)
    order = sorted(range(n), key=values.__getitem__)
    ranked = [values[i] for i in order]
    m = n - 1  # the others

    def at(j: int, k: int) -> float:  # the j-th smallest of the others of the node ranked k
        return ranked[j if j < k else j + 1]

    out = [0.0] * n
    for k, i in enumerate(order):
        out[i] = at(m // 2, k) if m % 2 else (at(m // 2 - 1, k) + at(m // 2, k)) / 2
    return out


def _flags(values: list[float], floor: float, ratio: float) -> list[tuple[bool, float]]:
    """(odd, the others' median) per node for one metric."""
    bases = _others_medians(values)
    median = statistics.median(values) if values else 0.0
    mad = statistics.median(abs(v - median) for v in values) if values else 0.0
    out = []
    for x, base in zip(values, bases, strict=True):
        odd = x - base >= floor and not (base > 0 and x / base < ratio)
        if odd and len(values) >= MIN_FOR_Z:  # robust z-score (Iglewicz and Hoaglin)
            odd = mad == 0 or 0.6745 * (x - median) / mad > Z_LIMIT
        out.append((odd, base))
    return out


GAP_METRICS = ("max gap", "p99.9 gap")


def odd_nodes(nodes: list[NodeSummary], gaps: bool = True) -> list[Verdict]:
    """gaps=False leaves the single-gap metrics out of the verdict: on
    virtual machines the host stalls any vCPU for milliseconds at random."""
    verdicts = [Verdict(n.name, False, []) for n in nodes]
    few = len(nodes) < MIN_NODES

    def flag(i: int, reason: str) -> None:
        verdicts[i].reasons.append(reason)
        verdicts[i].odd, verdicts[i].differs = not few, few

    for metric, (unit, floor, ratio) in METRICS.items():
        if not gaps and metric in GAP_METRICS:
            continue
        having = [i for i, n in enumerate(nodes) if metric in n.figures]  # a p99.9 needs 1,000 gaps
        if len(having) < 2:
            continue
        values = [nodes[i].figures[metric] for i in having]
        for i, x, (odd, base) in zip(having, values, _flags(values, floor, ratio), strict=True):
            if odd:
                flag(i, f"{metric} {x:,.2f} {unit} (others' median {base:,.2f})")
    names = sorted({s for n in nodes for s in n.sources})
    for source in names:
        values = [n.sources.get(source, 0.0) for n in nodes]
        for i, (x, (odd, base)) in enumerate(zip(values, _flags(values, SOURCE_FLOOR, SOURCE_RATIO), strict=True)):
            if odd:
                flag(i, f"periodic source {source}: {x:.2f} % of the time lost (others' median {base:.2f} %)")
    return verdicts


def config_diff(nodes: list[NodeSummary]) -> dict[str, list[str]]:
    """Per node that differs from the majority, one phrase per field:
    "THP always (others madvise)". Ties have no majority: every value is
    then named."""
    out: dict[str, list[str]] = {}
    for key in CONFIG_FIELDS:
        values = [n.config.get(key, "") for n in nodes]
        counts = Counter(values)
        if len(counts) < 2:
            continue
        (common, top), *rest = counts.most_common()
        tie = bool(rest) and rest[0][1] == top
        for node, value in zip(nodes, values, strict=True):
            if tie or value != common:
                others = ", ".join(sorted({v or "-" for v in values if v != value}))
                out.setdefault(node.name, []).append(f"{key} {value or '-'} (others {others})")
    return out


def summary_of(name: str, run_summary: list[dict[str, Any]], analysis: NoiseAnalysis,
               p999_us: float | None, config: dict[str, str]) -> NodeSummary:  # fmt: skip
    """A node's summary from its noise run: the sum over its CPUs (a rank
    may hold several) of the lost time and events, the worst gap."""
    measured = sum(float(r["measured_ns"]) for r in run_summary) or 1.0
    lost = sum(float(r["lost_ns"]) for r in run_summary)
    events = sum(float(r["events_per_s"]) for r in run_summary)
    worst = max((float(r["max_gap_ns"]) for r in run_summary), default=0.0)
    sources: dict[str, float] = {}
    for cpu in analysis.cpus:
        for s in cpu.periodic:
            key = f"{s.frequency_hz:.0f} Hz"
            sources[key] = sources.get(key, 0.0) + 100.0 * s.lost_ns / measured
    figures = {"noise fraction": 100.0 * lost / measured, "max gap": worst / 1e3, "events": events}
    if p999_us is not None:  # none from fewer than 1,000 gaps: that node is then not judged on it
        figures["p99.9 gap"] = p999_us
    return NodeSummary(name, figures, sources, config)


def audit_diff(audits: dict[str, dict[str, tuple[str, str]]]) -> list[dict[str, Any]]:
    """Per audit finding whose status is not the same on every node: the
    finding once, with each status and its nodes. `audits` is node ->
    finding id -> (status, summary). A finding that fails everywhere is the
    job's, not a node's, and is left to each node's own audit."""
    ids = sorted({i for findings in audits.values() for i in findings})
    out = []
    for finding in ids:
        by_status: dict[str, list[str]] = {}
        summaries: dict[str, str] = {}
        for node, findings in audits.items():
            status, summary = findings.get(finding, ("absent", ""))
            by_status.setdefault(status, []).append(node)
            summaries.setdefault(status, summary)
        if len(by_status) > 1:
            out.append({"id": finding, "statuses": {k: sorted(v) for k, v in sorted(by_status.items())},
                        "summaries": summaries})  # fmt: skip
    return out


def odd_count(survey: dict[str, Any]) -> str:
    """ "8 ranks, 1 odd"; below MIN_NODES, that none can be, and whether they differ."""
    ranks = survey["ranks"]
    if len(survey["nodes"]) >= MIN_NODES:
        return f"{ranks} ranks, {sum(bool(n.get('odd')) for n in survey['nodes'])} odd"
    differ = [str(n["rank"]) for n in survey["nodes"] if n.get("differs")]
    how = f"rank {', '.join(differ)} stands above the other" if differ else "they do not differ by the rule's margins"
    return f"{ranks} rank{'s' if ranks != 1 else ''}: too few to call one odd ({MIN_NODES} needed); {how}"
