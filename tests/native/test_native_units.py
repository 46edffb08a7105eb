"""Build tests/native/test_units.c against the native sources and run it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "native"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on PATH")
def test_native_units(tmp_path: Path) -> None:
    exe = tmp_path / "test_units"
    build = subprocess.run(
        [
            "cc",
            "-std=c11",
            "-D_GNU_SOURCE",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{NATIVE}",
            str(Path(__file__).parent / "test_units.c"),
            str(NATIVE / "cpulist.c"),
            str(NATIVE / "json.c"),
            "-o",
            str(exe),
            "-lm",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "all native unit checks passed" in run.stdout
