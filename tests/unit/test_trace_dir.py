"""peers.traces.read_dir over many files, read in processes: the same gaps as one by one, in order,
and a bad file refused with its name and line as when read in turn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quietcore.errors import UsageError
from quietcore.peers import traces


def _write(where: Path, cpus: int) -> None:
    rng = np.random.default_rng(5)
    for cpu in range(cpus):
        starts = np.cumsum(rng.uniform(1e5, 1e6, 500))
        lines = "".join(f"{s:.0f}\t{d:.0f}\n" for s, d in zip(starts, rng.uniform(1e3, 1e5, 500), strict=True))
        (where / f"n-rank0-cpu{cpu}.trace").write_text(lines)


def test_many_files_read_in_processes_are_those_read_in_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, traces.PARALLEL_FROM + 4)
    spread, span = traces.read_dir(tmp_path, None)
    monkeypatch.setattr(traces, "PARALLEL_FROM", 10**6)
    in_turn, span_again = traces.read_dir(tmp_path, None)
    assert span == span_again and [g.cpu for g in spread] == [g.cpu for g in in_turn]
    for a, b in zip(spread, in_turn, strict=True):
        assert np.array_equal(a.starts, b.starts) and np.array_equal(a.durations, b.durations)


def test_a_bad_file_among_many_is_named_with_its_line(tmp_path: Path) -> None:
    _write(tmp_path, traces.PARALLEL_FROM + 4)
    bad = tmp_path / "n-rank0-cpu13.trace"
    bad.write_text("100\t20\n300\tx\n")
    with pytest.raises(UsageError, match=rf"invalid trace {bad}: line 2 is not start_ns<TAB>duration_ns"):
        traces.read_dir(tmp_path, None)
