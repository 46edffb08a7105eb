"""The report as files: DIR/index.html (self-contained: styles inline,
figures inline as SVG, no script, no network), DIR/report.md, and every
figure as DIR/figures/NAME.svg and .png."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from html import escape as html_escape
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from quietcore import outputs
from quietcore._version import __version__
from quietcore.report.builder import Report
from quietcore.report.render import Grid
from quietcore.safe import md, plain, write_atomic


def _shown(value: object) -> object:
    """Every value the template prints, its control characters shown (safe.plain) before it is escaped: a
    task named with a terminal's escape sequence is its name in the page and in a file read with cat. What
    is marked safe (the figures' SVG, made here) is left as it is."""
    return value if isinstance(value, Markup) or not isinstance(value, str) else plain(value, newlines=True)


def html(report: Report) -> str:
    env = Environment(loader=PackageLoader("quietcore.report", "templates"), autoescape=select_autoescape(["j2"]),
                      finalize=_shown)  # fmt: skip
    written = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return env.get_template("report.html.j2").render(report=report, version=__version__, written=written)


def _md_cell(text: str) -> str:
    """A cell of a Markdown table: its lines one after another, each escaped (safe.md)."""
    return "; ".join(md(line) for line in text.split("\n"))


def _md_grid(g: Grid) -> list[str]:
    lines = [f"**{md(g.title)}**", ""] if g.title else []
    lines.append("| " + " | ".join(_md_cell(h) for h in g.headers) + " |")
    lines.append("|" + "".join("---:|" if right else "---|" for right in (*g.right, *[False] * len(g.headers))
                               [: len(g.headers)]))  # fmt: skip
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in g.rows]
    return [*lines, ""]


def markdown(report: Report) -> str:
    lines = [f"# {md(report.title)}", "", f"quietcore {__version__}; figures in `figures/` as SVG and PNG.", ""]
    for s in report.sections:
        lines += ["#" * s.level + " " + md(s.title), ""]
        lines += [f"> **warning:** {md(w)}\n" for w in s.warnings]
        for g in s.grids:
            lines += _md_grid(g)
        lines += [f"{md(p)}\n" for p in s.paragraphs]
        for item in s.screen:
            lines += [f"{md(item)}\n"] if isinstance(item, str) else _md_grid(item)
        for f in s.figures:
            caption = md(f.caption)
            lines += [f"![{caption}]({f.files[1]})", "", f"*{caption}* ([SVG]({f.files[0]}))", ""]
        for d in s.folds:  # HTML in Markdown: GitHub and most renderers fold it as the HTML report does
            lines += [f"<details{' open' if d.open else ''}><summary>{html_escape(plain(d.summary))}</summary>", ""]
            for g in d.grids:
                lines += _md_grid(g)
            lines += [f"{md(p)}\n" for p in d.paragraphs]
            lines += ["</details>", ""]
    return "\n".join(lines)


def write(report: Report, out: Path, formats: tuple[str, ...]) -> list[Path]:
    written = []
    if "html" in formats:
        write_atomic(out / "index.html", html(report))
        written.append(out / "index.html")
    if "md" in formats:
        write_atomic(out / "report.md", markdown(report))
        written.append(out / "report.md")
    return written


MARKER = ".quietcore-report"


def prepare(out: Path, force: bool, option: str, hint: str = "") -> Path:
    """An empty output directory, made where quietcore may write
    (quietcore.outputs: as root, through directories no other user can
    change); an existing one only with force, and only one quietcore wrote
    (its marker file is there): --force never deletes a directory of
    someone else's. Returns it, its links resolved."""
    out = Path(os.path.abspath(out))
    out = outputs.directory(out.parent, option, hint=hint, leaf=True) / out.name
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise NotADirectoryError(f"{out} is not a directory quietcore wrote")
    if out.exists():
        if not force:
            raise FileExistsError(out)
        outputs.directory(out, option, make=False, hint=hint)  # as root: root's, as every directory above it
        if not (out / MARKER).is_file() and any(out.iterdir()):
            raise NotADirectoryError(f"{out} was not written by quietcore (no {MARKER} in it): not replaced")
        shutil.rmtree(out)
    out.mkdir(mode=0o755)  # new: in a sticky directory (/tmp) a name another user took first is refused
    (out / MARKER).write_text("written by quietcore report; `--force` replaces only a directory with this file\n")
    return out
