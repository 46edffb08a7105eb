"""Figures drawn from stored results, each with axis labels, units and the n
behind it. Every function returns a matplotlib Figure (Agg: no display
needed) or None when the data has nothing to draw; render.py writes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from numpy.typing import NDArray

from quietcore.facts.cpulist import ordinal
from quietcore.report.account import Account
from quietcore.report.experiment import SCALE
from quietcore.runs.analysis import NoiseAnalysis
from quietcore.runs.trace import NoiseTrace

# Colour by verdict: a reader sees the answer before reading a number.
VERDICT_COLOURS = {"faster": "#2a7f3f", "slower": "#b3261e", "no": "#6b6b6b"}
BAR = "#4c72b0"


def _figure(width: float = 7.5, height: float = 3.6) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return fig, fig.add_subplot()


def _verdict_colour(verdict: str | None) -> str:
    return VERDICT_COLOURS.get((verdict or "no").split()[0], VERDICT_COLOURS["no"])


def _whiskers(rows: Sequence[Mapping[str, Any]], factor: float = 1.0) -> list[list[float]]:
    """Error-bar lengths below and above each cell's median, from its 95 % CI."""
    lows, highs = [], []
    for r in rows:
        median = r["stats"]["median"]
        low, high = r.get("median_ci", [median, median])
        lows.append((median - low) * factor)
        highs.append((high - median) * factor)
    return [lows, highs]


def _matrix(ax: Any, grid: np.ndarray, cmap: str, fmt: str, cpu_nodes: list[int], mem_nodes: list[int]) -> Any:
    """A CPU node x memory node heatmap, each cell written out."""
    image = ax.imshow(grid, cmap=cmap, interpolation="nearest")
    for (i, j), v in np.ndenumerate(grid):
        ax.text(j, i, format(v, fmt), ha="center", va="center", color="white", fontsize=8)
    ax.set_xticks(range(len(mem_nodes)), [str(m) for m in mem_nodes])
    ax.set_yticks(range(len(cpu_nodes)), [str(c) for c in cpu_nodes])
    ax.set_xlabel("memory node")
    ax.set_ylabel("CPU node")
    return image


def experiment_bars(analysis: Mapping[str, Any]) -> Figure | None:
    """Median per cell with its 95 % CI as whiskers, every run as a point."""
    rows = [r for r in analysis["rows"] if r.get("stats")]
    if not rows:
        return None
    unit = rows[0]["metric"]["unit"]
    factor, shown = SCALE.get(unit, (1.0, unit))
    fig, ax = _figure(min(11.0, max(6.0, 0.45 * len(rows) + 2)), 4.2)
    x = np.arange(len(rows))
    medians = [r["stats"]["median"] * factor for r in rows]
    colours = ["#9aa7b8" if r["baseline"] else _verdict_colour((r.get("comparison") or {}).get("verdict"))
               for r in rows]  # fmt: skip
    ax.bar(x, medians, color=colours, alpha=0.75, yerr=_whiskers(rows, factor), capsize=3, ecolor="black", linewidth=0)
    rng = np.random.default_rng(0)  # a fixed jitter: the same figure every time
    for i, r in enumerate(rows):
        values = np.asarray(r["values"]) * factor
        ax.scatter(i + rng.uniform(-0.18, 0.18, values.size), values, s=9, color="black", zorder=3)
    ax.set_xticks(x, [r["cell"] for r in rows], rotation=35, ha="right", fontsize=8)
    n = sorted({r["stats"]["n"] for r in rows})
    ax.set_ylabel(f"{rows[0]['metric']['name']} ({shown})")
    ax.set_xlabel("cell (grey: baseline; green faster, red slower, grey no detectable difference)")
    counts = "/".join(map(str, n))
    ax.set_title(f"{analysis['experiment']}: median with 95 % CI, runs as points (n = {counts} per cell)", fontsize=10)
    return fig


