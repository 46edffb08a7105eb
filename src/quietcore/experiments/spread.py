"""Why the runs of a cell differ: how much of the slow runs' excess time
the intrusions on their CPUs account for, and which covariates move with
the run time.

The method, stated with every result. A run's excess is its time above the
cell's median, and its intruder excess its intruders' time on the cell's
CPUs above the median run's. The Theil-Sen slope of run time on intruder
time (robust to an odd run; 1 when each intruder's microsecond cost the
workload one) turns the slow runs' intruder excess into time; the share is
that over their time excess, and its 95 % interval comes from Sen's
interval of the slope. The covariates are ranked by Spearman's rho with the
run time, Holm-adjusted across them."""

from __future__ import annotations

from typing import Any

import numpy as np

from quietcore.stats.compare import holm
from quietcore.stats.rank import spearman, theil_sen

METHOD = (
    "the Theil-Sen slope of run time on intruder time, with Sen's 95% interval, times the slow runs' "
    "intruder excess, over their time excess"
)
CLAIM = 0.2  # below this lower bound, the intrusions are not said to account for the spread
COVARIATES = {
    "ctxsw_involuntary": "involuntary context switches",
    "ctxsw_voluntary": "voluntary context switches",
    "migrations": "migrations",
    "minor_faults": "minor page faults",
    "major_faults": "major page faults",
    "io_ns": "the workload's own I/O times",
    "steal_ns": "steal time",
    "freq_mhz": "CPU frequency",
}


def _share(t: np.ndarray, x: np.ndarray, slope: float) -> float | None:
    """Over the runs slower than the median: the time their intruder excess
    explains at this slope, over their time excess."""
    mt, mx = np.median(t), np.median(x)
    slow = t > mt
    excess = float((t[slow] - mt).sum())
    return slope * float((x[slow] - mx).sum()) / excess if excess > 0 else None


def slope_fit(t: np.ndarray, x: np.ndarray) -> tuple[float, float, float] | None:
    """Theil-Sen slope of run time on intruder time, with Sen's 95 %
    interval; None when the intruder time does not vary."""
    if np.ptp(x) <= 0:
        return None
    slope, lo, hi = theil_sen(t, x, 0.95)
    if not all(np.isfinite(v) for v in (slope, lo, hi)):
        return None
    return float(slope), float(lo), float(hi)


def _sources(contexts: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Each source's time per run (ns), by name: a competitor started anew
    for each run has a new pid each time. The pid is named when one
    process was the source in every run it appears in."""
    times: dict[str, np.ndarray] = {}
    pids: dict[str, set[int | None]] = {}
    for i, c in enumerate(contexts):
        for s in c["intrusions"].get("sources", []):
            times.setdefault(s["name"], np.zeros(len(contexts)))[i] += s["ns"]
            pids.setdefault(s["name"], set()).add(s.get("pid"))
    out = {}
    for name, ns in times.items():
        (pid,) = pids[name] if len(pids[name]) == 1 else (None,)
        out[f"{name} (pid {pid})" if pid is not None else name] = ns
    return out


def _covariates(t: np.ndarray, contexts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tested: list[tuple[str, float, float]] = []
    for key, label in COVARIATES.items():
        values = [c.get("covariates", {}).get(key) for c in contexts]
        if any(v is None for v in values) or len(set(values)) < 2:
            continue
        rho, p = spearman(t, np.array(values, dtype=float))
        if np.isfinite(rho):
            tested.append((label, float(rho), float(p)))
    adjusted = holm([p for _, _, p in tested])
    return [{"what": label, "rho": rho, "p": p} for (label, rho, _), p in zip(tested, adjusted, strict=True)
            if p < 0.05]  # fmt: skip


def not_measured(contexts: list[dict[str, Any]], virtualized: bool) -> list[str]:
    out = ["the host's preemptions of this vCPU"] if virtualized else []
    if not any("freq_mhz" in c.get("covariates", {}) for c in contexts):
        out.append("the CPU frequency")
    out.append("contention in caches and memory from other CPUs")
    return out


def explain(
    label: str, values: list[float], contexts: list[dict[str, Any]], unit: str, virtualized: bool
) -> dict[str, Any] | None:
    """The cell's spread, explained or not, as data (report.spread says it);
    None when there is nothing to explain (fewer than 3 runs, or no spread)."""
    if len(values) < 3 or len(contexts) != len(values):
        return None
    t = np.array(values, dtype=float)
    if np.median(t) <= 0 or float(t.max() - np.median(t)) <= 0:
        return None
    out: dict[str, Any] = {"cell": label, "method": METHOD}
    covariates = _covariates(t, contexts)
    missing = [c["intrusions"].get("why_not") for c in contexts if "ns" not in c["intrusions"]]
    if missing or unit != "s":
        out["why_not"] = missing[0] if missing else f"the metric is in {unit}, not time"
        out["covariates"] = covariates
        return out
    x = np.array([c["intrusions"]["ns"] / 1e9 for c in contexts])
    fit = slope_fit(t, x)
    share = _share(t, x, fit[0]) if fit else None
    bounds = [b for b in (_share(t, x, fit[1]), _share(t, x, fit[2])) if b is not None] if fit else []
    interval = (min(bounds), max(bounds)) if len(bounds) == 2 else None
    if fit:
        out["slope"] = {"value": fit[0], "ci": [fit[1], fit[2]]}
    slow = t > np.median(t)
    k = int(slow.sum())
    which = [int(i) + 1 for i in np.flatnonzero(slow)]  # the cell's runs, numbered in the order they ran
    excess_ms = float((t[slow] - np.median(t)).mean()) * 1e3
    out.update({"share": share, "interval": interval, "slow_runs": k, "slow": which, "excess_ms": excess_ms,
                "covariates": covariates})  # fmt: skip
    out["not_measured"] = not_measured(contexts, virtualized)
    sources = _sources(contexts)
    if sources and k < len(t):
        name, ns = max(sources.items(), key=lambda kv: float(kv[1][slow].mean() - kv[1][~slow].mean()))
        out["source"] = {"name": name, "slow_ms": float(ns[slow].mean()) / 1e6,
                         "other_ms": float(ns[~slow].mean()) / 1e6}  # fmt: skip
    out["explained"] = share is not None and interval is not None and interval[0] >= CLAIM
    out["claim"] = CLAIM
    return out
