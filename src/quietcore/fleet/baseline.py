"""A noise run's CPUs as the check compares them (quietcore.runs.reference):
the lost time in whole windows, the totals, the periodic sources. One
function for a reference's session and for the check's own measurement."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from quietcore.facts.cpulist import cpus_phrase, figure_range
from quietcore.runs.model import Run
from quietcore.runs.reference import WINDOW_S, CpuNoise, GuestCount, Periodic
from quietcore.runs.trace import CpuTrace

#: What a reference needs per CPU: 5 s of noise (50 windows), so that a 0.5 s check's
#: 5 windows can be told from it at p < 0.001 (at best 1 in 3.5 million) and its
#: periodic sources are sure.
MIN_WINDOWS = 50


def window_lost(trace: CpuTrace, window_s: float = WINDOW_S) -> np.ndarray:
    """The lost ratio of each whole window of the CPU's span, but for the window's
    longest gap. Gaps are split at the window edges; the longest gap that starts
    in a window is left out of it. One long gap a window is a host stalling the
    vCPU, or an SMI: rare, random, and `--max-gap-us`'s to judge. What the
    windows measure is the noise that comes back, which a 5 s reference can
    hold and a 0.5 s check can be held to. (Left in, the stalls a 5 s reference
    happened to miss made 2 checks in 20 fail on this VM; left out, none of
    127 stored here, and a planted 100 Hz x 200 µs source still shifts every
    window 2.2 %.)

    Linear in the gaps: a spinner's gaps never overlap, so the lost time before
    t is the sum of the gaps ended by t plus the part of the one under way."""
    width = window_s * 1e9
    # A last window 90 % full counts, over its own length: a 5 s run measures 4.9985-4.9999 s
    # here (its spinners start a millisecond or two into it on a busy VM), and 90 ms still hold
    # 22 ticks at 250 Hz and 9 periods of a 100 Hz source.
    count = int(trace.measured_ns / width + 0.1)
    if count == 0:
        return np.empty(0)
    edges = np.minimum(trace.span_start_ns + width * np.arange(count + 1), trace.span_end_ns)
    starts, durations = trace.start_ns, trace.duration_ns
    ends = starts + durations
    done = np.concatenate(([0.0], np.cumsum(durations)))
    k = np.searchsorted(ends, edges, side="right")  # gaps ended by each edge
    lost = done[k]
    under = k < starts.size
    k_under = np.minimum(k, max(starts.size - 1, 0))
    if starts.size:
        lost += np.where(under & (starts[k_under] < edges), edges - starts[k_under], 0.0)
    per_window = np.diff(lost)
    window = np.searchsorted(edges, starts, side="right") - 1  # the window each gap starts in
    inside = (window >= 0) & (window < count)
    w, d, st = window[inside], durations[inside], starts[inside]
    if w.size:
        # The longest gap of each window, in one pass: gaps come in time order, so each
        # window's are a run; the first gap equal to its run's maximum is the one.
        first = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        biggest = np.repeat(np.maximum.reduceat(d, first), np.diff(np.r_[first, w.size]))
        top = np.flatnonzero(d == biggest)
        top = top[np.r_[True, w[top][1:] != w[top][:-1]]]
        # ... left out for the part of it inside the window (one across an edge goes on in the next)
        per_window[w[top]] -= np.minimum(st[top] + d[top], edges[w[top] + 1]) - st[top]
    ratios: np.ndarray = np.maximum(per_window, 0.0) / np.diff(edges)
    return ratios


def cpu_noise(run: Run, keep_gaps: bool = False) -> list[CpuNoise]:
    """Every CPU of a spin-mode noise run (none for fwq and ftq, which have no gaps)."""
    trace = run.trace
    if trace is None:
        return []
    rows = {int(r["cpu"]): r for r in run.summary}
    out = []
    for c in trace.cpus:
        row = rows.get(c.cpu)
        if row is None:
            continue
        measured_s = float(row["measured_ns"]) / 1e9
        analysis = run.noise.of(c.cpu)
        attribution = analysis.attribution if analysis else None
        guest = None
        if attribution is not None and measured_s > 0:
            # rates over the counters' own window (the probe's start-up and end lie inside it); the
            # probe's own preemptions over its measured time
            counted_s = (attribution.counted_ns or 0.0) / 1e9 or measured_s
            guest = tuple(GuestCount(s.name, s.kind, s.count / (measured_s if s.kind == "switch" else counted_s),
                                     (s.cost_ns if s.cost_ns is not None else s.estimate_ns / s.count) / 1e9)
                          for s in attribution.sources if s.kind != "steal" and s.count > 0)  # fmt: skip
        periodic = tuple(
            Periodic(
                p.frequency_hz,
                p.median_duration_ns / 1e9,
                p.lost_ns / float(row["measured_ns"]),
                p.name,
                p.outside_guest,
            )
            for p in (analysis.periodic if analysis else ())
        )
        out.append(CpuNoise(cpu=c.cpu, measured_s=measured_s,
                            lost_ratio=float(row["lost_ns"]) / float(row["measured_ns"]),
                            events_per_s=float(row["events_per_s"]), max_gap_s=float(row["max_gap_ns"]) / 1e9,
                            windows=tuple(window_lost(c).tolist()), periodic=periodic,
                            dropped=int(row["events_dropped"]),
                            gaps_s=tuple((c.duration_ns / 1e9).tolist()) if keep_gaps else (),
                            guest=guest))  # fmt: skip
    return out


@dataclass(frozen=True)
class Taken:
    """What a session offers as references: per host its CPUs, and why some were refused."""

    hosts: dict[str, list[CpuNoise]]
    refused: list[str]


def from_session(command: str, runs: Iterable[Run], host: str) -> Taken:
    """The CPUs of a noise, lab or survey session, per host (a survey's per node,
    from each rank's run; the others are all of `host`). A CPU measured twice
    keeps its longer run."""
    hosts: dict[str, dict[int, CpuNoise]] = {}
    # refused CPUs by host and why, with each one's figure: told a line of each, not a CPU a line (a lab's
    # 2 s rounds on 384 CPUs were 384 reasons in one error line)
    dropped: dict[str, dict[int, int]] = {}
    short: dict[str, dict[int, float]] = {}
    for run in runs:
        if run.kind != "noise" or run.interrupted or run.params.get("tune"):
            continue
        where = str((run.params.get("survey") or {}).get("host") or host)
        for c in cpu_noise(run):
            if c.dropped:
                dropped.setdefault(where, {})[c.cpu] = c.dropped
                continue
            if len(c.windows) < MIN_WINDOWS:
                short.setdefault(where, {})[c.cpu] = c.measured_s
                continue
            kept = hosts.setdefault(where, {})
            if c.cpu not in kept or c.measured_s > kept[c.cpu].measured_s:
                kept[c.cpu] = c
    if command not in ("noise", "lab", "survey"):
        return Taken({}, [f"a {command} session has no noise of the node at rest (take a noise, lab or survey one)"])
    refused = [f"{cpus_phrase(list(of))} on {where}: {figure_range(list(of.values()), 'd')} gaps were not "
               f"recorded (--max-events or survey --send-events filled), so {'its' if len(of) == 1 else 'their'} "
               "windows undercount" for where, of in dropped.items()]  # fmt: skip
    refused += [f"{cpus_phrase(list(of))} on {where}: {figure_range(list(of.values()), '.3g')} s measured, a "
                f"reference needs {MIN_WINDOWS * WINDOW_S:g} s ({MIN_WINDOWS} windows of {WINDOW_S * 1e3:g} ms)"
                for where, of in short.items()]  # fmt: skip
    return Taken({h: sorted(c.values(), key=lambda c: c.cpu) for h, c in hosts.items()}, refused)