def forest(analysis: Mapping[str, Any], against: str = "the group's baseline") -> Figure | None:
    """Each cell's ratio to its baseline with the 95 % CI, on a log axis."""
    rows = [r for r in analysis["rows"] if r.get("comparison")]
    if not rows:
        return None
    fig, ax = _figure(7.5, max(2.2, 0.32 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows, strict=True):
        c = r["comparison"]
        colour = _verdict_colour(c["verdict"])
        ax.plot([c["ci_low"], c["ci_high"]], [yi, yi], color=colour, linewidth=2)
        ax.plot([c["ratio"]], [yi], "o", color=colour)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_yticks(y, [f"{r['cell']}  ({r['comparison']['verdict']})" for r in rows], fontsize=8)
    ax.set_xlabel(f"ratio of medians to {against} (log scale; 1 = same)")
    n = sorted({r["stats"]["n"] for r in rows})
    # Two short lines: the cell labels take half the width, and the title is centred on the axes.
    ax.set_title(f"{analysis['experiment']}: ratio with 95 % bootstrap CI\n"
                 f"Holm-adjusted verdicts (n = {'/'.join(map(str, n))})", fontsize=10)  # fmt: skip
    return fig


#: Gaps drawn one by one in a window; past this a window is drawn binned,
#: like the whole run (a mark per gap would fill every pixel and the file).
MAX_MARKS = 2000
#: Slices of the binned timeline: about one per pixel column of the figure.
SLICES = 700


def noise_timeline(trace: NoiseTrace, window_ms: float | None = None) -> Figure | None:
    """Per CPU, where the run was interrupted. The whole run (or a window
    with more than MAX_MARKS gaps) is drawn binned: SLICES slices, each
    coloured by the longest gap that started in it, so the bad stretches
    stand out and the file stays small. A short window is drawn exactly:
    each gap as a red span at its true width."""
    if not trace.cpus:
        return None
    limits = [(c.span_start_ns / 1e6, min(c.span_end_ns / 1e6, c.span_start_ns / 1e6 + window_ms) if window_ms
               else c.span_end_ns / 1e6) for c in trace.cpus]  # fmt: skip
    shown = [int((c.start_ns / 1e6 <= hi).sum()) for c, (_, hi) in zip(trace.cpus, limits, strict=True)]
    if window_ms is not None and sum(shown) <= MAX_MARKS:
        return _timeline_marks(trace, limits, window_ms, sum(shown))
    return _timeline_binned(trace, limits, window_ms, sum(shown))


def _timeline_marks(trace: NoiseTrace, limits: list[tuple[float, float]], window_ms: float, total: int) -> Figure:
    fig, ax = _figure(7.5, _rows_height(len(trace.cpus), 0.55, 1.6))
    for i, (c, (lo, hi)) in enumerate(zip(trace.cpus, limits, strict=True)):
        ax.broken_barh([(lo, hi - lo)], (i - 0.35, 0.7), color="#d8e6d0")
        inside = c.start_ns / 1e6 <= hi
        if inside.any():
            # True widths, each outlined by a hairline: a gap narrower than a pixel is still seen.
            spans = np.column_stack((c.start_ns[inside] / 1e6, c.duration_ns[inside] / 1e6))
            ax.broken_barh(spans, (i - 0.35, 0.7), facecolor="#b3261e", edgecolor="#b3261e", linewidth=0.15)
    _cpu_labels(ax, [c.cpu for c in trace.cpus])
    ax.set_xlabel("time since the run started (ms)")
    ax.set_title(f"Noise timeline, first {window_ms:g} ms: green available, red interrupted ({total} gaps, each "
                 "drawn)", fontsize=10)  # fmt: skip
    return fig


Floats = NDArray[np.float64]


def slice_max(at: Floats, values: Floats, edges: Floats) -> Floats:
    """The largest value in each slice, edge <= at < next edge (0 where none),
    of points inside the edges. Where they ascend, as the probe writes them,
    each slice's first point is found by searching its edges among the
    points (501 searches), where searching each point among the edges took
    0.64 ms a CPU of 70,000 gaps, half of a 384-CPU report's figures."""
    row = np.zeros(len(edges) - 1)
    if not at.size:
        return row
    if np.all(at[1:] >= at[:-1]):
        bounds = np.searchsorted(at, edges[:-1], side="left")
        full = np.flatnonzero(np.diff(np.r_[bounds, at.size]) > 0)
        row[full] = np.maximum.reduceat(values, bounds[full])
    else:  # ufunc.at: 10 times slower at 70,000 gaps a CPU
        col = np.clip(np.searchsorted(edges, at, side="right") - 1, 0, len(row) - 1)
        np.maximum.at(row, col, values)
    return row


def slice_sums(at: Floats, weights: Floats, edges: Floats) -> Floats:
    """np.histogram(at, edges, weights=weights)[0]: the last slice closed, points
    outside left out. Where the points ascend, by searching the edges among
    them (np.histogram sorted each CPU's 70,000 starts again: 0.65 ms a CPU);
    the sums are in the points' order, so they may differ from numpy's in
    the last bits."""
    if not (at.size and np.all(at[1:] >= at[:-1])):
        return np.histogram(at, bins=edges, weights=weights)[0].astype(np.float64)
    bounds = np.r_[np.searchsorted(at, edges[:-1], side="left"), np.searchsorted(at, edges[-1], side="right")]
    out = np.zeros(len(edges) - 1)
    full = np.flatnonzero(np.diff(bounds) > 0)
    out[full] = np.add.reduceat(weights[: bounds[-1]], bounds[full])  # nothing past the last edge
    return out


def _timeline_binned(
    trace: NoiseTrace, limits: list[tuple[float, float]], window_ms: float | None, total: int
) -> Figure:
    lo = min(a for a, _ in limits)
    hi = max(b for _, b in limits)
    edges = np.linspace(lo, hi, SLICES + 1)
    worst = np.full((len(trace.cpus), SLICES), np.nan)
    for i, c in enumerate(trace.cpus):
        start_ms = c.start_ns / 1e6
        inside = (start_ms >= lo) & (start_ms < hi)
        row = slice_max(start_ms[inside], c.duration_ns[inside] / 1e3, edges)
        worst[i] = np.where(row > 0, row, np.nan)  # no gap: left blank (available)
    fig, ax = _figure(7.5, _rows_height(len(trace.cpus), 0.55, 1.9))
    cmap = matplotlib.colormaps["inferno_r"].with_extremes(bad="#d8e6d0")  # a slice with no gap: available
    finite = worst[np.isfinite(worst)]
    norm = None
    if finite.size:
        norm = matplotlib.colors.LogNorm(vmin=max(float(finite.min()), 0.1), vmax=max(float(finite.max()), 1.0))
    image = ax.imshow(np.ma.masked_invalid(worst), aspect="auto", cmap=cmap, norm=norm, interpolation="nearest",
                      extent=(lo, hi, len(trace.cpus) - 0.5, -0.5))  # fmt: skip
    if finite.size:
        fig.colorbar(image, ax=ax, label="longest gap in the slice (µs, log)")
    _cpu_labels(ax, [c.cpu for c in trace.cpus])
    ax.set_xlabel("time since the run started (ms)")
    what = f"first {window_ms:g} ms" if window_ms else "whole run"
    ax.set_title(f"Noise timeline, {what}, in {SLICES} slices of {(hi - lo) / SLICES:.3g} ms: colour is each slice's "
                 f"longest gap ({total} gaps)", fontsize=9)  # fmt: skip
    return fig


#: Up to this many CPUs a figure gives each its own legend entry.
LEGEND_UP_TO = 8
#: A figure with a row per CPU names at most this many rows and grows no taller than ROWS_HEIGHT_MAX
#: inches: at 384 CPUs a label a row was 170 inches of figure and labels drawn over one another.
LABELS_MAX = 32
ROWS_HEIGHT_MAX = 9.0
#: CPUs named along a figure's x axis at most (their labels side by side).
X_LABELS_MAX = 16


def _rows_height(rows: int, per_row: float, extra: float) -> float:
    return min(per_row * rows + extra, ROWS_HEIGHT_MAX)


def _bands(ax: Any, cpus: Sequence[int], where: Mapping[str, Mapping[str, int]]) -> None:
    """Rows of CPUs in their sockets (or NUMA nodes, where the run kept no socket):
    a line where the rows pass from one to the next, and its name beside each
    stretch, so that a socket or node apart is seen as one (at 384 CPUs, 4
    stretches: SMT siblings are numbered after every core)."""
    for level, word in (("package", "socket"), ("node", "node")):
        of = {int(c): int(g) for c, g in (where.get(level) or {}).items() if str(c).isdigit()}
        groups = [of.get(c) for c in cpus]
        if len(set(groups)) < 2 or None in groups:
            continue
        edges = [i for i in range(1, len(groups)) if groups[i] != groups[i - 1]]
        for i in edges:
            ax.axhline(i - 0.5, color="#1f77b4", linewidth=0.8)
        for lo, hi in zip([0, *edges], [*edges, len(groups)], strict=True):
            ax.text(0.99, (lo + hi - 1) / 2, f"{word} {groups[lo]}", transform=ax.get_yaxis_transform(), fontsize=7,
                    va="center", ha="right", color="#1f77b4",
                    bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 1})  # fmt: skip
        return


