"""A simulation study: the slowdown against N for each granularity, with a
confidence interval over seeds; what each named source costs; the scale
limit; and the what-ifs, each beside the baseline.

Every job is replayed by the native kernel (quietcore.simulate.native), in
the round model (every message of the collective, the default) or the fast
model (the collective a noiseless cost after the slowest rank); in the
round model the baseline curve is replayed in the fast model too, so that
the study says where the two differ. Variants of one (N, g, repeat) share
their ranks' offsets (common random numbers), so a difference between the
baseline and a what-if is the what-if's, not the draw's."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quietcore.simulate import rounds
from quietcore.simulate.engine import Network, Timeline
from quietcore.simulate.native import replay
from quietcore.simulate.noise import Noise
from quietcore.stats.student import mean_ci

LIMIT = 1.10  # the scale limit: where noise costs 10 %
LADDER = (1, 10, 100)  # besides the asked N: where the curve starts, for the scale limit


@dataclass(frozen=True)
class Options:
    ranks: list[int]
    granularities_us: list[float]
    collective: str = "allreduce"
    iterations: int = 1000
    repeats: int = 3
    seed: int = 1
    network: Network = field(default_factory=Network)
    common: bool = False  # every rank in the same phase (--phase common)
    scale: float = 0.5  # the what-if's factor on every gap's length
    focus: int = 10_000  # where sources and what-ifs are shown
    model: str = "rounds"  # rounds: every message of the collective; fast: a noiseless cost after the slowest
    algorithm: str = "recursive-doubling"  # the round model's schedule of the collective
    charge: str = "stretch"  # how noise is charged to work: stretch, or window (LogGOPSim's)


@dataclass(frozen=True)
class Variant:
    name: str
    without: int | None = None  # a source taken out
    scale: float = 1.0
    common: bool = False
    network: Network | None = None


def variants(noise: Noise, o: Options) -> list[Variant]:
    """The baseline, each source taken out, then the what-ifs."""
    n = o.network
    faster = Network(n.latency_ns / 10, n.overhead_ns, n.per_byte_ns, n.bytes)
    out = [Variant("baseline", common=o.common)]
    out += [Variant(f"without {name}", without=i, common=o.common) for i, name in enumerate(noise.sources)]
    if not o.common:
        out.append(Variant("co-scheduled (every rank's noise in the same phase)", common=True))
    out.append(Variant(f"every gap x{o.scale:g} as long", scale=o.scale, common=o.common))
    out.append(Variant("a 10x faster network (L / 10)", common=o.common, network=faster))
    return out


def _offsets(noise: Noise, n: int, rng: np.random.Generator, common: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each rank's trace (the traces in turn) and offset into it; in common
    phase every rank replays one trace (drawn) from one offset."""
    periods = np.array([t.period for t in noise.traces])
    if common:
        assign = np.full(n, rng.integers(len(periods)), dtype=np.int64)
        return assign, np.full(n, rng.random()) * periods[assign]
    assign = np.arange(n, dtype=np.int64) % len(periods)
    return assign, rng.random(n) * periods[assign]


def job(noise: Noise, timelines: list[Timeline], v: Variant, o: Options, n: int, work_ns: float,
        repeat: int, model: str | None = None, threads: int | None = None) -> dict[str, Any]:  # fmt: skip
    """One replay, in `model` (the study's unless said). Its slowdown is over
    the baseline network's noiseless runtime in that model, so that a faster
    network shows as a shorter run."""
    rng = np.random.default_rng([o.seed, n, repeat])  # the same ranks for every variant
    assign, offsets = _offsets(noise, n, rng, v.common)
    network = v.network or o.network
    if (model or o.model) == "fast":
        got = replay(timelines, assign, offsets, work_ns, o.iterations, o.collective, network, threads,
                     charge=o.charge)  # fmt: skip
        ideal = o.iterations * (work_ns + o.network.rounds(n, o.collective))
    else:
        got = replay(timelines, assign, offsets, work_ns, o.iterations, o.collective, network, threads,
                     algorithm=o.algorithm, charge=o.charge)  # fmt: skip
        ideal = got["ideal_ns"] if v.network is None else _noiseless(o, n, work_ns)
    return {**got, "slowdown": got["runtime_ns"] / ideal}


_IDEALS: dict[tuple[int, float, int, str, Network], float] = {}


def _noiseless(o: Options, n: int, work_ns: float) -> float:
    """The baseline network's noiseless runtime in the round model."""
    key = (n, work_ns, o.iterations, o.algorithm, o.network)
    if key not in _IDEALS:
        _IDEALS[key] = rounds.noiseless(n, work_ns, o.iterations, o.algorithm, o.network)
    return _IDEALS[key]


