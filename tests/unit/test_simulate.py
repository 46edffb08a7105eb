"""The simulator against theory and the published orderings. Each test
derives what it expects in its docstring, and fails when the engine is
wrong (a wrong max, a formula per iteration instead of each rank's own
timeline, noise that is not stretched, a collective that does not wait)."""

from __future__ import annotations

import itertools

import numpy as np

from quietcore.simulate.engine import Network, Timeline, finish, max_of_iid, run
from quietcore.survey.coupled import expected_max

FREE = Network(0.0, 0.0)  # no network cost: the noise alone


def periodic(freq_hz: float, length_ns: float) -> Timeline:
    return Timeline(np.array([0.0]), np.array([length_ns]), 1e9 / freq_hz)


def job(timeline: Timeline, ranks: int, work: float, iterations: int, seed: int = 1, common: bool = False,
        network: Network = FREE, collective: str = "allreduce") -> float:  # fmt: skip
    rng = np.random.default_rng(seed)
    offsets = np.full(ranks, 0.37 * timeline.period) if common else rng.uniform(0, timeline.period, ranks)
    return run([timeline], np.zeros(ranks, dtype=np.int64), offsets, work, iterations, collective, network)


def test_work_is_stretched_by_the_gaps_in_it_and_waits_out_one_under_way() -> None:
    """Gaps of 100 at 50 and 400 in a period of 1000. Work of 300 from 0
    ends at 400 (300 + the gap at 50), then the gap at 400 starts exactly
    at its end and does not count; from 420 (inside the second gap) it
    first waits to 500, then runs to 800; from 990 it wraps: 10 to the end,
    gap at 1050 (50 in the next turn) adds 100 -> 1390."""
    tl = Timeline(np.array([50.0, 400.0]), np.array([100.0, 100.0]), 1000.0)
    assert finish(tl, np.array([0.0, 420.0, 990.0]), 300.0).tolist() == [400.0, 800.0, 1390.0]


def test_bernoulli_delays_max_is_d_times_one_minus_q_to_the_n() -> None:
    """A delay d with probability p, else 0: the max of N is d with
    probability 1 - (1 - p)^N, so E[max] = d (1 - (1 - p)^N). 400,000
    direct draws of the max (F^-1(U^(1/N))) agree within 1 %."""
    rng = np.random.default_rng(11)
    samples = np.where(np.arange(100_000) < 1_000, 200.0, 0.0)  # p = 0.01, d = 200
    for n in (10, 100, 1_000, 100_000):
        want = 200.0 * (1 - 0.99**n)
        got = max_of_iid(samples, n, 400_000, rng).mean()
        assert abs(got / want - 1) < 0.01, (n, got, want)


def test_exponential_delays_max_is_mu_times_the_harmonic_number() -> None:
    """E[max of N exponentials of mean mu] = mu H_N; and the general
    integral of 1 - F^N (quietcore.survey.coupled.expected_max) on the
    same empirical distribution: within 1 %."""
    rng = np.random.default_rng(5)
    samples = rng.exponential(50.0, 400_000)
    for n in (2, 64, 10_000):
        harmonic = sum(1 / k for k in range(1, n + 1))
        direct = max_of_iid(samples, n, 400_000, rng).mean()
        assert abs(direct / (50.0 * harmonic) - 1) < 0.01, n
        assert abs(expected_max(samples, n) / (50.0 * harmonic) - 1) < 0.01, n


def test_the_explicit_engine_agrees_with_the_direct_max_on_memoryless_noise() -> None:
    """Poisson gaps (rate 2 per 10 µs, 1 µs each) give each rank's quantum
    an i.i.d. delay every iteration (the process is memoryless, so where an
    iteration starts does not matter). With no network cost and a global
    collective, slowdown = 1 + E[max of N delays] / g. The delay of one
    quantum, stretched as the engine stretches it, is drawn at 200,000
    random places of the same timeline; the direct max of N draws and the
    engine's replay of 400 iterations at N = 1,000 agree within 3 %."""
    rng = np.random.default_rng(3)
    period = 1e9
    starts = np.sort(rng.uniform(0, period, 200_000))
    tl = Timeline(starts, np.full(starts.size, 1000.0), period)
    work = 10_000.0
    slowdown = job(tl, 1_000, work, 400, seed=4)
    window = rng.uniform(0, period - 10 * work, 200_000)
    delays = finish(tl, window, work) - window - work
    predicted = 1 + max_of_iid(delays, 1_000, 200_000, rng).mean() / work
    assert abs(slowdown / predicted - 1) < 0.03, (slowdown, predicted)


