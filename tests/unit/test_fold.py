"""The fold's C loops (native/fold.c, quietcore.stats.fold) against numpy's,
which stay the reference: the same bits on real runs and on made-up ones,
and the whole search the same with either."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quietcore.stats import fold, periodicity

FIXTURES = Path(__file__).parent.parent / "fixtures" / "noise"
RUNS = ["kvm-timer-and-host-100hz", "kvm-timer-and-host-100hz-stalls", "kvm-timer-sloppy-tick",
        "kvm-timer-three-in-step", "kvm-timer-on-every-other-tick"]  # fmt: skip


def both(call: object, *args: object) -> tuple[object, object]:
    """call(*args) with the C loops, then with numpy's."""
    assert callable(call)
    fold.NATIVE = True
    native = call(*args)
    fold.NATIVE = False
    try:
        return native, call(*args)
    finally:
        fold.NATIVE = True


def test_the_installed_package_has_the_library() -> None:
    """A build that lost it would still analyse, slower, with nothing said: so the suite says it."""
    if not (fold.LIBRARY.parent.parent / "bin" / "quietcore-probe").is_file():
        pytest.skip("run from the source tree (PYTHONPATH=src): nothing is built into it, numpy's loops run")
    assert fold.LIBRARY.is_file(), fold.LIBRARY
    assert fold.available()


def needs_library() -> None:
    """A test of the library's own functions (not of the analysis with or without it) skips where it is not."""
    if not fold.available():
        pytest.skip("no C library here (a run from the source tree): numpy's loops run, and they are the reference")


def equal(a: object, b: object) -> bool:
    """The same bits: arrays of one kind, byte for byte (so -0.0 is not 0.0, and NaN is NaN)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        same_kind = a.dtype.kind == b.dtype.kind and a.dtype.itemsize == b.dtype.itemsize and a.shape == b.shape
        return same_kind and a.tobytes() == b.tobytes()
    return a == b


def loops_agree(starts: np.ndarray, durations: np.ndarray, span: float, period: float, center: float) -> None:
    """Each loop, as _fit calls it, gives numpy's bits."""
    tol = max(2 * periodicity.MIN_BIN_NS, 0.02 * period)
    strength = np.sqrt(durations)
    windows = max(1, round(span / (periodicity.WINDOW_PERIODS * period)))
    w = periodicity._windows(starts, span, windows)
    assert equal(*both(periodicity._windows, starts, span, windows))
    near = both(periodicity._near_line, starts, center, period, tol)
    assert equal(*near)
    assert equal(*both(periodicity._window_phases, starts, strength, period, tol, None))
    local = periodicity._window_phases(starts, strength, period, tol, w)
    assert equal(*both(periodicity._window_phases, starts, strength, period, tol, w))
    assert equal(*both(periodicity._members, starts, period, local, tol, w))


@pytest.mark.parametrize("run", RUNS)
def test_the_loops_give_numpys_bits_on_real_runs(run: str) -> None:
    data = np.load(FIXTURES / f"{run}.npz")
    starts, durations, span = data["start_ns"].astype(float), data["duration_ns"].astype(float), float(data["span_ns"])
    order = np.argsort(starts, kind="stable")
    for hz in (250.0, 100.0, 200.0, 33.3, 1000.0, 4000.0):
        loops_agree(starts[order], durations[order], span, 1e9 / hz, float(starts[order][0]))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    events=st.integers(0, 3000),
    period=st.floats(2e5, 5e8),
    center=st.floats(0, 1e9),
    grid=st.booleans(),
)
def test_the_loops_give_numpys_bits_on_made_up_runs(seed: int, events: int, period: float, center: float,
                                                    grid: bool) -> None:  # fmt: skip
    """Random gaps, and gaps on a coarse grid: ties in distance from the line
    (two gaps as close, the earlier kept) and starts on a phase bin's edge."""
    rng = np.random.default_rng(seed)
    span = 5e9
    starts = np.sort(rng.uniform(0, span, events))
    if grid:
        starts = np.sort(np.round(starts / 1e5) * 1e5)
    loops_agree(starts, rng.exponential(5e3, events), span, period, center)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 40),
    bins=st.integers(periodicity.PHASE_STEPS, 64),
    levels=st.integers(1, 4),
    odd=st.sampled_from([None, np.nan, -0.0, np.inf]),
)
def test_the_densest_stretch_is_numpys_first_largest(seed: int, rows: int, bins: int, levels: int,
                                                     odd: float | None) -> None:  # fmt: skip
    """fold.densest against periodicity._densest_bins: counts of a few levels (many stretches tie, and the
    first is kept), a stretch that wraps past the last bin, and a NaN (argmax stops at the first), an
    infinity or a -0.0 put in at random."""
    needs_library()
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, levels, (rows, bins)).astype(np.float64) * 0.1
    if odd is not None:
        counts[rng.integers(rows), rng.integers(bins)] = odd
    native = fold.densest(counts, periodicity.PHASE_STEPS)
    assert native is not None
    assert equal(native, periodicity._densest_bins(counts))