def _cpu_labels(ax: Any, cpus: Sequence[int], axis: str = "y") -> None:
    """Tick labels for rows (or bars) of CPUs: every one up to LABELS_MAX, else
    every k-th, at round CPU numbers where the CPUs run in order. Along x, where
    the labels stand side by side beside a legend, bare numbers under a "CPU"
    axis and at most X_LABELS_MAX: "CPU 10CPU 11" ran together at 12 CPUs (the
    GPU node's), and every 16th CPU's number past 96 of 384."""
    across = axis == "x"
    most = X_LABELS_MAX if across else LABELS_MAX
    step = 1 if len(cpus) <= most else int(np.ceil(len(cpus) / most))
    if step > 1:  # a round step (8, 16, 32...) reads as a range of CPUs
        step = 1 << int(np.ceil(np.log2(step)))
    where = [i for i, c in enumerate(cpus) if step == 1 or c % step == 0] or list(range(0, len(cpus), step))
    names = [f"CPU {cpus[i]}" if step == 1 and not across else str(cpus[i]) for i in where]
    (ax.set_xticks if across else ax.set_yticks)(where, names, fontsize=8 if step == 1 else 7)
    if step > 1:
        (ax.set_xlabel if across else ax.set_ylabel)(f"CPU (every {ordinal(step)} named)")
    elif across:
        ax.set_xlabel("CPU")


