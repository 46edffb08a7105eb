"""The session as the unit of a comparison (stats.sessions, issue 58): its false-alarm rate held to its alpha
on A/A draws, its power on a real shift, and no verdict where no spread of repeated runs is known."""

from __future__ import annotations

import numpy as np
import pytest

from quietcore.stats.sessions import MOST_NEEDED, needed_sessions, session_shift, shown


@pytest.mark.parametrize(("a", "b", "others"), [(1, 1, [4]), (3, 3, []), (2, 2, [3, 3])])
def test_on_a_a_draws_the_false_alarm_rate_is_its_alpha(a: int, b: int, others: list[int]) -> None:
    """Sessions of one configuration whose values differ from session to session (as this VM's median
    windows did, 1.1-1.7 %): "different" in 5 % of the comparisons, within three binomial spreads of 2,000."""
    rng = np.random.default_rng(58)
    said = 0
    for _ in range(2000):
        draw = [rng.normal(0.015, 0.002, n).tolist() for n in (a, b, *others)]
        s = session_shift(draw[0], draw[1], draw[2:])
        said += shown(s, s.p)
    assert 0.035 < said / 2000 < 0.065, said / 2000


def test_a_shift_of_a_planted_source_is_shown_with_three_sessions_a_side() -> None:
    """The planted 2 % against sessions that vary by 0.3 %: shown in nearly every draw, and its 95 % interval
    holds the true shift in 95 % of them."""
    rng = np.random.default_rng(7)
    found = held = 0
    for _ in range(500):
        a, b = rng.normal(0.015, 0.003, 3), rng.normal(0.035, 0.003, 3)
        s = session_shift(a.tolist(), b.tolist())
        assert s.df == 4 and s.spread == pytest.approx(np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2))
        assert s.low is not None and s.high is not None
        found += shown(s, s.p)
        held += s.low < 0.02 < s.high
    assert found / 500 > 0.99 and 0.92 < held / 500 < 0.98, (found, held)


def test_one_session_a_side_and_nothing_else_has_no_spread_and_no_verdict() -> None:
    s = session_shift([0.01], [0.02])
    assert not s.known and s.p is None and s.low is None and not shown(s, s.p) and s.shift == pytest.approx(0.01)
    # two earlier sessions of one configuration are one degree of freedom: still none
    assert not session_shift([0.01], [0.02], [[0.011, 0.012]]).known
    assert session_shift([0.01], [0.02], [[0.011, 0.012, 0.013]]).known


def test_sessions_a_side_a_shift_would_need() -> None:
    assert needed_sessions(0.0, 0.001) is None
    assert needed_sessions(0.01, 0.001) == 2  # ten spreads: two a side is plenty
    assert needed_sessions(0.001, 0.001) == 16  # one spread: 2 x (1.96 + 0.84)^2 = 15.7
    assert needed_sessions(1e-6, 0.001) == MOST_NEEDED + 1


def test_sessions_alike_to_the_last_bit_give_no_verdict() -> None:
    """Replays of one trace gave every session of a CPU the same median window: the spread was 0, and a
    shift of 1e-9 came out "B noisier" at p 0 on a 64-CPU replay. With nothing to weigh it against, no verdict."""
    s = session_shift([0.02, 0.02], [0.02 + 1e-9, 0.02 + 1e-9])
    assert s.known and s.spread == 0 and s.p is None and s.low is None and not shown(s, s.p)
