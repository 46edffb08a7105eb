from __future__ import annotations

import numpy as np
import pytest

from quietcore.stats.compare import (
    compare,
    compare_many,
    compare_table,
    describe,
    holm,
    quick_reps,
    ratio_ci,
    verdict,
    warnings_for,
)


def test_describe() -> None:
    d = describe([1.0, 2.0, 3.0, 4.0, 10.0])
    assert d.n == 5 and d.mean == 4.0 and d.median == 3.0 and d.min == 1.0 and d.max == 10.0
    assert d.std == pytest.approx(np.std([1, 2, 3, 4, 10], ddof=1))
    assert d.mad == 1.0 and d.iqr == 2.0
    assert d.p95 is None and d.p99 is None  # five values give no p95
    assert describe([float(i) for i in range(100)]).p95 == pytest.approx(94.05)
    with pytest.raises(ValueError):
        describe([])


def test_holm_matches_the_textbook_example() -> None:
    # Holm (1979): sorted p 0.01, 0.02, 0.03, 0.04 with m = 4 -> 0.04, 0.06, 0.06, 0.06
    assert holm([0.04, 0.01, 0.03, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])


def test_clear_difference_gets_a_verdict() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.normal(100, 1, 10))
    slow = list(rng.normal(120, 1, 10))
    c = compare(base, slow)
    assert c.ratio == pytest.approx(1.2, rel=0.02) and c.ci_low > 1 and c.p_value < 0.001
    assert verdict(c).startswith("slower (")


def test_no_difference_is_said_plainly() -> None:
    rng = np.random.default_rng(2)
    a, b = list(rng.normal(100, 5, 8)), list(rng.normal(100, 5, 8))
    table = compare_table(a, {"same": b})
    assert table["same"].verdict == "no detectable difference"
    assert table["same"].ci_low < 1 < table["same"].ci_high


def test_small_samples_cannot_claim_much() -> None:
    # Three runs each: the exact Mann-Whitney test cannot reach 0.05 two-sided, so no difference is claimed;
    # where the interval excludes 1 that is said, not "no detectable difference" beside an interval of 2x
    table = compare_table([1.0, 1.1, 1.2], {"x": [2.0, 2.1, 2.2], "y": [0.5, 0.6, 0.7]})
    assert all(c.verdict == "unsure: more runs would tell" and not c.ci_low <= 1 <= c.ci_high for c in table.values())
    same = compare_table([1.0, 1.1, 1.2], {"z": [1.05, 1.15, 1.0]})["z"]
    assert same.verdict == "no detectable difference" and same.ci_low <= 1 <= same.ci_high
    with pytest.raises(ValueError):
        ratio_ci([1.0], [1.0, 2.0])


def test_warnings() -> None:
    w = warnings_for("cell", describe([1.0, 2.0, 3.0]))
    assert any("vary by" in x for x in w) and any("too few for a p95" in x for x in w)


def test_throughput_verdicts_turn_the_words_round() -> None:
    done = compare_many([([10.0, 10.1, 10.2, 9.9, 10.0, 10.1], [15.0, 15.1, 14.9, 15.2, 15.0, 15.1], True),
                         ([10.0, 10.1, 10.2, 9.9, 10.0, 10.1], [5.0, 5.1, 4.9, 5.2, 5.0, 5.1], True)])  # fmt: skip
    assert done[0].verdict.startswith("faster (") and "more throughput" in done[0].verdict
    assert done[1].verdict.startswith("slower (") and "less throughput" in done[1].verdict


def test_quick_reps_leave_room_for_one_run_out_of_order() -> None:
    assert quick_reps(1) == 6 and quick_reps(8) == 6
    # 20 comparisons (sched): 6 against 6 passes Holm only with perfect separation.
    assert quick_reps(20) == 7


