"""Every source named once and truly, on real traces (issue 35): the GPU node's
CPUs 4 and 12 (tests/fixtures/README.md), analysed again with today's code."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from quietcore.report import summary
from quietcore.report.sources import label
from quietcore.runs.analysis import OUTSIDE, TICK, named_of
from tests.conftest import CliRunner, screen_table

SESSION5 = Path(__file__).resolve().parents[1] / "fixtures" / "noise" / "gpu-node-h200-session5-cpus4-12.json.gz"


def _analysed_again(cli: CliRunner, tmp_path: Path, fixture: Path) -> dict[str, Any]:
    """The fixture's session imported (session 1) and analysed again with today's code (session 2):
    its first run, as `results export` gives it."""
    exported = tmp_path / "session.json"
    exported.write_bytes(gzip.decompress(fixture.read_bytes()))
    assert cli("results", "import", str(exported)).returncode == 0
    again = cli("results", "analyse", "1")
    assert again.returncode == 0, again.stderr
    run: dict[str, Any] = json.loads(cli("results", "export", "2", "--format", "json").stdout)["runs"][0]
    return run


def test_the_gpu_nodes_sources_each_have_a_name_and_a_basis_and_no_cpu_has_one_twice(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _analysed_again(cli, tmp_path, SESSION5)
    for cpu in run["analysis"]["cpus"]:
        periodic = cpu["periodic"]
        heavy = [p for p in periodic if (p["share_of_lost"] or 0) >= 0.01]
        assert heavy and all(p["named"] for p in heavy), periodic
        said = [(label(named_of(p)), round(p["frequency_hz"])) for p in periodic if p["named"]]
        assert len(said) == len(set(said)), said
        kinds = [(named_of(p).kind, named_of(p).why) for p in heavy]  # type: ignore[union-attr]
        # the tick once, the second train at its rate said not to be it, the host's 1 kHz timer
        assert [k for k, _ in kinds].count(TICK) == 1, kinds
        assert (OUTSIDE, "tick-rate") in kinds and (OUTSIDE, "faster") in kinds, kinds
    # AND the screen of many CPUs (its two CPUs said as a node of more than DETAIL_UP_TO: the child `cli` forks
    # from here) ends its one account in a sentence that joins the rest to the host's trains said above it,
    # both figures from the run's own numbers
    monkeypatch.setattr(summary, "DETAIL_UP_TO", 1)
    cpus = run["analysis"]["cpus"]
    lost = sum(c["attribution"]["lost_ns"] for c in cpus)
    rest = sum(c["attribution"]["unexplained_ns"] for c in cpus) / lost
    outside = sum(p["lost_ns"] for c in cpus for p in c["periodic"]
                  if getattr(named_of(p), "kind", None) == OUTSIDE)  # fmt: skip
    shown = " ".join(cli("results", "show", "2").stdout.split())  # its sentences, whatever the width wrapped
    assert (f"CPUs 4,12: {rest:.0%} of the lost time is not explained by the kernel's counters. The host's periodic "
            f"trains above are {outside / lost:.0%} of the lost time, within those {rest:.0%}.") in shown, \
        shown  # fmt: skip
    assert outside / lost > 0.5  # the host's trains, most of the node's noise


SESSION8 = SESSION5.parent / "gpu-node-h200-session8-check-cpus0-1.json.gz"


def test_a_tasks_turns_on_the_gpu_nodes_cpu_0_are_named_as_such_not_the_tick(cli: CliRunner, tmp_path: Path) -> None:
    """The GPU node's `check` (session 8, its first run, CPUs 0 and 1): on CPU 0 a task took its turns
    beside the probe, 250 Hz x 4 ms, the probe preempted 65 times; it was named the scheduler tick
    because LOC ran at 250/s. Analysed again: another task's time slices, and CPU 1's tick the tick."""
    run = _analysed_again(cli, tmp_path, SESSION8)
    named = {c["cpu"]: {round(p["frequency_hz"]): (p["named"], p["median_duration_ns"]) for p in c["periodic"]}
             for c in run["analysis"]["cpus"]}  # fmt: skip
    turns, length = named[0][250]
    assert turns == {"kind": "turns", "label": "another task's time slices", "by": "counters", "held": 65, "train": 1}
    assert length > 4e6
    assert named[1][250][0]["kind"] == "tick" and named[1][250][0]["counter"] == "LOC" and named[1][250][1] < 20e3
    shown = cli("results", "show", "2")
    (row,) = [r for r in screen_table(shown.stdout, "Periodic sources") if r[:2] == ["0", "250.00"]]
    assert row[2:4] == ["another task's time slices", "the probe preempted 65 times"], row
