"""The lever journal and the levers: on fixture trees in the kernel's format
(no root needed), read and written through a Root; and on this node's own
THP and IRQs (root), which the fixtures put back whatever happens."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from quietcore import knobs
from quietcore.errors import UsageError
from quietcore.experiments.levers import NAMES, in_order
from quietcore.facts.root import Root
from quietcore.levers.irq import IrqAffinityLever
from quietcore.levers.journal import Journal, recover
from quietcore.levers.thp import BASE, ThpLever
from quietcore.store import journal as journal_rows

THP = Path("/") / BASE


@pytest.fixture
def tree(tmp_path: Path) -> Root:
    """A root with THP files as the kernel writes them."""
    base = tmp_path / "node" / BASE
    base.mkdir(parents=True)
    (base / "enabled").write_text("always [madvise] never\n")
    (base / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    return Root(tmp_path / "node")


def _file(root: Root, rel: str) -> str:
    return root.resolve(rel).read_text()


def test_change_is_journaled_before_and_undone_after(conn: sqlite3.Connection, tree: Root) -> None:
    lever = ThpLever("enabled", tree)
    with Journal(conn, None) as journal:
        lever.apply("never", journal)
        assert _file(tree, f"{BASE}/enabled") == "never"
        assert journal_rows.states(conn) == ["temporary"]
    assert _file(tree, f"{BASE}/enabled") == "madvise"  # the old value, exactly
    row = conn.execute("SELECT lever, old_value, new_value, state, lasting FROM journal").fetchone()
    assert tuple(row) == ("thp.enabled", "madvise", "never", "reverted", "temporary")


def test_a_ctrl_c_during_the_undo_waits_until_every_knob_is_back(
    conn: sqlite3.Connection, tree: Root, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT arrives as the undo begins (a probe just ended): both THP
    files are put back before the KeyboardInterrupt ends the command, and
    the journal says so. (Seen in CI: `run thp` interrupted at that moment
    exited with THP still changed.)"""
    import signal

    read = journal_rows.get
    sent: list[int] = []

    def get_and_interrupt(c: sqlite3.Connection, entry: int) -> sqlite3.Row:
        if not sent:
            sent.append(entry)
            os.kill(os.getpid(), signal.SIGINT)
        return read(c, entry)

    monkeypatch.setattr(journal_rows, "get", get_and_interrupt)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # A second thread, as a progress bar's: the kernel may hand it the
    # signal, so a per-thread mask in the main thread would not hold it.
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with pytest.raises(KeyboardInterrupt), Journal(conn, None) as journal:
            ThpLever("enabled", tree).apply("never", journal)
            ThpLever("defrag", tree).apply("always", journal)
    finally:
        stop.set()
        other.join()
        signal.signal(signal.SIGINT, previous)
    assert sent, "the undo never ran"
    assert (_file(tree, f"{BASE}/enabled"), _file(tree, f"{BASE}/defrag")) == ("madvise", "madvise")
    assert journal_rows.states(conn) == ["reverted", "reverted"]


def test_a_kept_change_outlives_its_journal_and_recovery(conn: sqlite3.Connection, tree: Root) -> None:
    with Journal(conn, None, lasting="kept") as journal:
        ThpLever("enabled", tree).apply("always", journal)
    assert _file(tree, f"{BASE}/enabled") == "always"
    assert recover(conn) == []
    assert journal_rows.states(conn) == ["kept"]


def test_plan_is_made_against_the_tree_without_writing(tree: Root) -> None:
    lever = ThpLever("defrag", tree)
    (action,) = lever.plan("never")
    assert (action.kind, action.target, action.value, action.fixes) == ("sysfs", f"/{BASE}/defrag", "never", "mem.thp")
    assert action.text() == f"echo never > /{BASE}/defrag"
    assert lever.plan("madvise") == []  # already so: nothing to do
    assert _file(tree, f"{BASE}/defrag").startswith("always defer")


def test_unknown_value_lists_what_the_kernel_offers(conn: sqlite3.Connection, tree: Root) -> None:
    with pytest.raises(UsageError, match=r"invalid thp.defrag value 'sometimes' \(this kernel offers: always, defer"):
        ThpLever("defrag", tree).apply("sometimes", Journal(conn, None))
    assert conn.execute("SELECT COUNT(*) FROM journal").fetchone()[0] == 0


