"""Experiment planning and analysis without running anything: the seeded
order, verdict directions, the custom file's plan, and the levers' parsers
against files laid out as the kernel lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from quietcore.errors import UsageError
from quietcore.experiments.analysis import analyse
from quietcore.experiments.builtin import BUILTIN
from quietcore.experiments.custom import from_cmd
from quietcore.experiments.model import Cell, Experiment
from quietcore.experiments.node import read_node
from quietcore.experiments.runner import Outcome, order
from quietcore.facts.root import Root
from quietcore.levers.governor import GovernorLever
from quietcore.levers.journal import Journal
from quietcore.levers.preempt import parse
from quietcore.store import journal as journal_rows
from tests.conftest import KVM_ROOT, XEON_ROOT


def cell(label: str, group: str = "g", baseline: bool = False) -> Cell:
    return Cell(label, group, {}, "compute", (), 0.1, baseline=baseline)


def test_order_is_seeded_warmups_first_and_complete() -> None:
    exp = Experiment("x", "x", [cell("a", baseline=True), cell("b"), cell("c")], reps=4, warmup=2)
    first, again, other = order(exp, 1), order(exp, 1), order(exp, 2)
    assert first == again and first != other
    assert all(rep < 0 for _, rep in first[:6]) and all(rep >= 0 for _, rep in first[6:])
    assert sorted((c.label, r) for c, r in first) == sorted(
        (c.label, r) for c in exp.cells for r in [*range(4), -1, -2]
    )
    # Interleaved: the measured runs are not grouped cell by cell.
    labels = [c.label for c, _ in first[6:]]
    assert labels != sorted(labels)


def outcome(c: Cell, values: list[float], better: str = "lower") -> Outcome:
    return Outcome(c, [{"metric": {"name": "m", "unit": "s", "value": v, "better": better}} for v in values])


@pytest.mark.parametrize(("better", "word"), [("lower", "slower"), ("higher", "faster")])
def test_verdict_follows_the_metric_direction(better: str, word: str) -> None:
    base, cand = cell("base", baseline=True), cell("cand")
    exp = Experiment("x", "x", [base, cand], reps=8, warmup=0)
    data = analyse(exp, [outcome(base, [1.0 + i / 100 for i in range(8)], better),
                         outcome(cand, [1.5 + i / 100 for i in range(8)], better)], virtualized=True)  # fmt: skip
    row = data["rows"][1]
    assert row["comparison"]["verdict"].startswith(word)
    assert 1.45 < row["comparison"]["ratio"] < 1.55
    assert any("virtual machine" in w for w in data["warnings"])
    assert any("p95 and p99 are not shown" in w for w in data["warnings"])


def test_cells_are_chosen_by_pattern_with_their_groups_baselines() -> None:
    node = read_node(Root(KVM_ROOT))
    exp = BUILTIN["sched"](node, True, 50)
    assert exp.select(["* +load", "warp"]) == ["warp"]
    # Each loaded cell is compared with its workload's unloaded SCHED_OTHER baseline, so that stays.
    io = [c.label for c in exp.cells if c.group == "io"]
    assert io == ["io other", "io other +load", "io fifo +load", "io rr +load"]
    assert all(c.label.endswith("+load") or c.baseline for c in exp.cells) and len(exp.cells) == 16
    assert exp.select(["compute fifo*"]) == [] and [c.label for c in exp.cells] == [
        "compute other", "compute fifo +load"]  # fmt: skip


def test_no_difference_is_said_plainly() -> None:
    base, cand = cell("base", baseline=True), cell("cand")
    exp = Experiment("x", "x", [base, cand], reps=6, warmup=0)
    same = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0]
    data = analyse(exp, [outcome(base, same), outcome(cand, list(reversed(same)))], virtualized=False)
    assert data["rows"][1]["comparison"]["verdict"] == "no detectable difference"


def test_preempt_debugfs_line() -> None:
    assert parse("none voluntary (full) lazy\n") == (["none", "voluntary", "full", "lazy"], "full")


def test_governor_lever_journals_each_cpu(tmp_path: Path) -> None:
    for cpu in (0, 1):
        d = tmp_path / "node" / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text("powersave\n")
        (d / "scaling_available_governors").write_text("performance powersave\n")
    knob = GovernorLever(frozenset({0, 1}), Root(tmp_path / "node"))
    assert knob.available() == (True, "") and knob.choices() == ["performance", "powersave"]
    conn = journal_rows.open_node()
    assert conn is not None
    with Journal(conn, None) as journal:
        knob.apply("performance", journal)
        assert knob.read() == "performance"
        with pytest.raises(UsageError, match="this kernel offers: performance, powersave"):
            knob.apply("ondemand", journal)
    assert knob.read() == "powersave"
    targets = [row[0] for row in conn.execute("SELECT target FROM journal ORDER BY id")]
    assert [t.split("/")[-3] for t in targets] == ["cpu0", "cpu1"]  # one journal entry per CPU, each undone
    assert {row[0] for row in conn.execute("SELECT state FROM journal")} == {"reverted"}


def test_governor_missing_on_a_vm(tmp_path: Path) -> None:
    (tmp_path / "sys" / "devices" / "system" / "cpu" / "cpu0").mkdir(parents=True)
    ok, why = GovernorLever(frozenset({0}), Root(tmp_path)).available()
    assert not ok and "no cpufreq on CPU 0" in why


@pytest.mark.parametrize("root", [KVM_ROOT, XEON_ROOT])
def test_builtin_plans_use_the_topology(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(512)))
    node = read_node(Root(str(root)))
    for name, planner in BUILTIN.items():
        if name == "preempt":
            continue  # reads the live debugfs
        exp = planner(node, True, 50)
        assert exp.cells and sum(c.baseline for c in exp.cells) == len(exp.groups()), name
    smt = BUILTIN["smt"](node, True, 50)
    if node.smt == "on":
        assert any(c.label == "SMT siblings" for c in smt.cells)
    else:
        assert smt.skipped and "no SMT sibling" in smt.skipped[0][1]
    if node.isolated:
        labels = {c.label for c in BUILTIN["tickless"](node, True, 50).cells}
        assert labels - {"unshielded", "shielded"} == {"housekeeping", "isolated"}


def test_custom_cmd_cells_are_the_product_of_factors(monkeypatch: pytest.MonkeyPatch) -> None:
    node = read_node(Root("/"))
    exp = from_cmd("true", ["policy=other,batch", "load=none"], node, reps=3, warmup=0)
    assert [c.label for c in exp.cells] == ["true policy=other", "true policy=batch"]
    assert [c.baseline for c in exp.cells] == [True, False]
    with pytest.raises(UsageError, match=r"invalid --factor 'policy' \(expected NAME=V1,V2"):
        from_cmd("true", ["policy"], node, reps=3, warmup=0)
