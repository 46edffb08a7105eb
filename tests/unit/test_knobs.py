"""The knob kinds and the node state they are journaled in: every target a
plan makes passes its kind, and nothing else does; the state directory and
its files are refused whenever another user could have written them; the
journal closes what a reboot or a vanished target ended, never replaying it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from quietcore import knobs, statedir
from quietcore.facts.root import Root
from quietcore.knobs.base import TargetError
from quietcore.levers.journal import recover
from quietcore.levers.thp import BASE
from quietcore.owner import Owner
from quietcore.safe import csv_cell, ident, plain
from quietcore.store import journal as rows
from quietcore.tune.plan import make_plan
from tests.conftest import ALL_ROOTS


@pytest.mark.parametrize("root", ALL_ROOTS, ids=lambda p: p.name)
def test_every_target_a_plan_makes_passes_its_kind(root: Path) -> None:
    plan = make_plan(Root(root), profile="latency", rt_unthrottled=True)
    assert plan.actions, "the fixture plans nothing"
    for action in plan.actions:
        kind = knobs.kind(action.kind)
        assert kind.check(Root(root), action.target) == action.target
        kind.check_value(Root(root), action.target, action.value)


def test_every_target_a_plan_makes_on_this_node_passes_its_kind() -> None:
    live = Root("/")
    for action in make_plan(live, profile="latency").actions:
        knobs.kind(action.kind).check(live, action.target)
        knobs.kind(action.kind).check_value(live, action.target, action.value)


@pytest.mark.parametrize(
    ("kind", "target", "value"),
    [
        ("sysfs", "/sys/power/state", "mem"),
        ("sysfs", "/sys/kernel/mm/transparent_hugepage/enabled/../../../../etc/shadow", "x"),
        ("sysfs", "sys/kernel/mm/transparent_hugepage/enabled", "never"),  # relative
        ("procfs", "/proc/sys/kernel/core_pattern", "|/bin/sh"),
        ("procfs", "/proc/sys/kernel/modprobe", "/tmp/x"),
        ("irq-affinity", "/proc/irq/1/../../sys/kernel/core_pattern", "1"),
        ("irq-affinity", "/proc/irq/default_smp_affinity", "1"),
        ("task-affinity", "1", "0"),  # no start time: any thread that got the id
        ("task-affinity", "12@34", "not a list"),
        ("cpuset-task", "12@34", "/etc 0"),
        ("service-state", "sshd.service", "inactive"),
        ("pm-qos", "/dev/mem", "0"),
        ("pm-qos", "/dev/cpu_dma_latency", "-1; reboot"),
        ("command", "reboot", ""),
    ],
)
def test_targets_outside_a_kinds_patterns_are_refused(kind: str, target: str, value: str) -> None:
    live = Root("/")
    with pytest.raises(TargetError, match="refused"):
        knob = knobs.kind(kind)
        knob.check(live, target)
        knob.check_value(live, target, value)


def test_a_link_at_the_end_of_a_knobs_path_is_never_followed(tmp_path: Path) -> None:
    node = tmp_path / "node"
    (node / BASE).mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_text("kept\n")
    (node / BASE / "enabled").symlink_to(outside)
    kind, target = knobs.kind("sysfs"), f"/{BASE}/enabled"
    with pytest.raises(OSError):
        kind.write(Root(node), target, "never")
    assert kind.read(Root(node), target) is None and outside.read_text() == "kept\n"


def _state(tmp_path: Path, mode: int = 0o755) -> Path:
    path = tmp_path / "st"
    path.mkdir(mode=mode)
    path.chmod(mode)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="makes files of another owner")
@pytest.mark.parametrize("how", ["other owner", "group-writable", "link"])
def test_a_state_directory_another_user_could_write_is_refused(tmp_path: Path, how: str) -> None:
    path = _state(tmp_path, 0o775 if how == "group-writable" else 0o755)
    if how == "other owner":
        os.chown(path, 65534, 65534)
    if how == "link":
        real, path = path, tmp_path / "link"
        path.symlink_to(real)
    with pytest.raises(statedir.StateError, match=f"refusing the state directory {path}"):
        statedir.StateDir.open(path)


def test_a_state_file_with_two_links_or_a_link_is_refused(tmp_path: Path) -> None:
    path = _state(tmp_path)
    (tmp_path / "elsewhere").write_text("")
    os.link(tmp_path / "elsewhere", path / "journal.db")
    (path / "lock-cpu-0").symlink_to(tmp_path / "elsewhere")
    with statedir.StateDir.open(path) as state:
        with pytest.raises(statedir.StateError, match="2 links"):
            state.file_path("journal.db")
        with pytest.raises(OSError):  # O_NOFOLLOW: ELOOP
            state.open_file("lock-cpu-0", os.O_RDONLY)


def test_a_state_directory_under_a_sticky_directory_is_accepted() -> None:
    assert statedir.why_unsafe(Path("/tmp"), 0) is not None  # others may write /tmp itself
    mine = Path(os.environ["QUIETCORE_STATE_DIR"])
    assert statedir.why_unsafe(mine, os.geteuid()) is None


def _entry(conn: sqlite3.Connection, root: Path, target: str, old: str, **extra: object) -> int:
    dead = Owner("host", 999999, "1", "quietcore run thp")
    return rows.add(conn, None, dead, {"lever": "thp", "kind": "sysfs", "root": str(root), "target": target,
                                       "old_value": old, "new_value": "never", "lasting": "temporary",
                                       "state": "temporary", **extra})  # fmt: skip


def test_an_entry_of_an_earlier_boot_is_closed_never_replayed(conn: sqlite3.Connection, tmp_path: Path) -> None:
    (tmp_path / BASE).mkdir(parents=True)
    (tmp_path / BASE / "enabled").write_text("never\n")
    _entry(conn, tmp_path, f"/{BASE}/enabled", "always", boot_id="an-earlier-boot")
    (settled,) = recover(conn)
    assert settled.text.startswith("closed 1 journal entry of an earlier boot") and not settled.failed
    assert rows.states(conn) == ["rebooted"]
    assert (tmp_path / BASE / "enabled").read_text() == "never\n"


def test_an_entry_whose_target_is_gone_is_closed_as_gone(conn: sqlite3.Connection, tmp_path: Path) -> None:
    (tmp_path / "proc" / "irq" / "77").mkdir(parents=True)
    dead = Owner("host", 999999, "1", "quietcore run")
    rows.add(conn, None, dead, {"lever": "irq_affinity", "kind": "irq-affinity", "root": str(tmp_path),
                                "target": "/proc/irq/99/smp_affinity", "old_value": "3", "new_value": "1",
                                "lasting": "temporary", "state": "temporary"})  # fmt: skip
    rows.add(conn, None, dead, {"lever": "shield", "kind": "task-affinity", "root": "/", "target": "4194000@1",
                                "old_value": "0-1", "new_value": "0", "lasting": "temporary",
                                "state": "temporary"})  # fmt: skip
    lines = recover(conn)
    assert len(lines) == 2 and all("is gone: nothing to put back" in s.text and not s.failed for s in lines), lines
    assert rows.states(conn) == ["gone", "gone"]
    assert recover(conn) == []  # never retried


def test_a_root_tree_is_read_within_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "big").write_bytes(b"x" * 2000)
    (tmp_path / "proc" / "out").symlink_to("/etc/hostname")
    (tmp_path / "proc" / "in").symlink_to("big")
    os.mkfifo(tmp_path / "proc" / "fifo")
    monkeypatch.setattr("quietcore.facts.root.MAX_FILE", 1000)
    root = Root(tmp_path)
    assert root.read("proc/big") == (None, "larger than 1,000 bytes: not read")
    assert root.read("proc/out")[0] is None and root.read("proc/fifo")[0] is None
    monkeypatch.setattr("quietcore.facts.root.MAX_FILE", 4000)
    assert root.read_text("proc/in") == "x" * 2000  # a link inside the root is fine


def test_text_from_outside_is_made_safe() -> None:
    assert ident("../../etc/passwd") == "etc-passwd" and ident("") == "x"
    assert csv_cell("=SUM(A1)") == "'=SUM(A1)" and csv_cell("-1.5") == "-1.5" and csv_cell(-3) == -3
    assert csv_cell("@cmd") == "'@cmd" and csv_cell("plain") == "plain"
    assert plain("kworker\x1b]0;owned\x07") == "kworker\\x1b]0;owned\\x07"


def test_the_kinds_a_file_or_a_thread_names_come_from_the_registry() -> None:
    """The file kinds (checked for a missing file before a plan writes) and the
    thread kinds (a thread gone is closed as gone) are read off the registry by
    class, not listed again, so that a new kind is its module and its KINDS line."""
    assert set(knobs.FILE_KINDS) == {"sysfs", "procfs", "irq-affinity"}
    assert set(knobs.THREAD_KINDS) == {"task-affinity", "cpuset-task"}
