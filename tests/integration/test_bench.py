"""The peer benchmark runs and prints its ratios (short runs: a smoke test;
the figures themselves come from `make bench`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.mark.slow
def test_bench_prints_ratios(peer_bench: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, kept = peer_bench  # `compare_peers.py --rounds 1 --seconds 1`, run once for the suite
    out = proc.stdout
    for text in ("quietcore vs oslat", "lost in gaps >= 2 us", "quietcore vs cyclictest", "p99", "targets:"):
        assert text in out
    ratios = [line.split()[-1] for line in out.splitlines() if line.startswith("  mean loop period")]
    assert ratios and float(ratios[0]) > 0
    assert sorted(p.name for p in kept.iterdir()) == ["cyc.json", "oslat.json"]  # --keep DIR
