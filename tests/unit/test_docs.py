"""The docs site and the command line agree: every command has its page and
every page its command, each page names its command's options and offers no
option the command lacks, the site builds strict, the layers page draws the
import contract, and the README stays short and links only inside the tree."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from quietcore.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
COMMANDS = DOCS / "commands"

# A synopsis or an example line in a code block: `quietcore CMD ...`, maybe after
# `$ ` or a launcher (`mpirun -n N quietcore survey ...`).
_INVOCATION = re.compile(r"^(?:\$ )?(?:(?:mpirun|srun)\s.*?\s)?quietcore\s+([a-z]+)\b(.*)$")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the parser has no subcommands")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of a command, its actions' (`results export --format`) included."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
        else:
            found.update(o for o in action.option_strings if o.startswith("--") and o != "--help")
    return found


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def _mkdocs() -> dict[str, object]:
    # mkdocs.yml is plain YAML (no !!python tags), so the safe loader reads it.
    config: dict[str, object] = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return config


def _code_lines(text: str) -> list[str]:
    """The lines of the page's fenced code blocks, a synopsis' continuation lines
    joined to the line they continue."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if line[:1].isspace() and lines and _INVOCATION.match(lines[-1]):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def test_every_command_has_its_page_and_every_page_its_command() -> None:
    commands = set(_subcommands())
    pages = {p.stem for p in COMMANDS.glob("*.md")} - {"index"}
    assert pages == commands, f"pages with no command: {pages - commands}; commands with no page: {commands - pages}"
    overview = (COMMANDS / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([a-z]+)\.md\)", overview))
    assert listed == commands, f"the overview's table lists {sorted(listed)}"
    nav = _nav_pages(_mkdocs()["nav"])
    assert {p.removeprefix("commands/").removesuffix(".md") for p in nav if p.startswith("commands/")} - {
        "index"
    } == commands


