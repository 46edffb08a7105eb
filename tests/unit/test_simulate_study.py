"""The simulation study's pure parts: patterns, rank lists, overlapping
gaps made one, the scale limit, the interval over seeds, what is said of
the tick, and one source per kind across a trace's CPUs."""

from __future__ import annotations

import numpy as np
import pytest

from quietcore.errors import UsageError
from quietcore.options import ranks_option
from quietcore.report.kinds.simulate import costliest, models_lines
from quietcore.runs.analysis import TICK, Named, Periodic
from quietcore.simulate.engine import union
from quietcore.simulate.noise import Noise, _Labeller, from_pattern, parse_pattern
from quietcore.simulate.study import scale_limit
from quietcore.stats.student import mean_ci as interval


def test_a_pattern_lists_frequency_and_duration() -> None:
    assert parse_pattern("250:17,100:200") == [(250.0, 17.0), (100.0, 200.0)]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("100:10000", "not less than its period"),
        ("100:20000", "not less than its period"),
        ("100", "valid: FREQ_HZ:DURATION_US"),
        ("0:5", "valid: FREQ_HZ:DURATION_US"),
        ("100:-5", "valid: FREQ_HZ:DURATION_US"),
        ("abc:def", "valid: FREQ_HZ:DURATION_US"),
    ],
)
def test_bad_patterns_say_why(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_pattern(text)


def test_gaps_scaled_past_the_period_are_caught() -> None:
    """A 100 Hz x 2 ms source (20 %) five times as long takes the whole
    period: the work would never end, and the what-if is refused."""
    noise = from_pattern("100:2000", seed=1)
    assert noise.scaled_ok(4.9) and not noise.scaled_ok(5.0)


def test_a_pattern_repeats_after_the_periods_common_multiple() -> None:
    """250 Hz and 100 Hz: 4 ms and 10 ms repeat together every 20 ms, with
    5 and 2 gaps of each; several sources get PHASES timelines."""
    noise = from_pattern("250:17,100:200", seed=3)
    assert {t.period for t in noise.traces} == {20e6}
    assert len(noise.traces) == 8
    t = noise.traces[0]
    assert sorted(np.bincount(t.labels).tolist()) == [2, 5]
    assert noise.fraction() == pytest.approx(5 * 17e3 / 20e6 + 2 * 200e3 / 20e6, rel=0.02)
    assert noise.sources == ("250 Hz x 17 µs", "100 Hz x 200 µs")


def test_ranks_take_k_and_m() -> None:
    assert ranks_option("1k,10k,100k", "--ranks", 10**7) == [1_000, 10_000, 100_000]
    assert ranks_option("2M,5", "--ranks", 10**7) == [5, 2_000_000]
    for bad in ("0", "20M", "1.5k", "x", ""):
        with pytest.raises(UsageError, match="valid: whole numbers of ranks from 1 to 10,000,000"):
            ranks_option(bad, "--ranks", 10**7)


def test_overlapping_gaps_are_one_and_the_last_stops_at_the_next_turn() -> None:
    """Gaps [10, 30), [20, 50), [60, 70) and [95, 120) in a period of 100:
    the first two are [10, 50); the last runs past the end and is cut at
    the next turn's first gap (110)."""
    tl = union(np.array([60.0, 10.0, 20.0, 95.0]), np.array([10.0, 20.0, 30.0, 25.0]), 100.0)
    assert tl.starts.tolist() == [10.0, 60.0, 95.0]
    assert tl.lengths.tolist() == [40.0, 10.0, 15.0]


def test_the_scale_limit_is_interpolated_in_log_n() -> None:
    """1.05 at N = 100 and 1.15 at N = 10,000: 1.10 halfway in log N, at
    N = 1,000."""
    got = scale_limit([(1, 1.01), (100, 1.05), (10_000, 1.15)])
    assert got["bound"] == "about" and got["ranks"] == 1_000
    assert scale_limit([(1, 1.2), (10, 2.0)])["bound"] == "at most"
    assert scale_limit([(1, 1.0), (100, 1.02)]) == {"ranks": 100, "bound": "over", "text": "not reached by N = 100"}
    # past N = 1 when N = 1 had not reached it: 1.028 at N = 1 and 1.3 at N = 10 is N ≈ 2, not "N ≈ 1"
    assert scale_limit([(1, 1.028), (10, 1.3)])["text"] == "N ≈ 2"


def test_the_interval_is_students_t() -> None:
    """Three values 1, 2, 3: mean 2, s = 1, t(0.975, 2) = 4.303, so 2 ±
    4.303 / sqrt(3) = 2 ± 2.484."""
    mean, lo, hi = interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and hi - mean == pytest.approx(2.4843, abs=1e-3) and lo == pytest.approx(2 * mean - hi)
    assert interval([1.5]) == (1.5, 1.5, 1.5)


def test_the_tick_that_costs_nothing_is_said_so_and_why() -> None:
    """The line on the tick says what taking it away buys; when that is
    nothing to three digits, it says so and why, not "2.587 instead of 2.587"."""
    rows = [
        {"granularity_us": 100.0, "source": "the host's stalls of 100 µs or more", "tick": False, "cost": 0.6,
         "slowdown": 1.944, "baseline": 2.587},
        {"granularity_us": 100.0, "source": "the tick at 250 Hz", "tick": True, "cost": 0.0001, "slowdown": 2.5869,
         "baseline": 2.587},
        {"granularity_us": 10.0, "source": "the tick at 250 Hz", "tick": True, "cost": 0.2, "slowdown": 6.2,
         "baseline": 6.461},
    ]  # fmt: skip
    lines = costliest({"focus_ranks": 10_000, "by_source": rows})
    (at_10,) = [line for line in lines if "g = 10 µs:" in line]
    assert "g = 10 µs: 6.200 instead of 6.461." in at_10 and "nohz_full would buy" in at_10
    (at_100,) = [line for line in lines if "g = 100 µs:" in line]
    assert "2.587 either way" in at_100 and "longer gaps than the tick's" in at_100 and "instead of" not in at_100
    top = "At N = 10,000 and g = 100 µs, the costliest source is the host's stalls of 100 µs or more. Without it"
    assert any(line.startswith(top) for line in lines), lines
    # the costliest source whose removal shows no change is not said to cost the most
    flat = [{**r, "cost": 0.0004, "slowdown": 6.4608} if r["granularity_us"] == 10.0 else r for r in rows]
    assert not any("g = 10 µs, " in line and "costliest" in line
                   for line in costliest({"focus_ranks": 10_000, "by_source": flat}))  # fmt: skip


def _tick(hz: float) -> Periodic:
    named = Named(TICK, "the tick", "counters", counter="LOC", rate=hz + 5)  # as each CPU's analysis names it
    return Periodic(frequency_hz=hz, period_ns=1e9 / hz, events=500, expected=500, coverage=1.0, jitter_ns=0.0,
                    median_duration_ns=20e3, lost_ns=1e7, share_of_lost=1.0, named=named)  # fmt: skip


def test_the_tick_of_every_cpu_is_one_source_though_counted_and_found_at_other_rates() -> None:
    labeller = _Labeller(virtual=False)
    span = 2e9
    traces = []
    for cpu, hz in ((0, 250.0), (1, 249.0)):
        starts = np.arange(0.0, span, 1e9 / hz) + 1e5 * cpu
        lengths = np.full(starts.size, 20e3)
        traces.append(labeller.trace(f"CPU {cpu}", starts, lengths, span, [_tick(hz)], (250.0,)))
    # One source, named once: taking the tick away takes it from both CPUs.
    ticks = [i for i, n in enumerate(labeller.names) if "the tick" in n]
    assert len(ticks) == 1, labeller.names
    assert all((t.labels == ticks[0]).all() for t in traces)
    assert labeller.ticks == {ticks[0]}  # known as the tick by its kind, for what nohz_full would buy
    noise = Noise(tuple(traces), tuple(labeller.names), "two CPUs")
    assert all(tl.starts.size == 0 for tl in noise.timelines(without=ticks[0]))


def test_where_the_two_models_differ_is_said_once_with_its_reason() -> None:
    """Three sentences said the same reason, one a g; now the g's each way are one sentence, the reason once."""

    def curve(g: float, r: float, f: float) -> dict[str, object]:
        return {"granularity_us": g, "points": [{"ranks": 10_000, "slowdown": r, "fast": {"slowdown": f}}]}

    study = {"model": "rounds", "curves": [curve(10, 128.3, 99.5), curve(100, 33.4, 26.4), curve(1000, 5.6, 5.5)]}
    over, alike = models_lines(study)
    assert over == (
        "At N = 10,000 the round model's slowdown is over the fast model's: 1.29x at g = 10 µs, "
        "128.300 against 99.500; 1.27x at g = 100 µs, 33.400 against 26.400. A rank inside a burst "
        "delays its partners in every round, which the fast model does not count."
    ), over
    assert alike == "At N = 10,000 the two models agree within 5% at g = 1000 µs."
    assert models_lines({**study, "model": "fast"}) == []