def test_a_source_both_sessions_have_is_said_dearer_not_new() -> None:
    """The GPU node's two noise sessions (idle, busy GPU): its host timer at 1 kHz on every CPU of both
    was "new in B" on seven of twelve CPUs, where it went from 0.6 % of a CPU to 0.91 % on CPU 5; and a 1.5 Hz
    train of 0.00011 % of the CPU was a change beside it."""
    from quietcore.report.noisecompare import _changed, change_words
    from quietcore.runs.reference import CpuNoise, Periodic

    def cpu(*sources: Periodic) -> CpuNoise:
        return CpuNoise(5, 10.0, 0.01, 1500.0, 2e-4, (0.01, 0.01), sources)

    def changed(one: CpuNoise, other: CpuNoise, missing: str, costlier: str) -> list[str]:
        return [change_words(c) for c in _changed(one, other, missing, costlier)]

    tick = Periodic(250.0, 8.1e-6, 0.002, "the scheduler tick")
    a = cpu(tick, Periodic(1000.0, 7.6e-6, 0.0057, None))
    b = cpu(tick, Periodic(1000.0, 11.1e-6, 0.0088, None), Periodic(1.5, 0.685e-6, 1.1e-6, None))
    assert changed(b, a, "new in B", "dearer in B") == [
        "dearer in B: 1 kHz x 11.1 µs, 0.88% of the CPU in B, 0.57% in A"
    ]
    assert changed(a, b, "gone in B", "cheaper in B") == []
    # a source of its own rate, from 10 µs a second, is new; the reverse is gone, or cheaper
    c = cpu(tick, Periodic(1000.0, 7.6e-6, 0.0057, None), Periodic(20.0, 32.6e-6, 6.5e-4, None))
    assert changed(c, a, "new in B", "dearer in B") == ["new in B: 20 Hz x 32.6 µs, 0.065% of the CPU"]
    assert changed(c, b, "gone in B", "cheaper in B") == ["gone in B: 20 Hz x 32.6 µs, 0.065% of the CPU"]
    assert changed(b, c, "gone in B", "cheaper in B") == [
        "cheaper in B: 1 kHz x 11.1 µs, 0.88% of the CPU in A, 0.57% in B"
    ]
    # at a rate A has, but of another length (past four times): a source of its own, new in B
    planted = cpu(tick, Periodic(100.0, 241e-6, 0.025, None))
    host = cpu(tick, Periodic(100.0, 17e-6, 0.004, None))
    assert changed(planted, host, "new in B", "dearer in B") == ["new in B: 100 Hz x 241 µs, 2.5% of the CPU"]


def test_many_cpus_that_differ_alike_are_a_row_each_kind() -> None:
    """Two 384-CPU replays of two templates: every CPU differed, and compare's table was 2,573 lines."""
    import io

    from rich.console import Console

    from quietcore.commands.compare import noise_table

    def row(cpu: int, sources: list[dict[str, object]]) -> dict[str, object]:
        return {"cpu": cpu, "a": 0.02, "b": 0.01 + cpu * 1e-6, "a_lost": 0.021, "b_lost": 0.011 + cpu * 1e-6,
                "a_windows": 300, "b_windows": 300, "a_sessions": 3, "b_sessions": 3, "spread": 0.001,
                "spread_df": 4, "needed": 2,
                "shift": -0.01 + cpu * 1e-6, "ci_low": -0.011, "ci_high": -0.009, "p_adjusted": 1e-40,
                "verdict": "B quieter", "sources": sources, "b_top": None}  # fmt: skip

    def change(what: str, hz: float, label: str, here: float, there: float | None = None) -> dict[str, object]:
        return {"change": what, "hz": hz, "label": label, "here": here, "there": there}

    tick = change("dearer in B", 250.0, "250 Hz x 30.7 µs", 0.0086, 0.0041)
    rows = [row(c, [tick, change("gone in B", 1000.0, f"1 kHz x {18 + c % 3} µs", 0.019)]) for c in range(384)]
    rows[96] = row(96, [tick, change("new in B", 100.0, "100 Hz x 200 µs", 0.02)])
    out = io.StringIO()
    Console(file=out, width=250, color_system=None).print(noise_table(rows))
    said = out.getvalue().splitlines()
    assert len(said) <= 14, said
    grouped = [i for i, line in enumerate(said) if "0-95,97-383" in line]
    assert len(grouped) == 1, said
    cells = "".join(said[grouped[0] : grouped[0] + 2])  # the row, and its second line of changes
    assert "dearer in B: 250 Hz" in cells and "gone in B: 1 kHz" in cells, said
    assert "-1.000% to -0.962%" in cells and "1e-40 at most" in cells, cells
    # A's and B's lost: of the whole run, the figure `noise` gives, not the windows' median the shift is of
    assert "2.100%" in cells and "2.000%" not in cells, cells
    (odd,) = [i for i, line in enumerate(said) if line.split("│")[1:2] and line.split("│")[1].strip() == "96"]
    assert "new in B: 100 Hz x 200 µs, 2% of the CPU" in "".join(said[odd : odd + 3]), said
