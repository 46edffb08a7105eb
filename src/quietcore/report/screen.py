"""Where a command's words are read: a terminal of some width, or a file a
batch job keeps. Prose is wrapped to that width with a hanging indent and
never inside a word; a table gets the columns it needs, its text columns
wrapped at spaces, and where even that does not fit, its last columns move
to a second table beside the same first column. Nothing is cut: no number,
CPU list or name loses a character to an ellipsis.

The width is the terminal's; in a file or pipe, $COLUMNS, else FILE_WIDTH."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from quietcore.safe import plain
from quietcore.wrap import FILE_WIDTH, breaks, file_width, wrap

__all__ = ["FILE_WIDTH", "Screen", "file_width", "fit", "screen", "wrap", "wrap_text"]


def wrap_text(text: Text, width: int) -> Text:
    """wrap's rows of a styled line, its styles kept."""
    if cell_len(text.plain) <= width:
        return text
    rows, hang = breaks(text.plain, width)
    out = Text()
    for i, (a, b) in enumerate(rows):
        if i:
            out.append("\n" + hang)
        out.append_text(text[a:b])
    return out


def _cells(column: Column) -> Iterator[str]:
    yield str(column.header)
    for cell in column.cells:
        yield cell.plain if isinstance(cell, Text) else str(cell)


def _least(column: Column, key: bool = False) -> int:
    """The narrowest the column can be: its longest word; a column of figures (justified right) is never
    wrapped, so its widest cell; nor is the first, which names the row ("0-382 every 2nd (192)", a CPU
    list a reader greps for) and is said again in front of any second table, up to KEY_UP_TO."""
    words = max((cell_len(t) for c in _cells(column) for t in c.split()), default=1)
    whole = max((cell_len(line) for c in list(_cells(column))[1:] for line in c.split("\n")), default=1)
    if key:
        return max(words, min(whole, KEY_UP_TO))
    if column.justify != "right":  # words: wrapped, but not to a column so narrow it reads as a list of words
        return max(words, min(_most(column), PROSE))
    return max(words, whole)


def _most(column: Column) -> int:
    """The widest it wants: its longest line."""
    return max((cell_len(line) for c in _cells(column) for line in c.split("\n")), default=1)


#: A column of words is never narrower than this, or than its widest cell where that is narrower: past it,
#: the table's last columns go to a second table.
PROSE = 20
#: The first column is never wrapped up to this width: its rows' names.
KEY_UP_TO = 32
#: The cells between two columns: a space of padding and a space of rule.
GUTTER = 2


def _copy(table: Table, columns: Sequence[int], first: bool, widths: Sequence[int] | None = None) -> Table:
    """A table of some of `table`'s columns, in the one style every table has here; with `widths`, each
    column that wide, its words wrapped as prose is (quietcore.wrap: a figure on its label's row)."""
    out = Table(title=table.title if first else None, title_justify="left", caption=table.caption if first else None,
                box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                show_header=table.show_header, header_style=table.header_style,
                title_style=table.title_style)  # fmt: skip
    for k in columns:
        c = table.columns[k]
        out.add_column(_safe(c.header), justify=c.justify, style=c.style, header_style=c.header_style,
                       overflow="fold", vertical=c.vertical)  # fmt: skip
        if widths is not None:
            out.columns[-1].width = widths[len(out.columns) - 1]
    for r, row in enumerate(zip(*(table.columns[k].cells for k in columns), strict=True)):
        end = table.rows[r].end_section if r < len(table.rows) else False
        cells = [_safe(c) for c in row]
        if widths is not None:
            cells = [_wrapped(c, w) if col.justify != "right" else c
                     for c, w, col in zip(cells, widths, out.columns, strict=True)]  # fmt: skip
        out.add_row(*cells, end_section=end, style=table.rows[r].style if r < len(table.rows) else None)
    return out


def _wrapped(cell: Any, width: int) -> Any:
    """A cell of words in rows of `width`, each line of it wrapped alone; a styled cell is rich's to wrap."""
    if not isinstance(cell, str):
        return cell
    return "\n".join(row for line in cell.split("\n") for row in wrap(line, width, hanging=False))


def _safe(cell: Any) -> Any:
    """A cell's control characters shown, whoever built the cell: the table is the last step before the
    terminal or the file, and a task's name reaches cells in many places. A newline a renderer put in a
    cell is its row break, kept."""
    if isinstance(cell, str):
        return plain(cell, newlines=True)
    if isinstance(cell, Text) and plain(cell.plain, newlines=True) != cell.plain:
        return Text(plain(cell.plain, newlines=True), style=cell.style, justify=cell.justify)
    return cell


