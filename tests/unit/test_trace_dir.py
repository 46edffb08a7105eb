"""peers.traces: read_dir over many files, read in processes: the same gaps as one by one, in order,
and a bad file refused with its name and line as when read in turn; a file read as integers (what
`results export` writes) or by loadtxt (the rest) gives the same pairs."""

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


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ("100\t20\n300\t40\n", [[100, 20], [300, 40]]),  # what `results export` writes: read as integers
        ("100\t20\n300\t40", [[100, 20], [300, 40]]),  # no newline at the end
        ("100\t20\r\n300\t40\r\n", [[100, 20], [300, 40]]),
        ("100.5\t20.25\n300\t40\n", [[100.5, 20.25], [300, 40]]),  # decimals: loadtxt
        ("100\t20\n\n300\t40\n", [[100, 20], [300, 40]]),  # a blank line: loadtxt, which passes over it
        ("90071992547409930\t20\n", [[90071992547409930, 20]]),  # past 2**53: the nearest float, as loadtxt
    ],
)
def test_a_file_read_as_integers_or_by_loadtxt_gives_the_same_pairs(
    tmp_path: Path, text: str, pairs: list[list[float]]
) -> None:
    path = tmp_path / "n-rank0-cpu0.trace"
    path.write_text(text)
    gaps = traces.read_one(path, "n", 0, 0)
    assert np.array_equal(np.column_stack([gaps.starts, gaps.durations]), np.array(pairs, dtype=np.float64))
    assert traces._integers(text.encode()) is None or "." not in text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("100\t20\n300 40\n", "line 2 is not start_ns<TAB>duration_ns"),
        ("100\t20\t5\n", "not two columns"),
        ("1_000\t20\n", "line 1 is not start_ns<TAB>duration_ns"),  # int() takes it, loadtxt not
        ("100\t20\n300\t-\n", "line 2 is not start_ns<TAB>duration_ns"),
        ("\u0663\t20\n", "line 1 is not start_ns<TAB>duration_ns"),  # an Arabic-Indic 3
    ],
)
def test_a_file_neither_reader_takes_is_refused_with_why(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "n-rank0-cpu0.trace"
    path.write_text(text)
    with pytest.raises(UsageError, match=why):
        traces.read_one(path, "n", 0, 0)