def test_a_crashed_run_is_reverted_at_the_next_start(conn: sqlite3.Connection, tree: Root, tmp_path: Path) -> None:
    # GIVEN a process that applies a change and dies without undoing it
    pid = os.fork()
    if pid == 0:
        child = journal_rows.open_node()
        assert child is not None
        ThpLever("enabled", tree).apply("always", Journal(child, None))
        os._exit(0)
    os.waitpid(pid, 0)
    assert _file(tree, f"{BASE}/enabled") == "always"
    # WHEN quietcore next starts THEN the change is put back, and said so
    (settled,) = recover(conn)
    line = settled.text
    assert line.startswith(f"put back thp.enabled to 'madvise' (/{BASE}/enabled): pid {pid}")
    assert line.endswith("ended without undoing it") and not settled.failed  # housekeeping: said with --verbose
    assert _file(tree, f"{BASE}/enabled") == "madvise"
    assert journal_rows.states(conn) == ["reverted"]
    assert recover(conn) == []  # nothing left to do


def test_a_live_owner_keeps_its_change(conn: sqlite3.Connection, tree: Root) -> None:
    """recover() leaves the changes of a process that still runs (here, this one)."""
    journal = Journal(conn, None)
    ThpLever("enabled", tree).apply("never", journal)
    assert recover(conn) == [] and _file(tree, f"{BASE}/enabled") == "never"
    journal.undo()
    assert _file(tree, f"{BASE}/enabled") == "madvise"


def _irq_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Root:
    """Three IRQs on CPUs 0-3. IRQ 9 answers a write with EIO, as the kernel
    does for a managed IRQ (a fixture file cannot, and a link to a file that
    does is refused like any link: so its kind's write is made to)."""
    node = tmp_path / "irqnode"
    (node / "proc").mkdir(parents=True)
    (node / "proc" / "interrupts").write_text(
        "           CPU0       CPU1       CPU2       CPU3\n"
        "  9:          1          0          0          0   IO-APIC   9-fasteoi   acpi\n"
        " 24:        100          5          0          0   PCI-MSI 512000-edge      nvme0q0\n"
        " 25:          0          0       4000          0   PCI-MSI 512001-edge      eth0\n"
    )
    for irq in (9, 24, 25):
        d = node / "proc" / "irq" / str(irq)
        d.mkdir(parents=True)
        (d / "smp_affinity_list").write_text("0-3\n")
        (d / "smp_affinity").write_text("f\n")
    kind = knobs.KINDS["irq-affinity"]
    write = kind.write

    def managed(root: Root, target: str, value: str) -> None:
        if target == "/proc/irq/9/smp_affinity":
            raise OSError(errno.EIO, "Input/output error")
        write(root, target, value)

    monkeypatch.setattr(kind, "write", managed)
    return Root(node)


def test_irq_set_moves_each_irq_and_reports_refusals_per_irq(
    conn: sqlite3.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _irq_tree(tmp_path, monkeypatch)
    lever = IrqAffinityLever(root, online=frozenset(range(4)))
    actions = lever.plan("0")
    assert [a.target for a in actions] == [f"/proc/irq/{n}/smp_affinity" for n in (9, 24, 25)]
    assert {a.value for a in actions} == {"1"} and actions[2].note == "eth0"
    with Journal(conn, None) as journal:
        lever.apply("0", journal)
        assert _file(root, "proc/irq/24/smp_affinity") == "1" and _file(root, "proc/irq/25/smp_affinity") == "1"
        assert len(lever.refused) == 1 and lever.refused[0].startswith("IRQ 9 (acpi)")
        assert journal_rows.states(conn) == ["failed", "temporary", "temporary"]
    assert _file(root, "proc/irq/25/smp_affinity") == "f"
    with pytest.raises(UsageError, match=r"invalid irq_affinity value '7' \(valid: CPUs within 0-3\)"):
        lever.plan("7")


def test_registry_order_is_applied_whatever_the_cell_says() -> None:
    assert [name for name, _ in in_order({"preempt": "full", "thp": "never", "governor": "performance"})] == [
        "thp",
        "governor",
        "preempt",
    ]
    assert NAMES[0] == "thp" and NAMES[-1] == "preempt"