def fit(table: Table, width: int) -> list[Table]:
    """The table in as few tables as fit `width`, each column as wide as it wants
    where there is room, its words wrapped at spaces where there is not; the first
    column again in front of any columns moved to a second table."""
    columns = table.columns
    if not columns:
        return [table]
    # a column with nothing in it says nothing (no session has tags): left out, as long as another is kept
    said = [k for k, c in enumerate(columns) if k == 0 or any(str(x).strip() for x in _cells(c) if x != str(c.header))]
    table = _copy(table, said, True)  # every cell safe (_safe) before it is measured
    columns = table.columns
    least = [_least(c, key=k == 0) for k, c in enumerate(columns)]
    most = [max(_most(c), n) for c, n in zip(columns, least, strict=True)]
    parts: list[list[int]] = [[0]]
    for k in range(1, len(columns)):
        mine = parts[-1]
        if sum(least[j] for j in mine) + least[k] + GUTTER * len(mine) <= width:
            mine.append(k)
        else:
            parts.append([0, k])
    out = []
    for i, part in enumerate(parts):
        widths = _widths([least[k] for k in part], [most[k] for k in part], width - GUTTER * (len(part) - 1))
        out.append(_copy(table, part, i == 0, widths))
    return out


def _widths(least: list[int], most: list[int], room: int) -> list[int]:
    """Each column its widest where all fit in `room`; else the widest cut down first,
    none under its longest word."""
    widths = list(most)
    while sum(widths) > room:
        k = max((j for j in range(len(widths)) if widths[j] > least[j]), key=lambda j: widths[j], default=None)
        if k is None:
            break
        widths[k] -= 1
    return widths


class Screen(Console):
    """A console for text that may come from outside (a process or IRQ name, a
    stored experiment name): no markup unless a print asks for it with
    markup=True (its own words escaped), no emoji codes (a PCI address
    0000:ab:00.0 read as ":ab:", a process named ":skull:"), and control
    characters shown as \\xNN, never sent to the terminal. Prose is wrapped
    and tables fitted to the width it is read in."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, highlight=False, emoji=False, soft_wrap=True, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        # A newline here is a renderer's, a cell's row break (print splits prose at its own): kept, where
        # showing it as \n printed "[1]\n+67.1 timer" in a terminal's table
        return super().render_str(plain(text, newlines=True), **options)

    def print(self, *objects: Any, **options: Any) -> None:
        for item in objects:
            self._one(item, **options)

    def _one(self, item: Any, **options: Any) -> None:
        width = self.width
        if isinstance(item, Table):
            # the title as prose, wrapped to the width, not to the table's: a narrow table cut a title in two
            title = item.title
            if title:
                self._one(title if isinstance(title, str | Text) else str(title))
            for part in fit(item, width):
                part.title = part.caption = None
                self._table(part)
            # the caption too, after every part: rich centred it under the first part, wrapped to that part's
            # width (compare's line of the CPUs alike at 64 CPUs came out indented 19 columns, its words split)
            caption = item.caption
            if caption:
                self._one(caption if isinstance(caption, str | Text) else str(caption))
            return
        if isinstance(item, str):
            markup = options.pop("markup", False)
            for line in item.split("\n"):
                text = self.render_str(line, markup=markup)
                super().print(wrap_text(text, width), **options)
            return
        if isinstance(item, Text):
            super().print(wrap_text(_safe(item), width), **options)
            return
        super().print(item, **options)

    def _table(self, table: Table) -> None:
        if self.is_terminal and self.color_system is not None:
            super().print(table)
            return
        # In a file, or a terminal without colour (rank 0's pseudo-terminal under mpirun, which a batch job's log
        # receives), the rows without the spaces rich pads them to the table's width with.
        buffer = io.StringIO()
        Console(file=buffer, width=self.width, color_system=None, markup=False, emoji=False,
                highlight=False).print(table)  # fmt: skip
        for line in buffer.getvalue().rstrip("\n").split("\n"):
            super().print(Text(line.rstrip()))


def screen(**options: Any) -> Screen:
    """stdout (or stderr): a terminal at its width; a file or pipe at file_width()."""
    out = Screen(**options)
    return out if out.is_terminal else Screen(width=file_width(), **options)