def test_every_page_is_in_the_nav() -> None:
    nav = set(_nav_pages(_mkdocs()["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == nav, f"not in mkdocs.yml's nav: {pages - nav}; in the nav but missing: {nav - pages}"


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_a_command_page_names_every_option_and_offers_no_other(command: str) -> None:
    parser = _subcommands()[command]
    known = _options(parser)
    text = (COMMANDS / f"{command}.md").read_text(encoding="utf-8")
    mentioned = set(_OPTION.findall(text))
    assert known <= mentioned, f"{command}'s page never names {sorted(known - mentioned)}"
    for line in _code_lines(text):
        m = _INVOCATION.match(line)
        if not m or m.group(1) != command:
            continue
        offered = set(_OPTION.findall(m.group(2)))
        assert offered <= known | {"--version"}, f"{command}'s page offers {sorted(offered - known)}: {line!r}"


def test_the_overview_synopsis_offers_only_real_options() -> None:
    subcommands = _subcommands()
    for line in _code_lines((COMMANDS / "index.md").read_text(encoding="utf-8")):
        m = _INVOCATION.match(line)
        if m and m.group(1) in subcommands:
            offered = set(_OPTION.findall(m.group(2)))
            assert offered <= _options(subcommands[m.group(1)]), line


def test_the_layers_page_draws_the_import_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    want = [sorted(name.strip().removeprefix("quietcore.") for name in layer.split(":")) for layer in layers]
    text = (DOCS / "layers.md").read_text(encoding="utf-8")
    drawing = text.split("```text\n", 1)[1].split("```", 1)[0].splitlines()[2:]  # past the header and its rule
    drawn: list[list[str]] = []
    for line in drawing:
        names = [n.strip() for n in line[:32].split("│") if n.strip()]
        if line.startswith("│"):  # a layer too wide for one line goes on under it
            drawn[-1] = sorted(drawn[-1] + names)
        elif names:
            drawn.append(sorted(names))
    assert drawn == want


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built once for the module with --strict, which turns every warning into a
    failure: a broken link or anchor, a page left out of the nav (validation in mkdocs.yml)."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs not installed (the test extra has it)")
    where = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(where)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return where


def test_the_site_builds_strict(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    # The site reads offline: no script or style from a CDN.
    assert not re.search(r'(?:src|href)="https?://[^"]*\.(?:js|css)"', index)
    assert (site / "commands" / "noise.html").is_file()


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_is_a_list_item_of_its_built_page(site: Path, command: str) -> None:
    """As the site shows it: check.md's options after a paragraph with no blank line
    between rendered as one paragraph of literal "- --prometheus DIR: ..." text, which
    neither --strict nor the page's text test could see."""
    page = (site / "commands" / f"{command}.html").read_text(encoding="utf-8")
    # an item of a list or a row of a table that begins with the option, maybe in bold
    listed = set(re.findall(r"<(?:li|td)>\s*(?:<(?:p|strong)>\s*)*<code>(--[a-z][a-z0-9-]*)", page))
    missing = _options(_subcommands()[command]) - listed
    assert not missing, f"{command}'s built page has no list item for {sorted(missing)}"


def test_the_readme_is_short_and_its_links_stay_in_the_tree() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path = (ROOT / target).resolve()
        assert path.is_relative_to(ROOT), f"the README links outside the repository: {target}"
        assert path.exists(), f"the README links to a missing {target}"


#: A page of the skeleton (issue 59) lists its options under this heading, Output, Exit codes and See also after it.
OPTIONS = "## Options"
#: The sections of every command page, in this order (issue 59, as rtla's and memray's pages): what it does comes
#: first, under the title; a page may add sections of its own features between Examples and Options.
SKELETON = ("Synopsis", "Examples", "Options", "Output", "Exit codes", "See also")


def _option_items(parser: argparse.ArgumentParser, within: str = "") -> list[str]:
    """A list item for each long option of a command (its actions' too), from its --help."""
    items = []
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                items += _option_items(sub, f"{within} {name}".strip())
            continue
        longs = [o for o in action.option_strings if o.startswith("--") and o != "--help"]
        if not longs or action.help == argparse.SUPPRESS:
            continue
        if action.nargs == 0:
            shown = longs[0]
        else:
            metavar = action.metavar or (f"{{{','.join(map(str, action.choices))}}}" if action.choices else
                                         action.dest.upper())  # fmt: skip
            shown = f"{longs[0]} {' '.join(metavar) if isinstance(metavar, tuple) else metavar}"
        text = " ".join(formatter._expand_help(action).split()) if action.help else ""
        items.append(f"- `{shown}`" + (f" (`{within}`)" if within else "") + (f": {text}" if text else ""))
    return items


def _options_section(command: str) -> str:
    """A skeleton page's Options: every option once, as `quietcore COMMAND --help` gives it."""
    items = "\n".join(_option_items(_subcommands()[command]))
    return f"{OPTIONS}\n\nEvery option of `quietcore {command}`, as its `--help` gives it.\n\n{items}\n\n"


def _section(text: str, heading: str) -> str:
    """`heading`'s section of a page, to the next heading of its level."""
    start = text.index(heading + "\n")
    following = text.find("\n## ", start + len(heading))
    return text[start : following + 1 if following >= 0 else len(text)]


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_a_command_pages_options_are_its_help(command: str) -> None:
    """Each page lists every option as --help gives it, once: `python tests/unit/test_docs.py` writes them."""
    text = (COMMANDS / f"{command}.md").read_text(encoding="utf-8")
    assert OPTIONS + "\n" in text, f"{command}.md has no '{OPTIONS}': run `python tests/unit/test_docs.py`"
    assert _section(text, OPTIONS) == _options_section(command), "run `python tests/unit/test_docs.py`"


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_a_command_page_follows_the_skeleton(command: str) -> None:
    """Issue 59: what it does under the title, then Synopsis, Examples, Options, Output, Exit codes, See also
    (a page's own features between Examples and Options); options said once, in their section."""
    text = (COMMANDS / f"{command}.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    kept = [h for h in headings if h in SKELETON]
    assert kept == list(SKELETON), f"{command}.md: sections {headings}, wanted {SKELETON} in order"
    extra = headings[headings.index("Examples") + 1 : headings.index("Options")]
    assert headings == ["Synopsis", "Examples", *extra, "Options", "Output", "Exit codes", "See also"], headings
    intro = text.split("\n## ", 1)[0].split("\n", 1)[1].strip()
    assert intro and "```" not in intro and len(re.findall(r"[.!?](?:\s|$)", intro)) <= 3, intro


if __name__ == "__main__":  # rewrite each command page's options from the parser
    for name in sorted(_subcommands()):
        path = COMMANDS / f"{name}.md"
        page = path.read_text(encoding="utf-8")
        old = _section(page, OPTIONS)
        path.write_text(page.replace(old, _options_section(name)), encoding="utf-8")
