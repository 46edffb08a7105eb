"""The build backend's check (build_backend/quietcore_build.py): a machine that
cannot build the native core is told in one paragraph what it lacks, which
package provides it, and that the wheel needs neither (issue 57)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BACKEND = Path(__file__).resolve().parents[2] / "build_backend"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The backend's build_wheel, as pip calls it, in a process of its own."""
    code = "import quietcore_build; quietcore_build.build_wheel('unused')"
    return subprocess.run([sys.executable, "-c", code], cwd=BACKEND, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def test_without_a_compiler_or_cmake_the_build_says_what_is_missing_in_one_paragraph(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = _run({"PATH": str(empty), "PYTHONPATH": str(BACKEND)})
    assert done.returncode == 1
    said = done.stderr.strip()
    assert "\n" not in said and "Traceback" not in said, said
    assert said.startswith("quietcore cannot be built from source here: ")
    # (CMake from PyPI, where this interpreter has it, is CMake all the same)
    cmake = "." if importlib.util.find_spec("cmake") else " and CMake 3.18 or later."
    assert f"this machine lacks a C compiler (cc, gcc or clang){cmake}" in said, said
    for told in ("apt-get install gcc cmake", "dnf install gcc cmake libgomp", "zypper install gcc cmake",
                 "a quietcore wheel, which needs neither"):  # fmt: skip
        assert told in said, said


def test_a_compiler_named_in_cc_that_is_not_there_is_named() -> None:
    sys.path.insert(0, str(BACKEND))
    try:
        import quietcore_build  # type: ignore[import-not-found,unused-ignore]
    finally:
        sys.path.remove(str(BACKEND))
    lacking = quietcore_build.missing({"PATH": os.environ["PATH"], "CC": "gcc-nowhere-7"})
    assert lacking[0] == "the compiler $CC names (gcc-nowhere-7)"


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("cmake") is None, reason="needs cc and cmake")
def test_this_machine_lacks_nothing_and_a_compiler_without_openmp_is_told(tmp_path: Path) -> None:
    sys.path.insert(0, str(BACKEND))
    try:
        import quietcore_build  # type: ignore[import-not-found,unused-ignore]
    finally:
        sys.path.remove(str(BACKEND))
    # the real compiler builds the OpenMP program here (.ci/run installs gcc)
    assert quietcore_build.missing(dict(os.environ)) == []
    # a compiler that refuses -fopenmp, as clang without libomp does
    fake = tmp_path / "nomp-cc"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && exit 1; done\nexec cc "$@"\n')
    fake.chmod(0o755)
    assert quietcore_build.missing({**os.environ, "CC": str(fake)}) == [f"OpenMP for the C compiler {fake}"]
