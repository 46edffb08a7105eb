"""The analysis of a noise run, timed and checked: periodicity, counter
attribution and trace matching on synthetic traces of 10k to 1M events
(planted sources: bench/synthetic.py), each size in a child process so its
peak memory is its own; then the same sources as quietcore 0.1's analysis
(bench/reference/) on the synthetic trace and on a real run of this node.

    python bench/analysis.py [--sizes 10000,100000,1000000] [--real-s 10]

Targets (issue 11): 1M events in <= 5 s and <= 500 MB, and the cost per
event flat from 10k to 1M (a ratio near 1)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from peak import own_peak_mb  # noqa: E402
from reference import periodicity_v1, tracer_v1  # noqa: E402
from synthetic import trace  # noqa: E402

from quietcore.attribution.counters import CounterSnapshot, attribute  # noqa: E402
from quietcore.attribution.tracer import Interval, match_gaps  # noqa: E402
from quietcore.stats.periodicity import MERGED_FACTOR, find_periodic, periodic_members  # noqa: E402

TARGET_S, TARGET_MB = 5.0, 500.0


def spans_for(starts: np.ndarray, durations: np.ndarray, seed: int = 2) -> list[Interval]:
    """Traced spans as a guest would see them: a handler inside most gaps
    (a third of its length) and unrelated short spans in between."""
    rng = np.random.default_rng(seed)
    inside = rng.random(len(starts)) < 0.7
    spans = [Interval(1, float(s + 0.3 * d), float(s + 0.6 * d), "local_timer")
             for s, d in zip(starts[inside], durations[inside], strict=True)]  # fmt: skip
    extra = np.sort(rng.uniform(0, float(starts.max(initial=1.0)), len(starts) // 2))
    spans += [Interval(1, float(t), float(t) + 2_000.0, "softirq RCU") for t in extra]
    return spans


def child(n: int) -> dict[str, Any]:
    starts, durations, span = trace(n)
    spans = spans_for(starts, durations)
    times: dict[str, float] = {}
    t = time.perf_counter()
    found = find_periodic(starts, durations, span, hints_hz=(250.0,))
    times["periodicity"] = time.perf_counter() - t
    empty = CounterSnapshot({}, {}, {}, {})
    t = time.perf_counter()
    attribute(1, empty, empty, lost_ns=float(durations.sum()), durations_ns=durations, involuntary=3, user_hz=100,
              measured_costs={}, virtualized=True)  # fmt: skip
    times["attribution"] = time.perf_counter() - t
    t = time.perf_counter()
    match_gaps(1, starts, durations, spans)
    times["trace matching"] = time.perf_counter() - t
    rss_mb = own_peak_mb()  # its own: ru_maxrss counts the parent's pages, this child's before its exec
    return {"events": len(starts), "times": times, "rss_mb": rss_mb,
            "sources": [round(s.frequency_hz, 2) for s in found]}  # fmt: skip


def v1_members(starts: np.ndarray, durations: np.ndarray, span: float,
               hints: tuple[float, ...]) -> list[tuple[Any, np.ndarray]]:  # fmt: skip
    """quietcore 0.1's find_periodic, each source with its members (indices into the arrays given): what its
    own search takes, seen where it takes it (_Events.take; the reference stays as it was)."""
    v1 = periodicity_v1
    taken: list[np.ndarray] = []
    take = v1._Events.take

    def seen(ev: Any, found: Any, into: list[Any]) -> None:
        if found is not None and ev.accepts(found):
            taken.append(found[1])
        take(ev, found, into)

    v1._Events.take = seen  # type: ignore[method-assign,assignment]
    try:
        sources = v1.find_periodic(starts, durations, span, hints_hz=hints)
    finally:
        v1._Events.take = take  # type: ignore[method-assign]
    inside = np.flatnonzero((starts >= 0) & (starts < span))  # its events: those of the span (see find_periodic)
    return [(source, inside[idx]) for source, idx in zip(sources, taken, strict=True)]


def same_sources(starts: np.ndarray, durations: np.ndarray, span: float, hints: tuple[float, ...]) -> tuple[bool, str]:
    """Every source 0.1 names is named again, with about as many events: 0.2
    leaves out of a source the gaps many times its typical length (another
    source's, begun on its moment), which 0.1 counted in, and gives a gap two
    sources share to one of them, so a count may fall: past 5 %, the count
    with 0.1's gaps that 0.2 did not count and those rules account for (in
    another of 0.2's sources, or MERGED_FACTOR times the source's typical gap)
    must come within 5 % (0.2 may count other gaps than 0.1 did, and 0.1's
    left out that neither rule accounts for are said). A source 0.1 missed is
    reported, not failed: 0.2 looks for sources in step and by
    autocorrelation, which 0.1 did not."""
    new_members = periodic_members(starts, durations, span, hints_hz=hints)
    old_members = v1_members(starts, durations, span, hints)
    new = [source for source, _ in new_members]
    fn = [(round(s.frequency_hz, 1), s.events) for s in new]
    fo = [(round(s.frequency_hz, 1), s.events) for s, _ in old_members]
    unmatched = list(range(len(new)))
    split = ""
    for b, old_idx in old_members:
        alike = [k for k in unmatched if abs(new[k].frequency_hz - b.frequency_hz) <= 0.001 * b.frequency_hz]
        k = next((k for k in alike if abs(new[k].events - b.events) <= 0.05 * b.events + 1), None)
        if k is None and alike:
            # Fewer: each of 0.1's gaps that 0.2 left out, accounted for by 0.2's rules, or not
            k = max(alike, key=lambda k: new[k].events)
            mine = new_members[k][1]
            others = np.concatenate([m for j, (_, m) in enumerate(new_members) if j != k] or [np.array([], int)])
            left = np.setdiff1d(old_idx, mine)
            shared = np.isin(left, others)
            merged = durations[left] > MERGED_FACTOR * new[k].median_duration_ns
            unexplained = int((~shared & ~merged).sum())
            if new[k].events + len(left) - unexplained < 0.95 * b.events - 1:
                return False, f"new {fn} / 0.1 {fo}: of 0.1's {len(left)} gaps of its {b.frequency_hz:.1f} Hz not " \
                              f"counted, {unexplained} are in no other source and not merged"  # fmt: skip
            split += (
                f"; 0.1's {b.frequency_hz:.1f} Hz counted {b.events}: of its gaps 0.2 did not, "
                f"{int(shared.sum())} are another source's, {int((merged & ~shared).sum())} merged and "
                f"{unexplained} neither"
            )
        if k is None:
            # 0.1 reported sources in step as one at k times their rate
            # (two 100 Hz trains 5 ms apart as "200 Hz"): 0.2 splits them.
            part = next((a for a in unmatched if round(b.frequency_hz / new[a].frequency_hz) in range(2, 5)
                         and abs(b.frequency_hz / new[a].frequency_hz - round(b.frequency_hz / new[a].frequency_hz))
                         <= 0.001), None)  # fmt: skip
            if part is None:
                return False, f"new {fn} / 0.1 {fo}"
            split += f"; 0.1's {b.frequency_hz:.1f} Hz is sources in step at {new[part].frequency_hz:.1f} Hz"
            unmatched.remove(part)
            continue
        unmatched.remove(k)
    extra = "".join(f"; also {new[k].frequency_hz:.1f} Hz, {new[k].events} of {new[k].expected} periods"
                    for k in unmatched)  # fmt: skip
    return True, f"new {fn} / 0.1 {fo}{split}{extra}"


def same_matching(starts: np.ndarray, durations: np.ndarray, spans: list[Interval]) -> tuple[bool, str]:
    new = match_gaps(1, starts, durations, spans)
    old = tracer_v1.match_gaps(1, list(zip(starts.tolist(), durations.tolist(), strict=True)), spans)
    by_new = {s["name"]: (s["gaps"], round(s["ns"])) for s in new["sources"]}
    by_old = {s["name"]: (s["gaps"], round(s["ns"])) for s in old["sources"]}
    same = by_new == by_old and new["unmatched"]["gaps"] == old["unmatched"]["gaps"]
    return same, f"new {by_new} / 0.1 {by_old}"


def real_run(seconds: float) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """A real noise run of this node's CPUs, through the native probe."""
    from quietcore.probes.noise import NoiseOptions, run_noise
    from quietcore.runs.trace import NoiseTrace

    cpus = frozenset(os.sched_getaffinity(0))
    probe = run_noise(NoiseOptions(cpus, seconds))
    # the probe hands its events over apart from its envelope (probes.noise: --events-fd), whose pairs are empty
    noise = NoiseTrace.from_result(probe.result, arrays=probe.events)
    assert noise is not None
    if not all(c.events for c in noise.cpus):  # a comparison of no gaps would pass whatever the search does
        sys.exit(f"the real run's trace has no gaps on some CPU: {[c.events for c in noise.cpus]}")
    return [(c.start_ns, c.duration_ns, c.span_end_ns) for c in noise.cpus]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--real-s", type=float, default=10.0, help="length of the real run (0: none)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--child", str(n)], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout))
    stages = list(rows[0]["times"])
    print(f"{'stage':<16}" + "".join(f"{r['events']:>14,} ev" for r in rows) + "   per-event cost, largest/smallest")
    for stage in stages:
        rates = [r["events"] / max(r["times"][stage], 1e-9) for r in rows]
        print(f"{stage:<16}" + "".join(f"{rate:>13,.0f}/s" for rate in rates) + f"   {rates[0] / rates[-1]:.2f}")
    big = rows[-1]
    total = sum(big["times"].values())
    ok = []
    ok.append(total <= TARGET_S)
    print(f"{big['events']:,} events: {total:.2f} s (target <= {TARGET_S:g} s) {'PASS' if ok[-1] else 'MISS'}")
    ok.append(big["rss_mb"] <= TARGET_MB)
    print(f"{big['events']:,} events: peak RSS {big['rss_mb']:.0f} MB (target <= {TARGET_MB:g} MB) "
          f"{'PASS' if ok[-1] else 'MISS'}")  # fmt: skip
    print(f"sources found at {big['events']:,} events: {big['sources']} Hz (planted: 250 with a phase change, 100)")
    s, d, span = trace(30_000)
    for label, (same, detail) in (("synthetic 30k, periodic sources", same_sources(s, d, span, (250.0,))),
                                  ("synthetic 30k, trace matching", same_matching(s, d, spans_for(s, d)))):  # fmt: skip
        ok.append(same)
        print(f"same as quietcore 0.1, {label}: {'PASS' if same else 'MISS'} ({detail})")
    if args.real_s > 0:
        for i, (s, d, span) in enumerate(real_run(args.real_s)):
            same, detail = same_sources(s, d, span, (250.0,))
            ok.append(same)
            verdict = "PASS" if same else "MISS"
            print(f"same as quietcore 0.1, real {args.real_s:g} s run, CPU slot {i}: {verdict} ({detail})")
            if not same:  # a fresh run cannot be run again: keep it, to look into and to make a fixture of
                kept = Path(tempfile.gettempdir()) / f"quietcore-bench-miss-{os.getpid()}-{i}.npz"
                np.savez(kept, start_ns=s, duration_ns=d, span_ns=span)
                print(f"  the run is kept in {kept} (tests/fixtures/noise takes this form)")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