def noise_durations(trace: NoiseTrace) -> Figure | None:
    """Event durations per CPU, log-spaced bins on log axes."""
    cpus = [c for c in trace.cpus if c.events]
    if not cpus:
        return None
    fig, ax = _figure()
    lo = np.log10(max(min(float(c.duration_ns.min()) for c in cpus) / 1e3, 1e-3))
    hi = np.log10(max(float(c.duration_ns.max()) for c in cpus) / 1e3 * 1.01)
    bins = np.logspace(lo, hi, 40)
    total = sum(c.events for c in cpus)

    def counts(durations_ns: np.ndarray) -> np.ndarray:
        # equal bins of the logarithm: numpy counts those without sorting (log-spaced edges sorted every
        # CPU's gaps, 2.1 s of a 384-CPU report's 6.7)
        found: np.ndarray = np.histogram(np.log10(np.maximum(durations_ns / 1e3, 1e-3)), bins=bins.size - 1,
                                         range=(lo, hi))[0]  # fmt: skip
        return found.astype(np.float64)

    every = np.array([counts(c.duration_ns) for c in cpus])
    if len(cpus) <= LEGEND_UP_TO:
        for c, n in zip(cpus, every, strict=True):
            ax.stairs(n, bins, linewidth=1.5, label=f"CPU {c.cpu} (n = {c.events})")
    elif len(cpus) <= LABELS_MAX:  # a legend entry a CPU collapsed the axes at 64 CPUs: a thin grey line each
        for k, n in enumerate(every):
            ax.stairs(n, bins, linewidth=0.5, color="#999999", label=f"each of {len(cpus)} CPUs" if k == 0 else None)
        ax.stairs(every.sum(axis=0), bins, linewidth=1.5, color="black", label=f"all {len(cpus)} CPUs (n = {total})")
    else:  # hundreds of grey lines are one grey smear (and 0.7 MB of SVG): the CPUs' range, their median
        low, mid, high = np.percentile(every, [0, 50, 100], axis=0)
        ax.stairs(high, bins, baseline=low, fill=True, color="#cccccc", label=f"range over {len(cpus)} CPUs")
        ax.stairs(mid, bins, color="#555555", linewidth=1.0, label="median CPU")
        ax.stairs(every.sum(axis=0), bins, linewidth=1.5, color="black", label=f"all {len(cpus)} CPUs (n = {total})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gap duration (µs, log scale)")
    ax.set_ylabel("gaps (log scale)")
    ax.legend(fontsize=8)
    ax.set_title("Distribution of interruption durations", fontsize=10)
    return fig


