"""Why a benchmark's iterations differ, when it reports a figure of its own
(--metric): each iteration's shortfall (its score below the median, as a
fraction of it) against the share of its time that intruders and the
host's steal took on the workload's CPUs, and whether forks (JMH's -f)
differ beyond their iterations' spread.

The method, stated with every result. An intruder that takes a share x of
an iteration's CPU time leaves the workload 1 - x of it: its score falls
by about x (a slope of 1). The share accounted is the slow iterations'
excess x over their excess shortfall; it is claimed at 20 % or more when
the Theil-Sen slope of shortfall on x (Sen's 95 % interval, shown) does
not rule that model out (an interval reaching 0.5-2). Slow iterations are those
whose shortfall stands more than 3 scaled MADs above the median (the
slower half when none does). Forks are compared by Kruskal-Wallis on the
iterations' scores, its p by permutation (no distribution assumed)."""

from __future__ import annotations

from typing import Any

import numpy as np

from quietcore.experiments.spread import CLAIM, slope_fit
from quietcore.report.iterations import ms
from quietcore.stats.percentiles import scaled_mad
from quietcore.stats.rank import ranks

METHOD = (
    "over iterations: the slow iterations' excess share of time taken by intruders and steal over their excess "
    "shortfall (a fixed-time iteration loses what is taken), checked by the Theil-Sen slope of shortfall on it"
)
RUNS_METHOD = METHOD.replace(
    "over iterations: the slow iterations'", "over runs (their iterations summed): the slow runs'"
)
SHOWN = 3  # iterations in the slowest and fastest lists
HIT_SHOWN = 5  # iterations a source took most in, named in the sentence
NOTED_MS = 0.5  # a difference between slow iterations and the rest named in the sentence
PERMUTATIONS = 2000


