"""Start-up: the command line loads only what parsing needs. Each command
imports its heavy modules (numpy, scipy, rich, matplotlib, jinja2) when it
runs, so `quietcore --version` and `--help` answer at once. A structural
check, not a timing: a timing on this VM would measure the host."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numpy", "scipy", "matplotlib", "jinja2", "rich")


def loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_importing_the_cli_loads_no_heavy_module() -> None:
    assert loaded_after("import quietcore.cli") == []


def test_building_the_parser_loads_no_heavy_module() -> None:
    assert loaded_after("import quietcore.cli\nquietcore.cli.build_parser()") == []


def test_the_check_would_see_a_heavy_import() -> None:
    # The same probe on a module that does load them: the check can fail.
    assert "matplotlib" in loaded_after("import quietcore.report.figures")
