"""bench/tracing.py's question "does tracing add a periodic source?": a rate is tracing's only where most traced
runs find it and no untraced run does. One run of each (as it was) called a host's train that came and went
tracing's; a source tracing brings still fails it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_a_train_that_comes_and_goes_either_way_is_not_tracings_and_one_that_comes_with_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    tracings = importlib.import_module("tracing").tracings  # bench/tracing.py (a script: untyped here)
    # This VM's 3 s runs: the tick and the host's 100 Hz always, its second 100 Hz train or a 200 Hz one now
    # and then; a make bench run's single pair once had a 5 Hz train in the traced run alone
    untraced = [[100.0, 100.0, 250.0], [100.0, 250.0], [100.0, 250.0, 250.0]]
    flicker = [[5.0, 100.0, 250.0], [100.0, 100.0, 250.0], [100.0, 200.0, 250.0]]
    assert tracings(untraced, flicker) == []
    assert tracings(untraced[:1], flicker[:1]) == [5.0]  # the one pair alone cannot tell
    # a source tracing brings comes with it each time (or nearly), at its own rate give or take 2 %
    brought = [[5.0, 100.0, 250.0], [5.04, 250.0], [100.0, 250.0]]
    assert tracings(untraced, brought) == [5.0]
    # and not when an untraced run has it too, however often the traced ones do
    assert tracings([*untraced[:2], [4.95, 250.0]], brought) == []
