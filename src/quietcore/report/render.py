"""Figures to inline SVG (for the self-contained HTML) and to SVG and PNG
files; rich tables to plain rows (for HTML and Markdown)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.text import Text
from rich.table import Table

from quietcore.safe import ident, plain, write_atomic

# Fonts as paths and a fixed hash salt: the SVG needs no font on the reader's
# machine and is the same bytes for the same data.
matplotlib.rcParams["svg.fonttype"] = "path"
matplotlib.rcParams["svg.hashsalt"] = "quietcore"
# A "$" in a name from the node (a task, a cell) is a dollar sign, not TeX math to lay out.
matplotlib.rcParams["text.parse_math"] = False


@dataclass(frozen=True)
class Rendered:
    name: str
    caption: str
    svg: str  # inline <svg> element
    files: tuple[str, ...]  # relative paths written


def render(fig: Figure, name: str, caption: str, out: Path) -> Rendered:
    """`name` becomes an id and a file name: reduced to [A-Za-z0-9_-], since
    it may be built from stored text (an experiment's name)."""
    name = ident(name)
    for t in fig.findobj(Text):  # every title, label, tick and legend: a name's control characters shown, not sent
        words = t.get_text()
        if words != (shown := plain(words, newlines=True)):
            t.set_text(shown)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    # Ids are per file; inline, several figures share one document.
    svg = re.sub(r'id="([^"]+)"', lambda m: f'id="{name}-{m.group(1)}"', svg)
    svg = re.sub(r'(url\(#|xlink:href="#|href="#)([^")]+)', lambda m: f"{m.group(1)}{name}-{m.group(2)}", svg)
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    write_atomic(figures / f"{name}.svg", buffer.getvalue())
    # The layout the SVG was drawn with is kept for the PNG: laying it out
    # again takes a third of the PNG's time and gives the same positions.
    fig.set_layout_engine("none")
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    write_atomic(figures / f"{name}.png", png.getvalue())
    return Rendered(name, caption, svg, (f"figures/{name}.svg", f"figures/{name}.png"))


@dataclass(frozen=True)
class Grid:
    title: str
    headers: list[str]
    rows: list[list[str]]
    right: tuple[bool, ...] = ()  # each column's figures aligned right, as the terminal's table has them


def grid(table: Table) -> Grid:
    """The cells of a rich table as plain text (no cell is markup: report.screen prints none as markup)."""
    headers = [str(c.header) for c in table.columns]
    columns = [[str(cell) for cell in c.cells] for c in table.columns]
    rows = [list(r) for r in zip(*columns, strict=True)] if columns else []
    return Grid(str(table.title or ""), headers, rows, tuple(c.justify == "right" for c in table.columns))
