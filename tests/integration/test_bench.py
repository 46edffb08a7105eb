"""The peer benchmark runs and prints its ratios (short runs: a smoke test;
the figures themselves come from `make bench`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "compare_peers.py"


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("oslat") or not shutil.which("cyclictest"), reason="needs rt-tests")
@pytest.mark.skipif(os.geteuid() != 0, reason="oslat and cyclictest need root")
def test_bench_prints_ratios() -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--rounds", "1", "--seconds", "1"],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for text in ("quietcore vs oslat", "lost in gaps >= 2 us", "quietcore vs cyclictest", "p99", "targets:"):
        assert text in out
    ratios = [line.split()[-1] for line in out.splitlines() if line.startswith("  mean loop period")]
    assert ratios and float(ratios[0]) > 0
