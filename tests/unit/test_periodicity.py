from __future__ import annotations

import numpy as np
import pytest

from quietcore.stats.periodicity import find_periodic

SPAN = 5e9


def train(period: float, phase: float, jitter: float, rng: np.random.Generator) -> np.ndarray:
    starts = np.arange(phase, SPAN, period)
    return starts + rng.normal(0, jitter, len(starts))


def test_tick_among_random_events() -> None:
    rng = np.random.default_rng(1)
    tick = train(4e6, 1.3e6, 2000, rng)
    noise = rng.uniform(0, SPAN, 3000)
    starts = np.concatenate([tick, noise])
    durations = np.concatenate([np.full(len(tick), 3000.0), rng.exponential(5000, 3000)])
    order = np.argsort(starts)
    (source, *_) = find_periodic(starts[order], durations[order], SPAN)
    assert source.frequency_hz == pytest.approx(250, rel=1e-4)
    assert source.events == source.expected == 1250
    assert source.jitter_ns == pytest.approx(2000, rel=0.15)
    assert source.median_duration_ns == 3000
    assert source.frequency_hz == pytest.approx(250.0, rel=1e-3)


def test_two_sources_found_in_turn() -> None:
    rng = np.random.default_rng(2)
    a, b = train(10e6, 3e6, 500, rng), train(4e6, 0.5e6, 500, rng)
    starts = np.concatenate([a, b])
    durations = np.concatenate([np.full(len(a), 200e3), np.full(len(b), 15e3)])
    order = np.argsort(starts)
    found = find_periodic(starts[order], durations[order], SPAN)
    freqs = sorted(round(s.frequency_hz) for s in found[:2])
    assert freqs == [100, 250]
    by_freq = {round(s.frequency_hz): s for s in found}
    assert by_freq[100].median_duration_ns == 200e3 and by_freq[250].median_duration_ns == 15e3


def test_random_events_have_no_period() -> None:
    rng = np.random.default_rng(3)
    starts = np.sort(rng.uniform(0, SPAN, 5000))
    assert find_periodic(starts, np.full(5000, 1000.0), SPAN) == []


def test_degenerate_inputs() -> None:
    # All events inside one period: nothing to fit a line through.
    starts = np.array([1e6 + i * 10 for i in range(50)], dtype=float)
    assert find_periodic(starts, np.full(50, 100.0), SPAN) == []
    assert find_periodic([], [], SPAN) == []
    with pytest.raises(ValueError):
        find_periodic([1.0], [], SPAN)


def test_peak_at_the_top_of_the_searched_band() -> None:
    # A train just under the highest frequency searched puts the peak at the
    # spectrum's last bin: its neighbourhood must not run past the end.
    rng = np.random.default_rng(4)
    starts = train(1e9 / 4999.0, 0.0, 100, rng)
    (found,) = find_periodic(starts, np.full(len(starts), 1000.0), SPAN)
    assert found.frequency_hz == pytest.approx(4999.0, rel=1e-4)
    assert found.events >= 0.99 * len(starts)


def test_dense_random_events_do_not_make_slow_sources() -> None:
    # 850 random events a second: some event is always near any slow grid.
    rng = np.random.default_rng(5)
    starts = np.sort(rng.uniform(0, 2e9, 1700))
    assert find_periodic(starts, rng.exponential(20e3, 1700), 2e9) == []


def test_hinted_tick_hidden_by_long_random_gaps() -> None:
    rng = np.random.default_rng(6)
    tick = train(4e6, 1e6, 3000, rng)
    host = rng.uniform(0, SPAN, 600)
    starts = np.concatenate([tick, host])
    durations = np.concatenate([np.full(len(tick), 17e3), rng.exponential(400e3, 600)])
    order = np.argsort(starts)
    found = find_periodic(starts[order], durations[order], SPAN, hints_hz=(250.0,))
    assert found and found[0].frequency_hz == pytest.approx(250, rel=1e-3) and found[0].coverage > 0.95


def test_expected_periods_count_from_the_phase() -> None:
    # 1250 periods of 4 ms fit in 5 s from a phase of 0.1 ms, 1250 from
    # 3.9 ms; either way every event is one period, coverage exactly 1.
    rng = np.random.default_rng(7)
    for phase in (0.1e6, 3.9e6):
        starts = train(4e6, phase, 300, rng)
        (source,) = find_periodic(starts, np.full(len(starts), 5e3), SPAN)
        assert source.events == source.expected == len(starts) and source.coverage == 1.0
