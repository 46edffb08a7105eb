"""quietcore's build backend: scikit-build-core, after a check that this
machine can build the native core. Without a C compiler with OpenMP, or
without CMake 3.18 or later, CMake's own errors are a 21-line traceback or
"Could not find compiler set in environment variable CC"; this says in one
paragraph what is missing, which package provides it, and that the wheel
needs neither."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The lowest CMake the native core's CMakeLists.txt asks for.
CMAKE = (3, 18)
#: A program that builds only where the compiler has OpenMP.
OPENMP_TEST = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"


def compiler(env: Mapping[str, str]) -> str | None:
    """The C compiler CMake would take: $CC where set, else cc, gcc or clang on the PATH."""
    path = env.get("PATH", "")
    given = env.get("CC", "").split()
    if given:
        return shutil.which(given[0], path=path)
    return next((found for name in ("cc", "gcc", "clang") if (found := shutil.which(name, path=path))), None)


def cmake_version(env: Mapping[str, str]) -> tuple[int, ...] | None:
    """The version of the cmake on the PATH, or of the cmake Python package; None where there is none."""
    found = shutil.which("cmake", path=env.get("PATH", ""))
    if found is None:
        try:
            import cmake  # type: ignore[import-not-found,unused-ignore]  # the PyPI package, where installed

            found = str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
        except (ImportError, AttributeError):
            return None
    try:
        out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return None
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def has_openmp(cc: str, env: Mapping[str, str]) -> bool:
    """Whether `cc` builds and links a program with -fopenmp."""
    with tempfile.TemporaryDirectory(prefix="quietcore-build-") as d:
        source = Path(d) / "omp.c"
        source.write_text(OPENMP_TEST)
        try:
            done = subprocess.run([cc, "-fopenmp", str(source), "-o", str(Path(d) / "omp")], capture_output=True,
                                  env=dict(env), timeout=120, check=False)  # fmt: skip
        except OSError:
            return False
        return done.returncode == 0


def missing(env: Mapping[str, str], cmake: bool = True) -> list[str]:
    """What this machine lacks to build the native core, said for a person; empty when nothing. `cmake`:
    CMake too (not while the build's requirements are asked for: scikit-build-core then asks for CMake from
    PyPI where the machine has none)."""
    out = []
    cc = compiler(env)
    if cc is None:
        which = f"the compiler $CC names ({env['CC']})" if env.get("CC") else "a C compiler (cc, gcc or clang)"
        out.append(which)
    elif not has_openmp(cc, env):
        out.append(f"OpenMP for the C compiler {cc}")
    version = cmake_version(env) if cmake else CMAKE
    if version is None:
        out.append(f"CMake {CMAKE[0]}.{CMAKE[1]} or later")
    elif version < CMAKE:
        out.append(f"CMake {CMAKE[0]}.{CMAKE[1]} or later (this one is {'.'.join(map(str, version))})")
    return out


def paragraph(lacking: list[str]) -> str:
    """The one paragraph a build that cannot start prints."""
    return ("quietcore cannot be built from source here: its native core needs a C compiler with OpenMP and "
            f"CMake {CMAKE[0]}.{CMAKE[1]} or later, and this machine lacks {' and '.join(lacking)}. "
            "Debian or Ubuntu: apt-get install gcc cmake. RHEL, Rocky or Alma: dnf install gcc cmake libgomp. "
            "SLES: zypper install gcc cmake. Or install a quietcore wheel, which needs neither "
            "(see docs/install.md).")  # fmt: skip


def _check(cmake: bool = True) -> None:
    lacking = missing(os.environ, cmake)
    if lacking:
        raise SystemExit(paragraph(lacking))


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    _check(cmake=False)  # before scikit-build-core is imported: it may be what cannot be installed offline
    from scikit_build_core import build

    return list(build.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    _check(cmake=False)  # before scikit-build-core is imported: it may be what cannot be installed offline
    from scikit_build_core import build

    return list(build.get_requires_for_build_editable(config_settings))


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    from scikit_build_core import build

    return list(build.get_requires_for_build_sdist(config_settings))


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:  # fmt: skip
    _check()  # before scikit-build-core is imported: it may be what cannot be installed offline
    from scikit_build_core import build

    return str(build.build_wheel(wheel_directory, config_settings, metadata_directory))


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:  # fmt: skip
    _check()  # before scikit-build-core is imported: it may be what cannot be installed offline
    from scikit_build_core import build

    return str(build.build_editable(wheel_directory, config_settings, metadata_directory))


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """An sdist needs no compiler: it is built on a machine that has one."""
    from scikit_build_core import build

    return str(build.build_sdist(sdist_directory, config_settings))


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    from scikit_build_core import build

    return str(build.prepare_metadata_for_build_wheel(metadata_directory, config_settings))


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: dict[str, Any] | None = None) -> str:  # fmt: skip
    from scikit_build_core import build

    return str(build.prepare_metadata_for_build_editable(metadata_directory, config_settings))