def flatten(results: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Every run's samples of the metric, each with its run's number (1 on)."""
    return [{**row, "run": k + 1} for k, r in enumerate(results) for row in r.get("samples", {}).get(name, [])]


def per_run(results: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Each run as one row: its value, and its samples' intervals, intruders, threads and steal summed."""
    out = []
    for k, r in enumerate(results):
        samples = r.get("samples", {}).get(name, [])
        figure_ = (r.get("metrics") or {}).get(name)
        if not samples or not figure_:
            continue
        row: dict[str, Any] = {"value": figure_["value"], "unit": samples[0]["unit"], "run": k + 1, "whole": True,
                               "start_s": 0.0, "end_s": sum(x["end_s"] - x["start_s"] for x in samples),
                               "steal_ms": sum(float(x.get("steal_ms") or 0.0) for x in samples)}  # fmt: skip
        for key in ("intruders", "threads"):
            if all(key in x for x in samples):
                summed: dict[str, float] = {}
                for x in samples:
                    for n, took in x[key].items():
                        summed[n] = summed.get(n, 0.0) + took
                row[key] = summed
        out.append(row)
    return out


def where(row: dict[str, Any], runs: int) -> str:
    if row.get("whole"):
        return f"run {row['run']}"
    parts = [f"run {row['run']}"] if runs > 1 else []
    if row.get("fork") is not None:
        parts.append(f"fork {row['fork']}")
    parts.append(f"it {row['iteration']}" if row.get("iteration") is not None else f"sample {row['index'] + 1}")
    return " ".join(parts)


def _taken_ms(row: dict[str, Any]) -> float:
    return float(sum((row.get("intruders") or {}).values())) + float(row.get("steal_ms") or 0.0)


def _brief(d: dict[str, float], top: int = 3) -> str:
    items = sorted(d.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {ms(v)} ms" for k, v in items) if items else "none"


def shown(row: dict[str, Any], runs: int) -> dict[str, Any]:
    """An iteration as the table shows it."""
    return {"where": where(row, runs), "value": row["value"], "unit": row["unit"],
            "intruders_ms": sum((row.get("intruders") or {}).values()), "intruders": _brief(row.get("intruders") or {}),
            "steal_ms": row.get("steal_ms"), "threads": _brief(row.get("threads") or {})}  # fmt: skip


def kruskal_permutation(values: np.ndarray, groups: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """Kruskal-Wallis H of values across groups, and its p by permutation:
    all PERMUTATIONS relabellings at once, as one array (a loop of them took
    0.7 s for 24 iterations)."""
    r, _ = ranks(values.astype(np.float64))
    labels = np.unique(groups, return_inverse=True)[1]
    k, n = int(labels.max()) + 1, len(values)
    sizes = np.bincount(labels, minlength=k)

    def h(lab: np.ndarray) -> np.ndarray:  # rows of labellings -> H of each
        onehot = lab[..., None] == np.arange(k)
        sums = np.einsum("...i,...ik->...k", np.broadcast_to(r, lab.shape), onehot)
        return np.asarray(12 / (n * (n + 1)) * np.sum(sums**2 / np.maximum(sizes, 1), axis=-1) - 3 * (n + 1))

    observed = float(h(labels))
    shuffled = np.random.default_rng(seed).permuted(np.broadcast_to(labels, (PERMUTATIONS, n)), axis=1)
    beyond = int(np.sum(h(shuffled) >= observed - 1e-12))
    return observed, (beyond + 1) / (PERMUTATIONS + 1)


def explain_runs(label: str, results: list[dict[str, Any]], metric: dict[str, Any]) -> dict[str, Any] | None:
    """The cell's runs explained as its iterations are, each run's samples summed (per_run)."""
    return explain_iterations(label, results, metric, rows=per_run(results, metric["name"]))


def explain_iterations(label: str, results: list[dict[str, Any]], metric: dict[str, Any],
                       rows: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:  # fmt: skip
    """The cell's (or a run's) iterations explained, as data (report.spread says it); None with fewer than 3.
    `rows`: other rows to explain in their place (explain_runs')."""
    whole = rows is not None
    rows = flatten(results, metric["name"]) if rows is None else rows
    for i, row in enumerate(rows):
        row["index"] = i
    if len(rows) < 3:
        return None
    runs = len(results)
    v = np.array([r["value"] for r in rows], dtype=float)
    med = float(np.median(v))
    if med == 0:
        return None
    higher = metric.get("better") == "higher"
    short = (med - v) / med if higher else (v - med) / med
    order = np.argsort(-short)
    out: dict[str, Any] = {"cell": label, "method": RUNS_METHOD if whole else METHOD, "over": "runs" if whole else
                           "iterations", "iterations": len(rows),
                           "slowest": [shown(rows[i], runs) for i in order[:SHOWN]],
                           "fastest": [shown(rows[i], runs) for i in order[::-1][:SHOWN]]}  # fmt: skip
    forks = None if whole else _forks(rows, v, runs)
    if forks:
        out["forks"] = forks
    traced = all("intruders" in r for r in rows)
    dev = short - np.median(short)
    mad = scaled_mad(short)
    slow = dev > 3 * mad if mad > 0 and (dev > 3 * mad).any() else short > np.median(short)
    k = int(slow.sum())
    if k == 0:
        return out
    out["slow_where"] = [where(rows[i], runs) for i in np.flatnonzero(slow)]
    out["under"] = float(short[slow].mean() - np.median(short))
    out["unit"] = metric["unit"]
    if not traced:
        return out | {"explained": False, "traced": False}
    dur_ms = np.array([max((r["end_s"] - r["start_s"]) * 1e3, 1e-9) for r in rows])
    x = np.array([_taken_ms(r) for r in rows]) / dur_ms
    sources: dict[str, np.ndarray] = {}
    for i, r in enumerate(rows):
        for name, took in (r.get("intruders") or {}).items():
            sources.setdefault(name, np.zeros(len(rows)))[i] += took
    if any(r.get("steal_ms") for r in rows):
        sources["the host (steal)"] = np.array([float(r.get("steal_ms") or 0.0) for r in rows])
    if sources and k < len(rows):
        name, each = max(sources.items(), key=lambda kv: float(kv[1][slow].mean() - kv[1][~slow].mean()))
        a, b = float(each[slow].mean()), float(each[~slow].mean())
        hit = _hit(each, mad * dur_ms)
        # The source's own iterations, when they are not just the slow ones: a hog in two iterations of which
        # only one stood out by 3 MADs had its other one counted among "the rest".
        # (none of its own, where no iteration had it past the bar: a CI run's hog was spread thin, and the
        # sentence that names them listed nothing and raised)
        own_hits = a - b >= NOTED_MS and hit.size > 0 and set(hit.tolist()) != set(np.flatnonzero(slow).tolist())
        out["source"] = {"name": name, "slow_ms": a, "other_ms": b, "noted": a - b >= NOTED_MS,
                         "hit": [{"where": where(rows[i], runs), "ms": float(each[i])} for i in hit],
                         "hit_said": bool(own_hits)}  # fmt: skip
    own = _own_threads(rows)
    if own is not None and k < len(rows):
        main, others, each = own
        a, b = float(each[slow].mean()), float(each[~slow].mean())
        out["own_threads"] = {"main": main, "others": others, "slow_ms": a, "other_ms": b, "noted": a - b >= NOTED_MS}
    # The model's share: a fixed-time iteration loses the share of its time taken (a slope of 1). The
    # Theil-Sen slope, with Sen's interval, is the data's own check of that slope; with few iterations its
    # interval is wide, so the claim rests on the model's share and a slope whose interval holds 1 or more.
    excess = float((short[slow] - np.median(short)).sum())
    gain = float((x[slow] - np.median(x)).sum())
    share = gain / excess if excess > 0 else None
    interval = None
    fits_model = False
    fit = slope_fit(short, x)  # runs' spread's Theil-Sen, with Sen's interval
    if fit is not None:
        slope, lo, hi = fit
        out["slope"] = {"value": slope, "ci": [lo, hi]}
        fits_model = hi >= 0.5 and lo <= 2.0
        if excess > 0:
            interval = tuple(sorted((lo * gain / excess, hi * gain / excess)))
    out.update({"share": share, "interval": interval, "slow_iterations": k, "traced": True})
    out["explained"] = share is not None and share >= CLAIM and fits_model
    return out


def _hit(each: np.ndarray, noise_ms: np.ndarray) -> np.ndarray:
    """The iterations a source took most in, the most first: those standing more than 3 scaled MADs (and
    NOTED_MS) above its median iteration, and by more than `noise_ms`, the time one scaled MAD of the score
    is of each iteration; with none, none. Less than that could not be told from the score's own spread:
    a hog's 1.2 ms in an iteration beside its 75 ms in two others (its median 0.6 ms) was named with them
    in a CI run."""
    dev = each - float(np.median(each))
    hit = np.flatnonzero((dev > max(3 * scaled_mad(each), NOTED_MS)) & (dev > noise_ms))
    return hit[np.argsort(-each[hit], kind="stable")]


def _where_ran(rows: list[dict[str, Any]], which: np.ndarray) -> str:
    """The CPUs the workload ran on most in these iterations (the trace's account): "1", "2, 3"; "" unknown."""
    total: dict[str, float] = {}
    for i in np.flatnonzero(which):
        for cpu, took in (rows[i].get("cpus") or {}).items():
            total[cpu] = total.get(cpu, 0.0) + took
    if not total:
        return ""
    most = max(total.values())
    return ", ".join(sorted((c for c, t in total.items() if t >= 0.2 * most), key=int))


def _own_threads(rows: list[dict[str, Any]]) -> tuple[str, list[str], np.ndarray] | None:
    """The workload's main thread (the one that ran most over all iterations), the others by time, and
    each iteration's time (ms) in those others: a JVM's JIT compiler and GC beside the benchmark."""
    totals: dict[str, float] = {}
    for r in rows:
        for name, took in (r.get("threads") or {}).items():
            totals[name] = totals.get(name, 0.0) + took
    if len(totals) < 2:
        return None
    main = max(totals, key=lambda n: totals[n])
    others = sorted((n for n in totals if n != main), key=lambda n: -totals[n])
    each = np.array([sum(t for n, t in (r.get("threads") or {}).items() if n != main) for r in rows])
    return main, others, each


def _forks(rows: list[dict[str, Any]], v: np.ndarray, runs: int) -> dict[str, Any] | None:
    """Whether forks differ beyond their iterations' spread, and how the most different one differs."""
    keys = [(r["run"], r.get("fork")) for r in rows]
    if any(f is None for _, f in keys):
        return None
    groups = sorted(set(keys))
    sizes = [keys.count(g) for g in groups]
    if len(groups) < 2 or min(sizes) < 2:
        return None
    labels = np.array([groups.index(g) for g in keys])
    h, p = kruskal_permutation(v, labels)
    medians = [float(np.median(v[labels == i])) for i in range(len(groups))]
    overall = float(np.median(v))
    odd = int(np.argmax([abs(m - overall) for m in medians]))
    mine, rest = labels == odd, labels != odd
    taken = np.array([float(sum((r.get("intruders") or {}).values())) for r in rows])
    steal = np.array([float(r.get("steal_ms") or 0.0) for r in rows])
    name = f"run {groups[odd][0]} fork {groups[odd][1]}" if runs > 1 else f"fork {groups[odd][1]}"
    ran_mine, ran_rest = _where_ran(rows, mine), _where_ran(rows, rest)
    return {"h": h, "p": p, "forks": len(groups), "differ": p < 0.05, "odd": name, "medians": medians,
            "odd_median": medians[odd], "rest_median": float(np.median(v[rest])),
            "intruders_ms": [float(taken[mine].mean()), float(taken[rest].mean())],
            "steal_ms": [float(steal[mine].mean()), float(steal[rest].mean())],
            "ran": [ran_mine, ran_rest]}  # fmt: skip