def test_co_scheduled_noise_does_not_grow_with_the_ranks() -> None:
    """Every rank with the same phase is delayed by the same gaps at the
    same moments: the slowest is any one of them. At N = 100,000 the
    slowdown equals one rank's within 1 % (Beckman et al.)."""
    tl = periodic(100, 250e3)
    one = job(tl, 1, 1e6, 200, common=True)
    many = job(tl, 100_000, 1e6, 200, common=True)
    assert abs(many / one - 1) < 0.01 and one > 1.02


def test_unsynchronised_periodic_noise_grows_then_saturates() -> None:
    """100 Hz x 250 µs, random phase per rank, g = 100 µs. A rank's quantum
    is hit with probability about (g + d) / period = 3.5 %, and then waits
    up to d. So the slowdown never falls as N grows, and once nearly every
    iteration has a hit rank (N = 100,000: 1 - 0.965^N = 1) it saturates
    near 1 + d/g = 3.5 (within 10 %: a hit near the quantum's end costs
    less than d)."""
    tl = periodic(100, 250e3)
    curve = [job(tl, n, 100e3, 300, seed=7) for n in (1, 10, 100, 1_000, 10_000, 100_000)]
    assert all(b >= a * 0.995 for a, b in itertools.pairwise(curve)), curve
    assert abs(curve[-1] / 3.5 - 1) < 0.10, curve


def test_ferreiras_ordering_at_the_same_net_noise() -> None:
    """2.5 % net noise as 10 Hz x 2500 µs, 100 Hz x 250 µs, 1 kHz x 25 µs
    (Ferreira et al., SC08). At N = 1 all cost the same 1.025 (within
    0.5 %). At N = 10,000, for g = 100 µs and 1 ms, the long rare gaps
    cost most: each iteration waits for the worst rank, and a long gap
    hit by any rank stalls all."""
    patterns = [periodic(10, 2500e3), periodic(100, 250e3), periodic(1000, 25e3)]
    for tl in patterns:
        assert abs(job(tl, 1, 1e6, 2_000) / 1.025 - 1) < 0.005
    for work in (100e3, 1e6):
        costs = [job(tl, 10_000, work, 100) for tl in patterns]
        assert costs[0] > costs[1] > costs[2], (work, costs)


def test_a_faster_network_does_not_help_once_noise_dominates() -> None:
    """Hoefler et al. (SC10). An iteration takes about g + E[max delay] + C,
    so a change of the collective's cost C by dC changes the runtime by
    dC / (g + E[max] + C). With 10 Hz x 2.5 ms noise, g = 1 ms and
    N = 10,000, nearly every iteration has a hit rank (1 - 0.965^N = 1), so
    E[max] is about 2.5 ms and noise dominates: a 10x lower L (C from 75.6
    to 12.6 µs over 14 rounds) changes the runtime by under 5 % (about
    1.8 %). Without noise the iteration is g + C, and the runtime changes
    by the collective's share, dC / (g + C), within 1 %."""
    noisy, quiet = periodic(10, 2500e3), Timeline(np.array([]), np.array([]), 1e9)
    slow, fast = Network(5000.0, 200.0), Network(500.0, 200.0)
    work, ranks, iters = 1e6, 10_000, 100

    def runtime(tl: Timeline, net: Network) -> float:
        return job(tl, ranks, work, iters, network=net) * iters * (work + net.rounds(ranks, "allreduce"))

    assert abs(runtime(noisy, fast) / runtime(noisy, slow) - 1) < 0.05
    share = slow.rounds(ranks, "allreduce") - fast.rounds(ranks, "allreduce")
    expected = 1 - share / (work + slow.rounds(ranks, "allreduce"))
    assert abs(runtime(quiet, fast) / runtime(quiet, slow) / expected - 1) < 0.01


def test_a_stencil_waits_only_for_its_neighbours() -> None:
    """The same noise costs a nearest-neighbour stencil less than a global
    collective at N = 10,000: a delay spreads one rank a step, not to all."""
    tl = periodic(100, 250e3)
    assert job(tl, 10_000, 100e3, 200, collective="stencil") < job(tl, 10_000, 100e3, 200)
