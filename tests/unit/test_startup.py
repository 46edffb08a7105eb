"""Start-up: `quietcore --help` and `--version` load no command module and no
heavy library; a command loads its own module and what it imports at the top,
never the libraries `quietcore.lazy` lists; and an import sits inside a
function only when it loads one of those. Structural checks, not timings: a
timing on this VM would measure the host (bench/cli.py times --help beside a
peer)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from quietcore.commands import COMMANDS, load
from quietcore.lazy import DEFERRED, HEAVY

SRC = Path(__file__).resolve().parents[2] / "src"
# Beyond the lazy list, what --help must not pay for either: it parses nothing.
STARTUP = (*HEAVY, *DEFERRED, "rich")


def loaded_after(statement: str, watch: tuple[str, ...] = STARTUP) -> list[str]:
    code = (
        f"import sys\n{statement}\n"
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({watch!r}))))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('quietcore.commands.'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_help_loads_no_command_module_and_no_heavy_library() -> None:
    statement = (
        "import contextlib, io\nfrom quietcore import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        cli.main(['--help'])\n    except SystemExit:\n        pass"
    )
    assert loaded_after(statement) == []


def test_version_loads_nothing_either() -> None:
    statement = (
        "import contextlib, io\nfrom quietcore import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    cli.main(['--version'])"
    )
    assert loaded_after(statement) == []


def test_every_command_module_leaves_the_lazy_libraries_alone() -> None:
    statement = "\n".join(f"import quietcore.commands.{name}" for name in COMMANDS)
    found = loaded_after(statement, tuple(HEAVY))
    assert not [m for m in found if not m.startswith("quietcore.")]


def test_listing_sessions_loads_no_numpy() -> None:
    statement = "import quietcore.commands.results, quietcore.commands.reference, quietcore.knobs.pmqos"
    assert "numpy" not in loaded_after(statement, tuple(DEFERRED))


def test_the_check_would_see_a_heavy_import() -> None:
    # The same probe on a module that does load them: the check can fail.
    assert "matplotlib" in loaded_after("import quietcore.report.figures")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_summary_is_the_first_line_of_its_help(name: str) -> None:
    doc = (load(name).__doc__ or "").strip()
    assert COMMANDS[name] == doc.splitlines()[0]


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def _targets(node: ast.Import | ast.ImportFrom, modules: dict[str, ast.Module]) -> list[str]:
    """The modules an import statement loads: `from a import b` loads a, and a.b when
    that is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    return [base] + [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]


def _top_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue  # never runs
        for inner in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(inner, (ast.Import, ast.ImportFrom)):
                found.append(inner)
    return found


def test_an_import_inside_a_function_loads_a_lazy_library() -> None:
    modules = _modules()
    heavy: dict[str, bool] = {}

    def is_heavy(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name.split(".")[0] in HEAVY or name.split(".")[0] in DEFERRED:
            return True
        if name not in modules or name in seen:
            return False
        if name not in heavy:
            parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
            loads = [t for node in _top_level(modules[name]) for t in _targets(node, modules)]
            heavy[name] = any(is_heavy(t, seen | {name}) for t in parents + loads)
        return heavy[name]

    eager = []
    for name, tree in modules.items():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                targets = _targets(node, modules)
                if name == "quietcore.cli" and all(t.startswith("quietcore.commands.") for t in targets):
                    continue  # the dispatcher loads the command named, once it knows there is one
                if not any(is_heavy(t) for t in targets):
                    eager.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert eager == [], "imports that belong at the top of their module:\n" + "\n".join(eager)
    # The check can fail: report.figures loads matplotlib at its top, stats.periodicity numpy.
    assert is_heavy("quietcore.report.figures") and is_heavy("quietcore.stats.periodicity")
    assert not is_heavy("quietcore.safe")
