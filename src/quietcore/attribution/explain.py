"""`--explain-above US`: each gap of the noise probe longer than that, with
what the trace shows inside it on its CPU (task slices, IRQs, softirqs,
vectors, IPIs, work items, timers: the episodes of the intruders'
accounting) and how each came (the waker, the IPI's sender, the work's
queuer, on their CPUs). What no episode covers is untraced: on a VM, the
host."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from quietcore.attribution.intruders import came_json
from quietcore.attribution.traceline import LINE

if TYPE_CHECKING:  # annotations only: the report reads stored explanations without the tracer's numpy
    from quietcore.attribution.intruders import Episode, Trace
    from quietcore.runs.trace import NoiseTrace

LIMIT = 20  # gaps explained per CPU, the longest
STACK_FRAMES = 12  # of a kernel stack, kept; the innermost
EPISODES = 25  # listed per gap, the first


def _covered(spans: list[tuple[float, float]]) -> float:
    """The length of the union of the spans."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _inside(episodes: list[Episode], starts: list[float], longest: float, s: float, e: float) -> list[Episode]:
    """The episodes overlapping [s, e): those starting before e and at
    most the longest episode's length before s, that end after s."""
    lo, hi = bisect_left(starts, s - longest), bisect_left(starts, e)
    return [ep for ep in episodes[lo:hi] if ep.end > s]


def probe_gaps(trace: NoiseTrace) -> dict[int, tuple[Sequence[float], Sequence[float]]]:
    """The noise probe's gaps per CPU: (starts, durations), ns."""
    return {c.cpu: (c.start_ns, c.duration_ns) for c in trace.cpus}  # type: ignore[misc]


def intrusion_gaps(found: Trace) -> dict[int, tuple[Sequence[float], Sequence[float]]]:
    """Per watched CPU, the stretches the workload (or idle) lost to
    intruders: the union of the episodes there, as (starts, durations)."""
    out: dict[int, tuple[Sequence[float], Sequence[float]]] = {}
    for cpu, c in found.cpus.items():
        merged: list[list[float]] = []
        for ep in sorted(c.episodes, key=lambda ep: ep.start):
            if merged and ep.start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], ep.end)
            else:
                merged.append([ep.start, ep.end])
        out[cpu] = ([a for a, _ in merged], [b - a for a, b in merged])
    return out


def explain_gaps(
    gaps_of: dict[int, tuple[Sequence[float], Sequence[float]]],
    found: Trace,
    above_ns: float,
    limit: int = LIMIT,
    origin_ns: float = 0.0,
) -> dict[str, Any]:
    """Per CPU, its longest gaps over `above_ns` (at most `limit`), each
    with the episodes inside it in time order (the first EPISODES of them);
    times are shown from `origin_ns`."""
    cpus = []
    for cpu_id, (start_ns, duration_ns) in gaps_of.items():
        mine = found.cpus.get(cpu_id)
        episodes = sorted(mine.episodes, key=lambda ep: ep.start) if mine else []
        starts = [ep.start for ep in episodes]
        longest = max((ep.end - ep.start for ep in episodes), default=0.0)
        over = [i for i in range(len(duration_ns)) if duration_ns[i] >= above_ns]
        over.sort(key=lambda i: -float(duration_ns[i]))
        gaps = []
        for i in sorted(over[:limit], key=lambda i: float(start_ns[i])):
            s, d = float(start_ns[i]), float(duration_ns[i])
            inside = _inside(episodes, starts, longest, s, s + d)
            spans = [(max(ep.start, s), min(ep.end, s + d)) for ep in inside]
            gaps.append({
                "start_ns": s,
                "duration_ns": d,
                "more": max(0, len(inside) - EPISODES),
                "inside": [{"at_ns": ep.start - s, "ns": min(ep.end, s + d) - max(ep.start, s), "kind": ep.kind,
                            "name": ep.name, "pid": ep.pid, "came": came_json(ep.came, 3),
                            "stack": ep.stack[:STACK_FRAMES]} for ep in inside[:EPISODES]],
                "untraced_ns": max(0.0, d - _covered(spans)),
            })  # fmt: skip
        cpus.append({"cpu": cpu_id, "over": len(over), "gaps": gaps})
    return {"above_ns": above_ns, "limit": limit, "origin_ns": origin_ns, "cpus": cpus}


KEPT_BEFORE_NS = 20e6  # of the trace before the gap that stopped a run, kept


def stopped_at(result: dict[str, Any], trace: NoiseTrace | None) -> dict[str, Any] | None:
    """The gap that stopped the probe (--stop-above): of the CPUs that saw
    one (the result says which), the earliest (each such CPU's last event in
    the trace is its gap)."""
    stopped = {int(c["cpu"]) for c in result["cpus"] if c.get("stopped_above")}
    gaps = [(float(c.start_ns[-1]), float(c.duration_ns[-1]), c.cpu) for c in (trace.cpus if trace else ())
            if c.cpu in stopped and c.events]  # fmt: skip
    if not gaps:
        return None
    start, duration, cpu = min(gaps)
    return {"cpu": cpu, "start_ns": float(start), "duration_ns": float(duration)}


def window(text: str, to_ns: Callable[[str], float], gap: dict[str, Any]) -> str:
    """The trace's lines from KEPT_BEFORE_NS before the gap to its end, as
    the kernel wrote them (Documentation/trace/ftrace.rst, "The File
    System"), with a line that says what they are."""
    lo, hi = gap["start_ns"] - KEPT_BEFORE_NS, gap["start_ns"] + gap["duration_ns"]
    kept, keep = [], False
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            at = to_ns(m["ts"])
            keep = lo <= at <= hi
        if keep:  # a stack's lines go with the event before them
            kept.append(line)
    at, before = gap["start_ns"] / 1e9, KEPT_BEFORE_NS / 1e6
    head = (f"# quietcore: the trace around the gap of {gap['duration_ns'] / 1e3:.1f} us on CPU {gap['cpu']} "
            f"at {at:.6f} s that stopped the run, from {before:g} ms before")  # fmt: skip
    return "\n".join([head, *kept]) + "\n"


#: Up to this many CPUs with gaps over the bar each CPU's longest are told; past it, the node's.
EACH_CPU_UP_TO = 8