def noise_heatmap(trace: NoiseTrace, bins: int = 100,
                  where: Mapping[str, Mapping[str, int]] | None = None) -> Figure | None:  # fmt: skip
    """Lost time per CPU per time slice; with `where` (a run's topology), its sockets
    (or NUMA nodes) as bands."""
    if not trace.cpus:
        return None
    end = trace.span_end_ns
    edges = np.linspace(0, end, bins + 1)
    grid = np.zeros((len(trace.cpus), bins))
    for i, c in enumerate(trace.cpus):
        if c.events:
            grid[i] = slice_sums(c.start_ns, c.duration_ns, edges)
    slice_ms = end / bins / 1e6
    fig, ax = _figure(7.5, _rows_height(len(trace.cpus), 0.45, 1.8))
    image = ax.imshow(grid / 1e3, aspect="auto", cmap="magma_r", interpolation="nearest",
                      extent=(0, end / 1e6, len(trace.cpus) - 0.5, -0.5))  # fmt: skip
    fig.colorbar(image, ax=ax, label=f"lost µs per {slice_ms:.1f} ms slice")
    _cpu_labels(ax, [c.cpu for c in trace.cpus])
    _bands(ax, [c.cpu for c in trace.cpus], where or {})
    ax.set_xlabel("time since the run started (ms)")
    ax.set_title("Lost time by CPU and time", fontsize=10)
    return fig


def attribution_bars(analysis: NoiseAnalysis, accounts: Mapping[int, Account], shown: int = 6) -> Figure | None:
    """Lost time per CPU stacked by source, as each CPU's account has it (the
    table's rows and rest), periodic sources named with their frequency."""
    cpus = [(c, accounts[c.cpu]) for c in analysis.cpus if c.cpu in accounts]
    if not cpus:
        return None
    totals: dict[str, float] = {}
    for _, a in cpus:
        for r in a.rows[:shown]:
            totals[r.name] = totals.get(r.name, 0.0) + r.ns
    # the costliest over all CPUs, in the order first met: at 384 CPUs every CPU's own six made a legend of dozens
    top = set(sorted(totals, key=lambda n: -totals[n])[: max(shown, 8)])
    names = [n for n in totals if n in top]
    rests = list(dict.fromkeys(a.rest.name for _, a in cpus))
    fig, ax = _figure()
    x = np.arange(len(cpus))
    bottom = np.zeros(len(cpus))
    cmap = matplotlib.colormaps["tab10"]
    by_names = [{r.name: r.ns for r in a.rows} for _, a in cpus]
    # Past LABELS_MAX CPUs a layer is one filled outline over the CPUs, not a bar each: at 384 CPUs some ten
    # layers of 384 bars were 3,800 patches, 0.9 s of a report's CPU to build and draw, and a bar is under a
    # pixel wide there (the gaps between bars are not seen)
    edges = np.arange(len(cpus) + 1) - 0.5
    for k, name in enumerate([*names, "other sources", *rests]):
        heights = []
        for (_, a), by_name in zip(cpus, by_names, strict=True):
            if name in rests:
                heights.append(a.rest.ns if a.rest.name == name else 0.0)
            elif name == "other sources":
                heights.append(sum(v for n, v in by_name.items() if n not in names))
            else:
                heights.append(by_name.get(name, 0.0))
        h = np.asarray(heights) / 1e6
        if h.any():
            colour = "#bbbbbb" if name in rests else cmap(k % 10)
            if len(cpus) <= LABELS_MAX:
                ax.bar(x, h, bottom=bottom, label=name, color=colour)
            else:
                ax.stairs(bottom + h, edges, baseline=bottom.copy(), fill=True, label=name, color=colour)
            bottom += h
    if len(cpus) <= LEGEND_UP_TO:
        labels = []
        for c, _ in cpus:
            periodic = ", ".join(f"{p.frequency_hz:.0f} Hz" for p in c.periodic)
            labels.append(f"CPU {c.cpu}" + (f"\nperiodic: {periodic}" if periodic else ""))
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_xlabel("CPU (periodic sources found under each)")
    else:  # a label a bar cannot be read past a few CPUs: thinned, and the sources are in the text
        _cpu_labels(ax, [c.cpu for c, _ in cpus], axis="x")
    ax.set_ylabel("lost time (ms)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Where the lost time went, by source", fontsize=10)
    return fig


