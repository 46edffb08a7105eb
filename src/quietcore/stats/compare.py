"""Describing a cell's runs and comparing cells against a baseline.

describe: the figures a cell reports (n, mean, sample std, CV, median, MAD,
IQR, min, max, and p95/p99 only when n allows). compare: the ratio of
medians with a seeded bootstrap CI, the Mann-Whitney U test (two-sided;
exact for small samples, Mann & Whitney 1947), and a verdict. holm: the
Holm-Bonferroni step-down adjustment across a table (Holm 1979)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from quietcore.stats.bootstrap import SEED
from quietcore.stats.percentiles import min_samples, quantile
from quietcore.stats.rank import mann_whitney

ALPHA = 0.05
HIGH_CV = 0.10  # a cell varying more than this gets a warning


@dataclass(frozen=True)
class Description:
    n: int
    mean: float
    std: float | None  # sample standard deviation (n-1); None for n < 2
    cv: float | None
    median: float
    mad: float  # median absolute deviation, unscaled
    iqr: float
    min: float
    max: float
    p95: float | None  # None when n is too small for it
    p99: float | None


def describe(values: Sequence[float]) -> Description:
    if not values:
        raise ValueError("describe needs at least one value")
    data = np.asarray(values, dtype=np.float64)
    ordered = sorted(float(v) for v in data)
    n = len(ordered)
    std = float(data.std(ddof=1)) if n > 1 else None
    mean = float(data.mean())
    median = quantile(ordered, 0.5)
    return Description(
        n=n,
        mean=mean,
        std=std,
        cv=std / mean if std is not None and mean else None,
        median=median,
        mad=float(np.median(np.abs(data - median))),
        iqr=quantile(ordered, 0.75) - quantile(ordered, 0.25),
        min=ordered[0],
        max=ordered[-1],
        p95=quantile(ordered, 0.95) if n >= min_samples(0.95) else None,
        p99=quantile(ordered, 0.99) if n >= min_samples(0.99) else None,
    )


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median(candidate) / median(baseline)
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float | None = None
    verdict: str = ""


def ratio_ci(
    baseline: Sequence[float], candidate: Sequence[float], level: float = 0.95, resamples: int = 10_000
) -> tuple[float, float]:
    """Bootstrap CI of the ratio of medians, resampling each group alone."""
    a, b = np.asarray(baseline, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if a.size < 2 or b.size < 2:
        raise ValueError("a ratio interval needs at least two runs in each cell")
    rng = np.random.default_rng(SEED)
    ma = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(mb / ma, [tail, 100 - tail])
    return float(low), float(high)


def compare(baseline: Sequence[float], candidate: Sequence[float]) -> Comparison:
    """Candidate against baseline, for a lower-is-better figure (time)."""
    ratio = float(np.median(candidate) / np.median(baseline))
    low, high = ratio_ci(baseline, candidate)
    p = mann_whitney(candidate, baseline)[1]
    return Comparison(ratio, low, high, p)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _more(ratio: float, what: str) -> str:
    return f"{ratio:.2f}x the {what}" if ratio >= 2 else f"{ratio - 1:.1%} more {what}"


def verdict(c: Comparison, alpha: float = ALPHA, higher: bool = False, unit: str | None = None) -> str:
    """Faster, slower, or no detectable difference: both the adjusted test
    and the ratio's interval must agree before a difference is claimed.
    `higher`: the figure is a throughput (GB/s), not a time; `unit`: the
    figure's own (a benchmark's ops/s), named in place of "throughput" or "time"."""
    p = c.p_adjusted if c.p_adjusted is not None else c.p_value
    above, below = p < alpha and c.ci_low > 1, p < alpha and c.ci_high < 1
    if higher:
        what = unit or "throughput"
        if above:
            return f"faster ({_more(c.ratio, what)})"
        if below:
            return f"slower ({1 - c.ratio:.1%} less {what})"
    else:
        what = unit or "time"
        if below:
            return f"faster ({(1 - c.ratio):.1%} less {what})"
        if above:
            return f"slower ({_more(c.ratio, what)})"
    if c.ci_low > 1 or c.ci_high < 1:  # the interval says a difference, the test does not: 3 runs a cell
        return UNSURE  # cannot reach p < 0.05 by Mann-Whitney whatever they hold
    return "no detectable difference"


#: The verdict where the ratio's interval excludes 1 and the test does not reach alpha.
UNSURE = "unsure: more runs would tell"


def compare_many(pairs: Sequence[tuple[Sequence[float], Sequence[float], bool]],
                 units: Sequence[str | None] = ()) -> list[Comparison]:  # fmt: skip
    """Each (baseline, candidate, higher_is_better), Holm-adjusted across
    all of them, each with its verdict (in its unit, where `units` gives one)."""
    raw = [compare(base, cand) for base, cand, _ in pairs]
    adjusted = holm([c.p_value for c in raw])
    out = []
    for k, (c, p, (_, _, higher)) in enumerate(zip(raw, adjusted, pairs, strict=True)):
        c = replace(c, p_adjusted=p)
        out.append(replace(c, verdict=verdict(c, higher=higher, unit=units[k] if k < len(units) else None)))
    return out


def compare_table(baseline: Sequence[float], cells: dict[str, Sequence[float]]) -> dict[str, Comparison]:
    """Every cell against the baseline, Holm-adjusted across the table."""
    done = compare_many([(baseline, values, False) for values in cells.values()])
    return dict(zip(cells, done, strict=True))


def quick_reps(comparisons: int, floor: int = 6, alpha: float = ALPHA) -> int:
    """The fewest runs per cell (at least `floor`) with which a real
    difference is still claimed after Holm over `comparisons` tests when one
    pair of runs comes out of order. Perfect separation alone is too thin a
    margin on a noisy node."""
    for n in range(floor, 100):
        baseline = [*range(n - 1), n]  # the baseline's largest run beats the candidate's smallest
        candidate = [n - 1, *range(n + 1, 2 * n)]
        p = mann_whitney(candidate, baseline, "exact")[1]
        if p * max(comparisons, 1) < alpha:
            return n
    return 100


def cv_warning(name: str, d: Description) -> str | None:
    if d.cv is not None and d.cv > HIGH_CV:
        return f"{name}: runs vary by {d.cv:.0%}, their CV. More --reps or --warmup, or a quieter node, would help."
    return None


def warnings_for(name: str, d: Description) -> list[str]:
    cv = cv_warning(name, d)
    out = [cv] if cv else []
    if d.p95 is None:
        out.append(f"{name}: {d.n} runs are too few for a p95 (needs {min_samples(0.95)})")
    return out
