"""Prose wrapped to a width: never inside a word, each row after the first
indented under the line's text (a list item's under its text, past its
marker). Pure, and free of rich: `cli` wraps an error with it before any
command's imports (report.screen wraps all else)."""

from __future__ import annotations

import os
import re
import shutil
import unicodedata

#: The width of a file or pipe when $COLUMNS does not say: wide enough for a table of ten figures.
FILE_WIDTH = 100
#: The narrowest width honoured: a terminal or $COLUMNS narrower than this is taken as this.
NARROWEST = 40


def cell_len(text: str) -> int:
    """The columns `text` takes in a terminal: wide (East Asian) characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def file_width(environ: dict[str, str] | None = None) -> int:
    """$COLUMNS where it is a number of NARROWEST or more, else FILE_WIDTH."""
    value = (os.environ if environ is None else environ).get("COLUMNS", "")
    return max(int(value), NARROWEST) if value.isdigit() and 0 < int(value) <= 10_000 else FILE_WIDTH


def terminal_width() -> int:
    """The terminal's width, NARROWEST at least."""
    return max(shutil.get_terminal_size((FILE_WIDTH, 24)).columns, NARROWEST)


#: What a continued line of prose is indented by, past its first line's own indent.
HANG = 2
#: A list item's marker ("1. ", "- "): its continuation lines hang under the item's text.
_MARKER = re.compile(r"^( *)((?:\d+\.|[-*•]) +)?")
_TOKEN = re.compile(r"(?:[^\s`]*`[^`]*`)+[^\s`]*|\S+")
_WORD = re.compile(r"\S+")


def breaks(line: str, width: int, hanging: bool = True) -> tuple[list[tuple[int, int]], str]:
    """Where to break `line` to `width`: each row's (start, end) in the line, and the
    indent of every row after the first (none without `hanging`: a table's cell). A word
    longer than a row is a row alone."""
    m = _MARKER.match(line)
    lead = len(m.group(1)) if m else 0
    marker = len(m.group(2)) if m and m.group(2) else HANG
    hang = " " * min(lead + marker, width // 2) if hanging else ""
    rows: list[tuple[int, int]] = []
    start = end = None
    for a, b in _tokens(line, width - len(hang)):
        if start is None:
            start, end = 0, b  # the first row keeps the line's own indent
            continue
        assert end is not None
        room = width - (len(hang) if rows else 0)
        if cell_len(line[start:b]) <= room:
            end = b
            continue
        rows.append((start, end))
        start, end = a, b
    if start is not None and end is not None:
        rows.append((start, end))
    return rows, hang


def _tokens(line: str, room: int) -> list[tuple[int, int]]:
    """The words of `line` as (start, end), some held together: a command in backticks, so that a row holds
    it whole for the reader to copy; a number and the word before it ("CPU 1", "--duration 3") and its unit
    ("5.8 ms"), so that no row ends on a label whose figure is on the next. Each unless longer than a row."""
    out: list[tuple[int, int]] = []
    for token in _TOKEN.finditer(line):
        if "`" in token.group() and cell_len(token.group()) > room:
            out += [(token.start() + w.start(), token.start() + w.end()) for w in _WORD.finditer(token.group())]
            continue
        a, b = token.span()
        if out and _holds(line[out[-1][0] : out[-1][1]], token.group()) and cell_len(line[out[-1][0] : b]) <= room // 2:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


#: A label a figure follows ("CPU", "CPUs", "session", "of", "--duration"), and a figure ("1", "0-1",
#: "10,000", "+0.5%", "[2]"); and the units a figure is read with.
_LABEL = re.compile(r"(?:--?)?[A-Za-z][A-Za-z_-]*")
_FIGURE = re.compile(r"[-+\[(]?\d")
_UNITS = frozenset(("ns", "µs", "ms", "s", "%", "Hz", "kHz", "MHz", "GHz", "B", "kB", "KiB", "MB", "MiB", "GB",
                    "GiB", "ppm", "x"))  # fmt: skip


def _holds(before: str, token: str) -> bool:
    """Whether `token` stays on the row of the text before it: a figure after its label, a unit after its
    figure."""
    last = before.rsplit(None, 1)[-1]
    if _FIGURE.match(token):
        return bool(_LABEL.fullmatch(last))
    return token.rstrip(".,;:)") in _UNITS and last[-1:].isdigit()


def wrap(line: str, width: int, hanging: bool = True) -> list[str]:
    """One line of prose as rows of at most `width` cells (a cell's, without `hanging`: no indent)."""
    if cell_len(line) <= width:
        return [line]
    rows, hang = breaks(line, width, hanging)
    return [line[a:b] if i == 0 else hang + line[a:b] for i, (a, b) in enumerate(rows)] or [""]