def latency_histogram(result: Mapping[str, Any]) -> Figure | None:
    cpus = [c for c in result.get("cpus", []) if (c.get("histogram") or {}).get("buckets")]
    if not cpus:
        return None
    fig, ax = _figure()
    for k, c in enumerate(cpus):
        b = np.asarray(c["histogram"]["buckets"], dtype=np.float64)
        mids = np.sqrt(np.maximum(b[:, 0], 1.0) * b[:, 1]) / 1e3
        line = ax.step(mids, b[:, 2], where="mid", label=f"CPU {c['cpu']} (n = {c['samples']:,})")[0]
        colour = line.get_color()
        if c["samples"] >= 100:
            ax.axvline(c["p99_ns"] / 1e3, color=colour, linestyle="--", linewidth=1)
            ax.annotate(f"p99 {c['p99_ns'] / 1e3:.1f}", (c["p99_ns"] / 1e3, 1), fontsize=7, color=colour,
                        rotation=90, va="bottom")  # fmt: skip
        ax.axvline(c["max_ns"] / 1e3, color=colour, linestyle=":", linewidth=1)
        ax.annotate(f"max {c['max_ns'] / 1e3:.1f}", (c["max_ns"] / 1e3, 1), fontsize=7, color=colour, rotation=90,
                    va="bottom")  # fmt: skip
        del k
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("wake-up latency (µs, log scale); dashed p99, dotted max")
    ax.set_ylabel("wake-ups (log scale)")
    ax.legend(fontsize=8)
    ax.set_title("Wake-up latency", fontsize=10)
    return fig


