"""Text that came from outside quietcore (a process or IRQ name, a stored
experiment name, an imported file) made safe for where it goes: a terminal,
a file name, a spreadsheet. HTML is escaped by the report's templates."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from rich.markup import escape

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
#: What Markdown reads as markup (emphasis, code, links, raw HTML, tables), escaped with a backslash, as
#: CommonMark allows for any ASCII punctuation. "_" is left: inside a word (local_timer) it is no emphasis.
_MARKDOWN = re.compile(r"([\\`*\[\]<>&|!])")
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_-]+")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def plain(text: str, newlines: bool = False) -> str:
    """Control characters (an escape sequence that moves the cursor or
    retitles the terminal, a newline that forges a line) shown as \\xNN,
    or \\n, \\t and \\r;
    with `newlines`, a newline is kept (a figure's title of two lines)."""
    return (_CONTROL_BUT_NEWLINE if newlines else _CONTROL).sub(_shown, text)


#: The control characters a reader knows by their C escape: a command line's newline reads "\\n".
_KNOWN = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _shown(m: re.Match[str]) -> str:
    return _KNOWN.get(m.group()) or f"\\x{ord(m.group()):02x}"


def md(text: str) -> str:
    """For Markdown: plain()'s text, with what Markdown reads as markup escaped, so a task named
    `<img src=x onerror=...>` or `[a](javascript:...)` is its name in the rendered page too."""
    return _MARKDOWN.sub(r"\\\1", plain(text))


def markup(text: str) -> str:
    """For rich: control characters as plain() shows them, and square
    brackets escaped, so stored text never reads as markup."""

    return escape(plain(text))


def ident(text: str, fallback: str = "x") -> str:
    """An id or file name part: runs of anything but [A-Za-z0-9_-] become
    one '-' ("../etc" is "-etc"), never empty."""
    cleaned = _NOT_IDENT.sub("-", text).strip("-")
    return cleaned[:100] or fallback


def csv_cell(value: object) -> object:
    """A cell a spreadsheet will not run: text that begins with = + - @
    (or a tab or carriage return) gets a leading quote, as OWASP advises;
    numbers, and text that is a number, stay as they are."""
    if not isinstance(value, str) or not value.startswith(_FORMULA):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a whole file or nothing: a temporary file in the same
    directory (made with O_EXCL, so never another's), then a rename over
    the name. A reader never sees half a report, and a link planted at
    the name is replaced, not followed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(handle.fileno(), 0o644)  # by the descriptor: the name could be swapped under a path
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
