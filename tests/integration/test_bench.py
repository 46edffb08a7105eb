"""The peer benchmark runs and prints its ratios (short runs: a smoke test;
the figures themselves come from `make bench`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import quietcore
from tests.conftest import CliRunner

BENCH = Path(__file__).resolve().parents[2] / "bench"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "noise"


@pytest.mark.slow
def test_bench_prints_ratios(peer_bench: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, kept = peer_bench  # `compare_peers.py --rounds 1 --seconds 1`, run once for the suite
    out = proc.stdout
    for text in ("quietcore vs oslat", "lost in gaps >= 2 us", "quietcore vs cyclictest", "p99", "targets:"):
        assert text in out
    ratios = [line.split()[-1] for line in out.splitlines() if line.startswith("  mean loop period")]
    assert ratios and float(ratios[0]) > 0
    assert sorted(p.name for p in kept.iterdir()) == ["cyc.json", "oslat.json"]  # --keep DIR


def test_ab_says_same_bytes_for_one_version_and_catches_a_changed_one(
    cli_main: CliRunner, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """bench/ab.py, as a change to the analysis is checked with it: the installed quietcore against itself is
    the same bytes; against a copy whose fits take a phase every 49 periods where they take one every 50, it
    says the analyses differ and exits 1 (a check that can fail; a copy trying one spectral peak where it tries
    eight found these sources all the same). Two CPUs of a real 5 s run, imported."""
    data = np.load(FIXTURES / "kvm-timer-and-host-100hz.npz")
    traces = tmp_path / "traces"
    traces.mkdir()
    for cpu in (0, 1):  # the second CPU its first half-second later: two CPUs, not one twice
        starts = (data["start_ns"] + cpu * 0.5e9) % float(data["span_ns"])
        order = np.argsort(starts)
        np.savetxt(traces / f"vm-rank0-cpu{cpu}.trace", np.column_stack([starts[order], data["duration_ns"][order]]),
                   fmt="%.0f", delimiter="\t")  # fmt: skip
    imported = cli_main("results", "import", "--from", "trace", str(traces), "--duration", "5")
    assert imported.returncode == 0, imported.stderr
    installed = Path(quietcore.__file__).resolve().parent
    changed = tmp_path / "changed"
    shutil.copytree(installed, changed / "quietcore")
    search = changed / "quietcore" / "stats" / "periodicity.py"
    text = search.read_text()
    assert "WINDOW_PERIODS = 50 " in text
    search.write_text(text.replace("WINDOW_PERIODS = 50 ", "WINDOW_PERIODS = 49 "))
    db = cli_env["QUIETCORE_DB"]

    def ab(before: Path, after: Path) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(BENCH / "ab.py"), "--before", str(before), "--after", str(after), "--rounds", "1"]
        argv.append(db)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    same = ab(installed.parent, installed.parent)
    assert same.returncode == 0, same.stderr
    assert "(session 1, 2 CPUs)" in same.stdout and same.stdout.rstrip().endswith("same bytes")
    assert "after / before" in same.stdout
    differ = ab(installed.parent, changed)
    assert differ.returncode == 1, differ.stderr
    assert "the analyses DIFFER" in differ.stdout
    refused = ab(tmp_path / "nowhere", changed)
    assert refused.returncode == 2 and "--before" in refused.stderr and "Traceback" not in refused.stderr