def ctxswitch_bars(result: Mapping[str, Any], labels: Mapping[str, str]) -> Figure | None:
    analysis = result.get("analysis") or {}
    keys = [k for k in labels if analysis.get(k)]
    if not keys:
        return None
    fig, ax = _figure()
    med = [analysis[k]["median"] for k in keys]
    err = [[m - analysis[k]["ci_low"] for m, k in zip(med, keys, strict=True)],
           [analysis[k]["ci_high"] - m for m, k in zip(med, keys, strict=True)]]  # fmt: skip
    ax.barh(np.arange(len(keys)), med, xerr=err, capsize=3, color=BAR)
    ax.set_yticks(np.arange(len(keys)), [f"{labels[k]} (n = {analysis[k]['n']})" for k in keys], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("ns per operation (median, 95 % CI; log scale)")
    ax.set_title("Context switches and wake-ups", fontsize=10)
    return fig


def stride_curve(analysis: Mapping[str, Any]) -> Figure | None:
    """prefetch: ns per access against the stride, the references as lines."""
    rows = [r for r in analysis["rows"] if r.get("stats")]
    points = [(int(r["factors"]["stride"]), r) for r in rows if r["factors"].get("stride", "").isdigit()]
    if not points:
        return None
    fig, ax = _figure()
    xs = [p for p, _ in points]
    ax.errorbar(xs, [r["stats"]["median"] for _, r in points], yerr=_whiskers([r for _, r in points]), marker="o",
                capsize=3, label="strided")  # fmt: skip
    for r in rows:
        if r["factors"].get("stride") == "random":
            ax.axhline(r["stats"]["median"], color="#b3261e", linestyle="--", label="random reference")
    ax.axhline(points[0][1]["stats"]["median"], color="#2a7f3f", linestyle=":", label="sequential reference")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("stride (8-byte elements, log scale)")
    ax.set_ylabel("ns per access (median, 95 % CI)")
    ax.legend(fontsize=8)
    n = sorted({r["stats"]["n"] for r in rows})
    ax.set_title(f"Equal-work stride sweep (n = {'/'.join(map(str, n))} per point)", fontsize=10)
    return fig


def numa_matrix(analysis: Mapping[str, Any], distances: Mapping[str, Sequence[int]]) -> Figure | None:
    rows = [r for r in analysis["rows"] if r.get("stats") and "cpu_node" in r["factors"]]
    if not rows:
        return None
    cpu_nodes = sorted({int(r["factors"]["cpu_node"]) for r in rows})
    mem_nodes = sorted({int(r["factors"]["mem_node"]) for r in rows})
    grid = np.full((len(cpu_nodes), len(mem_nodes)), np.nan)
    for r in rows:
        grid[cpu_nodes.index(int(r["factors"]["cpu_node"])), mem_nodes.index(int(r["factors"]["mem_node"]))] = r[
            "stats"
        ]["median"]
    fig = Figure(figsize=(7.5, 3.4), dpi=100, layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    image = _matrix(ax, grid, "viridis", ".1f", cpu_nodes, mem_nodes)
    fig.colorbar(image, ax=ax, label="read bandwidth (GB/s, median)")
    ax.set_title("Measured", fontsize=10)
    dist = [list(distances.get(str(c), [])) for c in cpu_nodes]
    if dist and all(len(row) == len(mem_nodes) for row in dist):
        _matrix(ax2, np.asarray(dist, dtype=np.float64), "viridis_r", ".0f", cpu_nodes, mem_nodes)
    else:
        ax2.text(0.5, 0.5, "no SLIT distances", ha="center", va="center")
        ax2.set_xlabel("memory node")
        ax2.set_ylabel("CPU node")
    ax2.set_title("Firmware distances (SLIT)", fontsize=10)
    return fig


def normalised(analysis: Mapping[str, Any]) -> Figure | None:
    """affinity and smt: per-thread speed against the baseline, 1 = as fast."""
    rows = [r for r in analysis["rows"] if r.get("stats")]
    base = next((r for r in rows if r["baseline"]), None)
    if base is None or not rows or rows[0]["metric"]["name"] != "ns_per_iter":
        return None
    fig, ax = _figure()
    speeds = [base["stats"]["median"] / r["stats"]["median"] for r in rows]
    ax.bar(np.arange(len(rows)), speeds, color=BAR)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax.set_xticks(np.arange(len(rows)), [r["cell"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(f"per-thread speed vs {base['cell']} (1 = as fast)")
    ax.set_title(f"{analysis['experiment']}: normalised throughput (n = {base['stats']['n']} per cell)", fontsize=10)
    return fig


def amplification(rows: Sequence[Mapping[str, Any]]) -> Figure | None:
    """A survey's coupled measurement: slowdown against the ranks for each
    work quantum, measured (solid) beside simulate's round model (dashed)
    and fast model (dotted) from one rank's trace and the measured network."""
    if not rows:
        return None
    fig, ax = _figure(6.5, 3.4)
    for i, w in enumerate(sorted({int(r["work_us"]) for r in rows})):
        mine = sorted((r for r in rows if int(r["work_us"]) == w), key=lambda r: int(r["ranks"]))
        ranks = [int(r["ranks"]) for r in mine]
        colour = f"C{i}"
        ax.plot(ranks, [r["slowdown"] for r in mine], "o-", color=colour, label=f"W = {w} µs, measured")
        if all("rounds" in r for r in mine):
            ax.plot(ranks, [r["rounds"] for r in mine], "s--", color=colour, alpha=0.7,
                    label=f"W = {w} µs, round model")  # fmt: skip
            ax.plot(ranks, [r["fast"] for r in mine], "^:", color=colour, alpha=0.7,
                    label=f"W = {w} µs, fast model")  # fmt: skip
        elif all("predicted" in r for r in mine):  # a survey stored before the models
            ax.plot(ranks, [r["predicted"] for r in mine], "s--", color=colour, alpha=0.7,
                    label=f"W = {w} µs, predicted")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("ranks (N)")
    ax.set_ylabel("slowdown (mean / minimum iteration)")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("The cost of noise in a synchronised program: work quantum + Allreduce", fontsize=10)
    return fig


#: Time bins of the survey heatmap: a node's row is its lost time per bin.
NODE_BINS = 200


def node_heatmap(nodes: Sequence[tuple[str, float, float, np.ndarray, np.ndarray]]) -> Figure | None:
    """Nodes x time on rank 0's clock: the share of each time bin lost to
    gaps, per node (aggregated per bin, never one mark per gap). Each node
    is (label, its measurement's start and end on the common clock, its
    gaps' starts on the common clock, their lengths), all in ns."""
    if not nodes:
        return None
    t0 = min(n[1] for n in nodes)
    t1 = max(n[2] for n in nodes)
    if t1 <= t0:
        return None
    edges = np.linspace(t0, t1, NODE_BINS + 1)
    width = edges[1] - edges[0]
    grid = np.full((len(nodes), NODE_BINS), np.nan)
    for row, (_, begin, end, starts, lengths) in enumerate(nodes):
        lost = np.histogram(starts, bins=edges, weights=lengths)[0]
        inside = (edges[1:] > begin) & (edges[:-1] < end)
        grid[row, inside] = 100.0 * lost[inside] / width
    fig, ax = _figure(7.5, max(1.8, 0.3 * len(nodes) + 1.3))
    image = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="magma_r",
                      extent=(0.0, (t1 - t0) / 1e9, len(nodes) - 0.5, -0.5), vmin=0.0)  # fmt: skip
    ax.set_yticks(range(len(nodes)), [n[0] for n in nodes], fontsize=7)
    ax.set_xlabel("seconds on rank 0's clock")
    fig.colorbar(image, ax=ax, label="% of the bin lost")
    ax.set_title(f"Noise per node over time ({width / 1e6:.1f} ms bins)", fontsize=10)
    return fig


def _minor_labels(low: float, high: float) -> FuncFormatter:
    """A log axis's minor ticks labelled 2, 3 and 5 (not 2x10^0) where it
    spans a decade or so, where the decades' own labels are too few; none
    where it spans more, as eight labels a decade would print over each
    other (100, 90, 80 ... at 1-200x)."""
    keep = (2.0, 3.0, 5.0) if high / max(low, 1e-12) <= 10**1.5 else ()

    def label(v: float, _: int) -> str:
        mantissa = v / 10 ** np.floor(np.log10(v)) if v > 0 else 0.0
        return f"{v:g}" if any(abs(mantissa - k) < 1e-6 for k in keep) else ""

    return FuncFormatter(label)


def slowdown_curves(study: Mapping[str, Any]) -> Figure | None:
    """A simulation: slowdown against N for each work quantum, the 95 %
    interval over seeds as a band, the fast model's curve dashed beside the
    round model's, and the 10 % line that sets the scale limit."""
    curves = study.get("curves") or []
    if not curves:
        return None
    fig, ax = _figure(6.5, 3.6)
    rounds = study.get("model") == "rounds"
    for i, c in enumerate(curves):
        ranks = [p["ranks"] for p in c["points"]]
        ax.plot(ranks, [p["slowdown"] for p in c["points"]], "o-", color=f"C{i}",
                label=f"g = {c['granularity_us']:g} µs" + (", round model" if rounds else ""))  # fmt: skip
        ax.fill_between(ranks, [p["ci"][0] for p in c["points"]], [p["ci"][1] for p in c["points"]],
                        color=f"C{i}", alpha=0.2, linewidth=0)  # fmt: skip
        if rounds:
            ax.plot(ranks, [p["fast"]["slowdown"] for p in c["points"]], "s--", color=f"C{i}", alpha=0.6,
                    label=f"g = {c['granularity_us']:g} µs, fast model")  # fmt: skip
    ax.axhline(1.10, color="#b3261e", linewidth=0.8, linestyle="--", label="noise costs 10 %")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    if max(p["slowdown"] for c in curves for p in c["points"]) > 3:
        ax.set_yscale("log")  # from 1.01 to 100x: the 10 % line stays readable
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(_minor_labels(*ax.get_ylim()))
    ax.set_xlabel("ranks (N)")
    ax.set_ylabel("slowdown (runtime / noiseless)")
    ax.legend(fontsize=7)
    ax.set_title("Simulated bulk-synchronous job: slowdown against the ranks", fontsize=10)
    return fig