def test_a_start_on_a_windows_edge_or_the_spans_end_is_in_numpys_window() -> None:
    needs_library()
    span = 3e9
    starts = np.array([0.0, 1e9, np.nextafter(1e9, 0), 2e9, np.nextafter(span, 0), span])  # the last: rounding
    assert equal(*both(periodicity._windows, starts, span, 3))
    got = fold.windows(starts, span, 3)
    assert got is not None and got.tolist() == [0, 1, 0, 2, 2, 2]


def test_no_windows_is_refused_and_a_start_out_of_the_span_has_none() -> None:
    needs_library()
    with pytest.raises(ValueError, match="0 windows"):
        fold.windows(np.array([1.0]), 10.0, 0)
    got = fold.windows(np.array([-5.0, np.nan, 25.0, 5.0]), 10.0, 2)  # no undefined cast: -1, refused after
    assert got is not None and got.tolist() == [-1, -1, 1, 1]
    with pytest.raises(ValueError, match="window"):
        fold.members(np.array([-5.0]), got[:1], np.zeros(2), 10.0, 1.0)
    with pytest.raises(ValueError, match="no number"):  # a phase bin of no number: refused, not cast
        fold.phase_counts(np.array([1.0, np.inf]), np.ones(2), None, 10.0, 4, 1)


def test_a_stretch_longer_than_its_row_is_refused() -> None:
    needs_library()
    with pytest.raises(ValueError, match="stretch of 5 bins in rows of 4"):
        fold.densest(np.zeros((2, 4)), 5)
    best = fold.densest(np.arange(8.0).reshape(2, 4), 4)  # a stretch of the whole row: every start ties
    assert best is not None and best.tolist() == [0, 0]


@pytest.mark.parametrize("run", RUNS[:3])
def test_the_search_finds_the_same_with_either(run: str) -> None:
    data = np.load(FIXTURES / f"{run}.npz")
    starts, durations, span = data["start_ns"], data["duration_ns"], float(data["span_ns"])
    native, reference = both(lambda: periodicity.periodic_members(starts, durations, span, hints_hz=(250.0,)))
    assert isinstance(native, list) and isinstance(reference, list) and native
    assert [s for s, _ in native] == [s for s, _ in reference]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(native, reference, strict=True))


def test_a_window_past_the_phases_is_refused_not_read() -> None:
    needs_library()
    starts = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="window"):
        fold.members(starts, np.array([0, 1, 2]), np.zeros(2), 10.0, 1.0)
    with pytest.raises(ValueError, match="window"):
        fold.phase_counts(starts, np.ones(3), np.array([0, 0, 5]), 10.0, 4, 2)
    with pytest.raises(ValueError, match="length"):
        fold.members(starts, np.array([0, 0]), np.zeros(1), 10.0, 1.0)


def test_no_gaps() -> None:
    needs_library()
    empty = np.empty(0)
    idx, n = fold.near_line(empty, 0.0, 10.0, 1.0) or (None, None)
    assert idx is not None and n is not None and len(idx) == len(n) == 0
    found = fold.members(empty, np.empty(0, dtype=np.int64), np.zeros(1), 10.0, 1.0)
    assert found is not None and len(found[0]) == len(found[1]) == 0
