"""The figure code on small sessions: every figure is produced, labelled,
and has something drawn; data with nothing to draw gives no figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

from quietcore.experiments.analysis import analyse
from quietcore.experiments.model import Cell, Experiment
from quietcore.experiments.runner import Outcome
from quietcore.report import figures
from quietcore.report.account import account
from quietcore.report.render import render
from quietcore.report.tables import LABELS
from quietcore.runs.analysis import NoiseAnalysis
from quietcore.runs.trace import NoiseTrace


def experiment(name: str, cells: list[tuple[str, dict[str, str], list[float]]], unit: str = "ns") -> dict[str, Any]:
    made = [
        Cell(label, "g", factors, "stride", (), 0.1, baseline=i == 0) for i, (label, factors, _) in enumerate(cells)
    ]
    outcomes = [
        Outcome(c, [{"metric": {"name": "ns_per_access", "unit": unit, "value": v, "better": "lower"}} for v in values])
        for c, (_, _, values) in zip(made, cells, strict=True)
    ]
    return analyse(Experiment(name, "t", made, 4, 0), outcomes, virtualized=False)


PREFETCH = experiment("prefetch", [
    ("stride 1", {"stride": "1"}, [1.0, 1.1, 1.05, 0.98]),
    ("stride 8", {"stride": "8"}, [1.8, 1.9, 1.85, 1.7]),
    ("stride 64", {"stride": "64"}, [4.8, 4.9, 5.0, 4.7]),
    ("random", {"stride": "random"}, [11.0, 10.5, 10.8, 11.2]),
])  # fmt: skip

NOISE = NoiseTrace.from_result(
    {
        "threshold": {"ns": 500.0},
        "cpus": [
            {"cpu": 0, "start_ns": 0.0, "measured_ns": 1e8, "events": [[4e6 * k, 17e3] for k in range(25)]},
            {"cpu": 1, "start_ns": 1e3, "measured_ns": 1e8, "events": [[1e7 * k + 5e5, 3e4] for k in range(10)]},
        ],
    }
)
assert NOISE is not None
NOISE_ANALYSIS = NoiseAnalysis.from_json({
    "cpus": [
        {"cpu": 0, "periodic": [{"frequency_hz": 250.0}],
         "attribution": {"lost_ns": 5e5, "unexplained_ns": 1e5,
                         "sources": [{"name": "LOC", "estimate_ns": 4e5, "count": 25, "cost_ns": 16e3, "basis": "m"}]}}
    ]
})  # fmt: skip
ACCOUNT = account(NOISE_ANALYSIS.cpus[0], None, 5e5, 30, 5.1e5)
assert ACCOUNT is not None
LATENCY = {
    "cpus": [{"cpu": 1, "samples": 5000, "p99_ns": 40e3, "max_ns": 90e3,
              "histogram": {"buckets": [[14e3, 15e3, 3000], [20e3, 21e3, 1900], [40e3, 41e3, 99], [90e3, 92e3, 1]]}}]
}  # fmt: skip
CTX = {"analysis": {"switch_pipe": {"median": 2300.0, "ci_low": 2200.0, "ci_high": 2400.0, "n": 5}}}


def drawn(fig: Figure) -> int:
    return sum(len(ax.patches) + len(ax.lines) + len(ax.collections) + len(ax.images) for ax in fig.axes)


@pytest.mark.parametrize(
    "make",
    [
        lambda: figures.experiment_bars(PREFETCH),
        lambda: figures.forest(PREFETCH),
        lambda: figures.stride_curve(PREFETCH),
        lambda: figures.noise_timeline(NOISE),
        lambda: figures.noise_timeline(NOISE, window_ms=20),
        lambda: figures.noise_durations(NOISE),
        lambda: figures.noise_heatmap(NOISE),
        lambda: figures.attribution_bars(NOISE_ANALYSIS, {0: ACCOUNT}),
        lambda: figures.latency_histogram(LATENCY),
        lambda: figures.ctxswitch_bars(CTX, LABELS),
    ],
)
def test_figure_is_drawn_and_labelled(make: Any, tmp_path: Path) -> None:
    fig = make()
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_title()
    assert ax.get_ylabel() or [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert drawn(fig) > 0
    out = render(fig, "x", "caption", tmp_path)
    assert out.svg.startswith("<svg") and (tmp_path / "figures" / "x.png").stat().st_size > 1000


def test_n_is_in_the_titles() -> None:
    title = figures.experiment_bars(PREFETCH).axes[0].get_title()  # type: ignore[union-attr]
    assert "n = 4" in title


def test_numa_and_normalised() -> None:
    cells = [
        ("0/0", {"cpu_node": "0", "mem_node": "0"}, [29.0, 28.5, 29.3, 29.1]),
        ("0/1", {"cpu_node": "0", "mem_node": "1"}, [19.0, 18.5, 19.3, 19.1]),
    ]
    numa = experiment("numa", cells, unit="GB/s")
    fig = figures.numa_matrix(numa, {"0": [10, 21]})
    assert fig is not None and len(fig.axes) >= 2 and fig.axes[0].get_xlabel() == "memory node"
    burn = experiment("smt", [("alone", {}, [1.5, 1.49, 1.51, 1.5]), ("cores", {}, [1.5, 1.52, 1.5, 1.49])])
    for row in burn["rows"]:
        row["metric"]["name"] = "ns_per_iter"
    fig = figures.normalised(burn)
    assert fig is not None and "per-thread speed" in fig.axes[0].get_ylabel()


def test_nothing_to_draw_gives_no_figure() -> None:
    empty = experiment("prefetch", [("stride 1", {"stride": "1"}, [])])
    assert figures.experiment_bars(empty) is None and figures.forest(empty) is None
    assert figures.noise_timeline(NoiseTrace((), 500.0)) is None
    empty_cpu = NoiseTrace.from_result({"threshold": {"ns": 500.0}, "cpus": [{"cpu": 0, "measured_ns": 1e8}]})
    assert empty_cpu is not None and figures.noise_durations(empty_cpu) is None
    assert figures.latency_histogram({"cpus": []}) is None


def test_whole_run_timeline_is_binned_and_shows_the_bad_stretch() -> None:
    """50,000 short gaps, with 2 ms ones only in the middle tenth of the run:
    the timeline draws one image of slices (not a mark per gap), and the
    middle slices are the ones coloured by the long gaps."""
    rng = np.random.default_rng(3)
    starts = np.sort(rng.uniform(0, 1e10, 50_000))
    durations = np.full(starts.size, 20e3)
    middle = (starts > 4.5e9) & (starts < 5.5e9)
    durations[middle & (rng.random(starts.size) < 0.05)] = 2e6
    trace = NoiseTrace.from_result(
        {
            "threshold": {"ns": 500.0},
            "cpus": [
                {
                    "cpu": 3,
                    "start_ns": 0.0,
                    "measured_ns": 1e10,
                    "events": np.column_stack((starts, durations)).tolist(),
                }
            ],
        }
    )
    assert trace is not None
    fig = figures.noise_timeline(trace)
    assert fig is not None
    ax = fig.axes[0]
    assert len(ax.images) == 1 and not ax.collections  # no broken_barh of 50,000 marks
    worst = np.asarray(ax.images[0].get_array())[0]
    slices = figures.SLICES
    inside = worst[int(0.46 * slices) : int(0.54 * slices)]
    outside = np.concatenate([worst[: int(0.4 * slices)], worst[int(0.6 * slices) :]])
    assert inside.max() == pytest.approx(2000.0) and outside.max() == pytest.approx(20.0)
    # A short window with few gaps is still drawn gap by gap.
    window = figures.noise_timeline(trace, window_ms=5)
    assert window is not None and window.axes[0].collections and not window.axes[0].images


def _curves(top: float) -> dict[str, Any]:
    points = [{"ranks": n, "slowdown": s, "ci": [s, s]} for n, s in ((1, 1.02), (100, 1.5), (10_000, top))]
    return {"curves": [{"granularity_us": 10.0, "points": points}], "model": "fast"}


@pytest.mark.parametrize(("top", "shown"), [(7.8, {"2", "3", "5"}), (170.0, set())])
def test_a_log_slowdown_axis_labels_2_3_5_over_a_decade_and_no_minor_tick_over_more(
    top: float, shown: set[str]
) -> None:
    fig = figures.slowdown_curves(_curves(top))
    assert fig is not None
    ax = fig.axes[0]
    fig.canvas.draw()
    low, high = ax.get_ylim()
    minor = {
        t.get_text() for t in ax.yaxis.get_minorticklabels() if t.get_text() and low <= t.get_position()[1] <= high
    }
    assert minor == shown  # 1-200x labelled 100, 90, 80 ... over each other
    assert {"1", "10"} <= {t.get_text() for t in ax.yaxis.get_majorticklabels()}


def test_the_durations_figure_at_64_cpus_draws_without_a_collapsed_layout(tmp_path: Path) -> None:
    """A legend entry a CPU collapsed the axes at 64 CPUs (matplotlib warned on the
    report's stderr): above 8 CPUs each is a thin line, above 32 the CPUs' range
    and median (hundreds of grey lines were a smear and 0.7 MB of SVG at 384);
    all of them one entry. The figures of a row a CPU stay a page tall, every
    16th CPU named at 384."""
    import warnings

    many = NoiseTrace.from_result({"threshold": {"ns": 500.0}, "cpus": [
        {"cpu": c, "start_ns": 0.0, "measured_ns": 1e8, "events": [[4e6 * k + c, 17e3 + c] for k in range(25)]}
        for c in range(64)]})  # fmt: skip
    assert many is not None
    fig = figures.noise_durations(many)
    assert fig is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render(fig, "durations", "caption", tmp_path)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels == ["range over 64 CPUs", "median CPU", "all 64 CPUs (n = 1600)"]
    node = NoiseTrace.from_result({"threshold": {"ns": 500.0}, "cpus": [
        {"cpu": c, "start_ns": 0.0, "measured_ns": 1e8, "events": [[4e6 * k + c, 17e3 + c] for k in range(5)]}
        for c in range(384)]})  # fmt: skip
    assert node is not None
    for drawn in (figures.noise_heatmap(node), figures.noise_timeline(node)):
        assert drawn is not None and drawn.get_size_inches()[1] <= figures.ROWS_HEIGHT_MAX
        named = [t.get_text() for t in drawn.axes[0].get_yticklabels()]
        assert named == [str(c) for c in range(0, 384, 16)]
    # the sockets as bands, where the run kept them: 2 x 96 x 2, siblings numbered after every core
    where = {"package": {str(c): c % 192 // 96 for c in range(384)}}
    banded = figures.noise_heatmap(node, where=where)
    assert banded is not None
    said = [t.get_text() for t in banded.axes[0].texts]
    assert said == ["socket 0", "socket 1", "socket 0", "socket 1"] and len(banded.axes[0].lines) == 3


def test_slices_by_searching_their_edges_are_numpys() -> None:
    """The heatmap's sums and the timeline's maxima, found by searching each
    slice's edges among ascending starts, are what np.histogram and a search
    of each start among the edges give: starts before, on and past the
    edges, ties, none at all, and starts out of order (numpy's way then)."""
    rng = np.random.default_rng(3)
    edges = np.linspace(0, 3e9, 101)
    for trial in range(300):
        n = int(rng.integers(0, 2000))
        start = np.sort(rng.uniform(-5e6, 3.1e9, n))
        if trial % 3 == 0:
            start = np.round(start, -7)  # ties, and starts on the edges
        if trial % 7 == 0:
            start = rng.permutation(start)
        weight = rng.exponential(5e3, n)
        assert np.allclose(figures.slice_sums(start, weight, edges),
                           np.histogram(start, bins=edges, weights=weight)[0], rtol=1e-12, atol=1e-6)  # fmt: skip
        inside = (start >= 0) & (start < 3e9)
        at, value = start[inside], weight[inside]
        expected = np.zeros(100)
        np.maximum.at(expected, np.clip(np.searchsorted(edges, at, side="right") - 1, 0, 99), value)
        assert np.array_equal(figures.slice_max(at, value, edges), expected)


def test_attribution_past_32_cpus_is_a_filled_outline_a_source_stacked_as_the_bars_were() -> None:
    """At 384 CPUs some ten layers of a bar a CPU were 3,800 patches (0.9 s of a report's CPU); past
    LABELS_MAX CPUs a layer is one outline over the CPUs, its top each CPU's sum of the layers so far."""
    from matplotlib.patches import StepPatch

    loc = {"name": "LOC", "estimate_ns": 4e5, "count": 25, "cost_ns": 16e3, "basis": "m"}
    cpu = {"periodic": [{"frequency_hz": 250.0}], "attribution": {"lost_ns": 5e5, "unexplained_ns": 1e5,
                                                                  "sources": [loc]}}  # fmt: skip
    many = NoiseAnalysis.from_json({"cpus": [{**cpu, "cpu": n} for n in range(64)]})  # fmt: skip
    one = ACCOUNT
    assert one is not None
    fig = figures.attribution_bars(many, {n: one for n in range(64)})
    assert fig is not None
    patches = fig.axes[0].patches
    layers = [p for p in patches if isinstance(p, StepPatch)]
    assert layers and len(layers) == len(patches) <= 10
    values, edges, _ = layers[-1].get_data()
    assert len(values) == 64
    assert list(values) == pytest.approx([one.lost_ns / 1e6] * 64)
    assert edges[0] == -0.5 and edges[-1] == 63.5
    few = figures.attribution_bars(NOISE_ANALYSIS, {0: one})
    assert few is not None and not any(isinstance(p, StepPatch) for p in few.axes[0].patches)


def test_cpus_along_x_are_numbers_under_one_axis_label_and_at_most_16() -> None:
    """Side by side beside the legend, "CPU 10CPU 11" ran together at 12 CPUs (the GPU node's) and every
    16th CPU's number past 96 of 384: along x the CPUs are bare numbers, at most X_LABELS_MAX of them."""
    from quietcore.facts.cpulist import ordinal

    loc = {"name": "LOC", "estimate_ns": 4e5, "count": 25, "cost_ns": 16e3, "basis": "m"}
    cpu = {"periodic": [], "attribution": {"lost_ns": 5e5, "unexplained_ns": 1e5, "sources": [loc]}}
    one = ACCOUNT
    assert one is not None
    for n, shown, label in ((12, [str(c) for c in range(12)], "CPU"),
                            (384, [str(c) for c in range(0, 384, 32)], "CPU (every 32nd named)")):  # fmt: skip
        many = NoiseAnalysis.from_json({"cpus": [{**cpu, "cpu": c} for c in range(n)]})
        fig = figures.attribution_bars(many, {c: one for c in range(n)})
        assert fig is not None
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_xticklabels()] == shown and ax.get_xlabel() == label
    assert [ordinal(k) for k in (2, 3, 11, 12, 21, 32, 64, 112)] == ["2nd", "3rd", "11th", "12th", "21st", "32nd",
                                                                     "64th", "112th"]  # fmt: skip
