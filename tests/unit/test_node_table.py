"""The report's node table, from the facts each fixture node's files give."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from quietcore.facts.fingerprint import collect_facts, fingerprint
from quietcore.facts.snapshot import open_root
from quietcore.report.builder import Builder, numa_nodes
from quietcore.runs.model import SessionRecord
from tests.conftest import ARM_ROOT, GPU_ROOT, KVM_ROOT, XEON_ROOT


def _table(root: Path) -> dict[str, str]:
    with open_root(str(root)) as r:
        facts = collect_facts(r)
    row = SessionRecord(1, "u", "lab", ["lab"], "node", None, None, "2026-11-26T00:00:00", None, "ok", "0.1.0",
                        fingerprint(facts), facts, {}, None)  # fmt: skip
    (grid,) = Builder(sqlite3.connect(":memory:"), Path("/nonexistent")).node(row).grids
    return {fact: str(value) for fact, value in grid.rows}


@pytest.mark.parametrize(("root", "shown"), [(GPU_ROOT, "1 (node 0)"), (KVM_ROOT, "1 (node 0)"),
                                             (XEON_ROOT, "2 (nodes 0-1)"), (ARM_ROOT, "1 (node 0)")],
                         ids=lambda v: v.name.removesuffix(".tar.gz") if isinstance(v, Path) else v)  # fmt: skip
def test_the_node_table_counts_numa_nodes(root: Path, shown: str) -> None:
    """It said "NUMA nodes 0" on the one-node GPU node: the ids, read as a count."""
    assert _table(root)["NUMA nodes"] == shown


@pytest.mark.parametrize(("stored", "shown"), [("0", "1 (node 0)"), ("0-1", "2 (nodes 0-1)"),
                                               ("0,2-3", "3 (nodes 0,2-3)"), ("", "none found"),
                                               ("x", "unreadable ('x')")])  # fmt: skip
def test_numa_nodes_from_the_stored_list(stored: str, shown: str) -> None:
    assert numa_nodes(stored) == shown