def scale_limit(curve: list[tuple[int, float]]) -> dict[str, Any]:
    """The N at which the slowdown first reaches LIMIT, interpolated in
    log N between the two points around it."""
    for k, (n, s) in enumerate(curve):
        if s >= LIMIT:
            if k == 0:
                return {"ranks": n, "bound": "at most", "text": f"already at N = {n:,}"}
            (n0, s0) = curve[k - 1]
            x = math.log(n0) + (LIMIT - s0) / (s - s0) * (math.log(n) - math.log(n0))
            # a whole number of ranks past the last point under LIMIT: "N ≈ 1" beside N = 1's 1.028 read wrong
            ranks = min(max(round(math.exp(x)), n0 + 1), n)
            return {"ranks": ranks, "bound": "about", "text": f"N ≈ {ranks:,}"}
    n = curve[-1][0]
    return {"ranks": n, "bound": "over", "text": f"not reached by N = {n:,}"}


def study(noise: Noise, o: Options, on_job: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    """Every job, then the tables' data (JSON-ready)."""
    ladder = sorted({*[n for n in LADDER if n < max(o.ranks)], *o.ranks})
    vs = variants(noise, o)
    focus = o.focus if o.focus in o.ranks else max(o.ranks)
    made = {v.name: noise.timelines(v.without, v.scale) for v in vs}  # once per variant, not per replay
    plan = [(v, g, n, o.model) for g in o.granularities_us for n in ladder for v in vs
            if v.name == "baseline" or n == focus]  # fmt: skip
    if o.model == "rounds":  # the baseline curve in the fast model too: where the two differ
        plan += [(vs[0], g, n, "fast") for g in o.granularities_us for n in ladder]
    steps = {n: 1 + rounds.rounds(o.algorithm, n) for n in ladder}  # a round costs about what a quantum does
    cost = {(n, m): n * o.iterations * (steps[n] if m == "rounds" else 1) for n in ladder for m in ("rounds", "fast")}
    total = sum(cost[n, m] for _, _, n, m in plan) * o.repeats
    tasks = [(v, g, n, model, r) for v, g, n, model in plan for r in range(o.repeats)]
    # One job a CPU at once, each on one thread: a job's rounds wait for each other at every step (a barrier),
    # jobs do not, so two single-threaded jobs finish sooner than two in turn on two threads each.
    workers = max(1, len(os.sched_getaffinity(0)))
    got: dict[tuple[str, float, int], list[dict[str, Any]]] = {}
    results: dict[int, dict[str, Any]] = {}
    done = 0.0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running = {pool.submit(job, noise, made[v.name], v, o, n, g * 1e3, r, model, 1): k
                   for k, (v, g, n, model, r) in enumerate(tasks)}  # fmt: skip
        for future in as_completed(running):
            k = running[future]
            results[k] = future.result()
            v, g, n, model, _ = tasks[k]
            done += cost[n, model]
            if on_job:
                name = v.name if model == o.model else f"{v.name} ({model} model)"
                on_job(f"N = {n:,}, g = {g:g} µs, {name}", done / total)
    for k, (v, g, n, model, _) in enumerate(tasks):  # in the plan's order: the same study whatever finished first
        name = v.name if model == o.model else f"{v.name} ({model} model)"
        got.setdefault((name, g, n), []).append(results[k])
    return _tables(noise, o, vs, ladder, focus, got)


def _tables(noise: Noise, o: Options, vs: list[Variant], ladder: list[int], focus: int,
            got: dict[tuple[str, float, int], list[dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
    def stat(name: str, g: float, n: int) -> dict[str, Any]:
        runs = got[(name, g, n)]
        mean, lo, hi = mean_ci([r["slowdown"] for r in runs])
        hit = [r["hit_fraction"] for r in runs if r.get("hit_fraction") is not None]
        return {"slowdown": mean, "ci": [lo, hi], "hit_fraction": float(np.mean(hit)) if hit else None}

    curves = []
    for g in o.granularities_us:
        points = [{"ranks": n, **stat("baseline", g, n)} for n in ladder]
        if o.model == "rounds":
            for p in points:
                fast = stat("baseline (fast model)", g, p["ranks"])
                p["fast"] = {"slowdown": fast["slowdown"], "ci": fast["ci"]}
        limit = scale_limit([(p["ranks"], p["slowdown"]) for p in points])
        curves.append({"granularity_us": g, "points": points, "scale_limit": limit})
        if o.model == "rounds":
            curves[-1]["fast_scale_limit"] = scale_limit([(p["ranks"], p["fast"]["slowdown"]) for p in points])
    lost = noise.lost_by_source()
    sources, whatifs = [], []
    for g in o.granularities_us:
        base = stat("baseline", g, focus)["slowdown"]
        for v in vs[1:]:
            s = stat(v.name, g, focus)
            row = {"granularity_us": g, "variant": v.name, **s, "baseline": base}
            if v.without is not None:
                cost = base - s["slowdown"]
                sources.append({**row, "source": noise.sources[v.without], "tick": v.without in noise.ticks,
                                "lost_share": lost[v.without],
                                "cost": cost, "share": cost / (base - 1) if base > 1 else None})  # fmt: skip
            else:
                whatifs.append(row)
    return {"model": o.model, "algorithm": o.algorithm if o.model == "rounds" else None, "noise_charge": o.charge,
            "noise": noise.described, "net_noise": noise.fraction(), "sources": list(noise.sources),
            "lost_by_source": lost, "focus_ranks": focus, "curves": curves, "by_source": sources,
            "whatifs": whatifs, "notes": list(noise.notes)}  # fmt: skip
