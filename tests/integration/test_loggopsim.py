"""The round model against LogGOPSim (tests/fixtures/loggopsim/points.json,
made by bench/loggopsim.py with LogGOPSim built from its repository at the
revision the file names): at every committed point the round model's mean
slowdown over the bench's seeds is within 15 % of LogGOPSim's over its
runs, and the kernel, replayed here afresh with the first seeds, still
gives what the bench recorded for them (it has not drifted since)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quietcore.simulate.engine import Network, Timeline, union
from quietcore.simulate.native import replay

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "loggopsim"
DATA = json.loads((FIXTURES / "points.json").read_text())
TOLERANCE = 0.15


def _timeline(noise: str) -> Timeline:
    if noise in DATA["patterns"]:
        p = DATA["patterns"][noise]
        return Timeline(np.array([0.0]), np.array([p["duration_ns"]]), 1e9 / p["hz"])
    text = (FIXTURES / DATA["trace"]).read_text()
    pairs = np.array([[float(x) for x in line.split("\t")] for line in text.splitlines() if line.strip()])
    return union(pairs[:, 0], pairs[:, 1], float(pairs[-1, 0] + pairs[-1, 1]))


REPLAYED = 2  # seeds replayed afresh at each point


def _slowdowns(tl: Timeline, ranks: int, work_us: float, network: str, seeds: int) -> list[float]:
    net = DATA["networks_ns"][network]
    job = DATA["job"]
    got = []
    for seed in range(seeds):
        offsets = np.random.default_rng([seed, ranks]).uniform(0, tl.period, ranks)
        loggp = Network(net["L"], net["o"], net["G"], job["bytes"])
        res = replay([tl], np.zeros(ranks, dtype=np.int64), offsets, work_us * 1e3, job["iterations"],
                     network=loggp, algorithm=job["algorithm"])  # fmt: skip
        got.append(float(res["slowdown"]))
    return got


def test_the_points_cover_the_grid_the_issue_asks_for() -> None:
    points = DATA["points"]
    assert len(points) >= 12 and DATA["loggopsim"]["revision"]
    assert {p["ranks"] for p in points} >= {256, 4096} and {p["work_us"] for p in points} == {100, 1000}
    assert {p["noise"] for p in points} >= set(DATA["patterns"]) and {p["network"] for p in points} == {
        "zero", "LogGP defaults"}  # fmt: skip


def _name(p: dict[str, Any]) -> str:
    return f"{p['ranks']}-{p['work_us']}-{p['noise']}-{p['network']}"


@pytest.mark.parametrize("point", DATA["points"], ids=_name)
def test_the_round_model_is_within_15_percent_of_loggopsim(point: dict[str, Any]) -> None:
    tl = _timeline(str(point["noise"]))
    recorded = list(point["quietcore_runs"])
    again = _slowdowns(tl, int(point["ranks"]), float(point["work_us"]), str(point["network"]), REPLAYED)
    assert again == pytest.approx(recorded[:REPLAYED], rel=1e-9), "the kernel no longer gives what the bench recorded"
    ours, lgs = float(np.mean(recorded)), float(np.mean(point["loggopsim_runs"]))
    assert ours == pytest.approx(point["quietcore"]) and lgs == pytest.approx(point["loggopsim"])
    assert abs(ours / lgs - 1) <= TOLERANCE, (_name(point), ours, lgs)
