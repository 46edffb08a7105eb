"""The prediction of a coupled program's slowdown from one rank's trace:
the order statistics of the max, and the delay a window of W sees."""

from __future__ import annotations

import numpy as np
import pytest

from quietcore.survey.coupled import delays, expected_max, sizes


def test_expected_max_of_exponential_draws_is_mu_times_the_harmonic_number() -> None:
    """E[max of N exponentials of mean mu] = mu * H_N (H_N = 1 + 1/2 + ... + 1/N),
    from 200,000 seeded draws, within 1 %."""
    samples = np.random.default_rng(7).exponential(10.0, 200_000)
    for n in (1, 2, 8, 64):
        harmonic = sum(1 / k for k in range(1, n + 1))
        assert abs(expected_max(samples, n) / (10.0 * harmonic) - 1) < 0.01, n


def test_a_periodic_source_gives_the_bernoulli_max() -> None:
    """100 Hz x 200 µs over 10 s, windows of 1 ms: a window holds one burst
    with probability p = 1 ms / 10 ms = 0.1, so its delay is 200 µs or 0,
    and E[max of N] = 200 µs * (1 - 0.9^N). The windows are M = 20,000
    random draws, so the estimate of p has a relative standard error of
    sqrt((1 - p) / (p M)) = 2.1 %, and of 1 - (1 - p)^N less: within four
    of them (8.5 %), and the estimate sits on both sides of the truth
    across seeds, never biased."""
    starts = np.arange(0.0, 10e9, 10e6) + 3e6
    durations = np.full(starts.size, 200e3)
    tolerance = 4 * np.sqrt(0.9 / (0.1 * 20_000))
    errors = []
    for seed in range(1, 9):
        samples = delays(starts, durations, 10e9, 1e6, seed=seed)
        assert set(np.unique(samples)) <= {0.0, 200e3}
        for n in (1, 2, 4, 16):
            error = expected_max(samples, n) / (200e3 * (1 - 0.9**n)) - 1
            assert abs(error) < tolerance, (seed, n, error)
        errors.append(expected_max(samples, 1) / 20e3 - 1)
    assert min(errors) < 0 < max(errors), errors


def test_the_sizes_double_up_to_the_job() -> None:
    assert sizes(1) == [1] and sizes(2) == [1, 2] and sizes(6) == [1, 2, 4, 6] and sizes(8) == [1, 2, 4, 8]


def test_a_ranks_time_moves_to_rank_0s_with_the_drift_interpolated() -> None:
    """Offsets of 1000 ns at rank 0's t = 0 and 3000 ns at t = 1 s (2 ppm of
    drift): a rank's time halfway maps with 2000 ns taken off; before and
    after the estimates, the nearest one holds."""
    from quietcore.survey.clock import Offset, to_rank0

    start, end = Offset(0, 1000.0, 10.0, 100), Offset(1_000_000_000, 3000.0, 10.0, 100)
    # (the weight is read from the rank's time less the first offset: 0.5 + 1e-6 here, 0.002 ns off)
    assert to_rank0(500_002_000.0, start, end) == pytest.approx(500_000_000.0, abs=0.01)
    assert to_rank0(-5_000.0, start, end) == -6_000.0 and to_rank0(2e9 + 3000, start, end) == 2e9
    moved = to_rank0(np.array([1000.0, 1_000_003_000.0]), start, end)
    assert moved.tolist() == pytest.approx([0.0, 1e9], abs=0.01)


def test_the_network_fit_recovers_l_o_and_g() -> None:
    """Round trips made from L = 1.2 µs, o_send = 0.4, o_recv = 0.6 and G =
    0.25 ns a byte: half of each is L + o_send + o_recv + (bytes - 1) G, and
    the fit gives the three back (o as their mean), exactly."""
    from quietcore.survey.network import SIZES, fit

    trips = [2 * (1200 + 400 + 600 + (n - 1) * 0.25) for n in SIZES]
    got = fit(list(SIZES), trips, 400.0, 600.0)
    assert got["latency_ns"] == pytest.approx(1200, abs=1e-6) and got["per_byte_ns"] == pytest.approx(0.25)
    assert got["overhead_ns"] == 500 and got["fit_worst_ratio"] < 1e-9
    # overheads larger than the round trip's intercept leave L at 0, never below
    assert fit(list(SIZES), trips, 1500.0, 1500.0)["latency_ns"] == 0
