"""How a command's output reads (issue 56, STYLE.md's "Writing for the
reader"): the lines too long for a file, the numbers a terminal split
across rows, the cells cut with an ellipsis, the sentences over 40 words
and the parentheses inside parentheses. The suite's runners check every
output they record with `problems`; bench/readout.py measures the tour
with `read`."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from quietcore.wrap import breaks

#: Lines of a file over this many characters are too long, unless what makes them so is a command or a path.
LONGEST = 120
#: An error's line, one line in a file whatever its length, by the engineering standard.
ERROR = "quietcore: error: "
#: A sentence of more words than this is too long.
WORDS = 40
_TABLE = re.compile(r"[│┃┏┡└━─╇┳┗┛╭╰┌┐┘├┤┬┴┼║═]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`'\"(\[])")
_WORD = re.compile(r"[A-Za-z0-9µ]")
_VALID = re.compile(r"\((?:valid|choose from):? [^()]*\)")
_UNBREAKABLE = re.compile(r"`[^`]*`|\S*/\S+")  # a command in backticks, or a path


@dataclass
class Reading:
    lines: int = 0
    longest: int = 0
    over: int = 0  # lines over LONGEST that are not a command or a path
    split: int = 0  # numbers split across a terminal's rows
    cut: int = 0  # cells cut with an ellipsis
    escaped: int = 0  # a row break shown as "\n" (a terminal's table once did); not in problems(): a name may hold one
    long_sentences: int = 0
    nested: int = 0
    examples: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"lines {self.lines}, longest {self.longest}, over {LONGEST}: {self.over}, split {self.split}, "
                f"cut {self.cut}, escaped {self.escaped}, sentences over {WORDS} words: {self.long_sentences}, "
                f"nested: {self.nested}")  # fmt: skip


def read(text: str, columns: int | None = None, width: int = 100) -> Reading:
    """`text`: the output as written to a file `width` columns wide (quietcore's, $COLUMNS or 100), or, with
    `columns`, as a terminal of that width showed it, each line whole (tmux's capture-pane -J joins the
    rows the terminal wrapped it into)."""
    lines = text.split("\n") if text else []
    r = Reading(lines=len(lines), longest=max((len(line) for line in lines), default=0))
    for line in lines:
        if line.startswith(ERROR):  # an error is one line in a file (a log's grep finds it whole)
            continue
        if len(line) > LONGEST and len(_UNBREAKABLE.sub("", line)) > LONGEST:
            r.over += 1
            r.examples.append(f"over {LONGEST}: {line}")
    r.cut = text.count("…")
    r.escaped = text.count("\\n")
    if columns is not None:
        found = list(splits(lines, columns))
        r.split = len(found)
        r.examples += [f"split: {s}" for s in found]
    for sentence in sentences(lines, columns or width):
        words = sum(1 for w in sentence.split() if _WORD.search(w))
        if words > WORDS:
            r.long_sentences += 1
            r.examples.append(f"{words} words: {sentence}")
        if nested(sentence):
            r.nested += 1
            r.examples.append(f"nested: {sentence}")
    return r


def problems(text: str, width: int) -> list[str]:
    """What reads badly in a command's output written to a file `width` columns wide: an empty list if nothing."""
    return read(text, None, width).examples


def splits(lines: Sequence[str], columns: int) -> Iterator[str]:
    """Where a terminal broke a number across two rows: a line longer than the terminal is wide was wrapped
    at each multiple of its width; a break with a word on both sides, one of them a digit, split a number.
    (A row that only fills the width, a table's, was not wrapped: its line is no longer than the width.)"""
    for line in lines:
        for at in range(columns, len(line), columns):
            before, after = line[at - 1], line[at]
            if not before.isspace() and not after.isspace() and (before.isdigit() or after.isdigit()):
                yield f"{line[max(0, at - 20) : at]!r} / {line[at : at + 20]!r}"


def sentences(lines: Sequence[str], width: int) -> Iterator[str]:
    """The sentences of the prose lines: a line that is the wrap of the one before it (that line was full:
    its next word would not have fitted) is joined to it; table rows are left out."""
    paragraph: list[str] = []
    previous, hang = "", ""
    for line in lines:
        if _TABLE.search(line) or not line.strip():
            yield from _split(paragraph)
            paragraph, previous = [], ""
            continue
        first = line.split()[0]
        indent = line[: len(line) - len(line.lstrip())]
        if paragraph and len(previous) + 1 + len(first) > width and indent == hang:
            paragraph.append(line.strip())
        else:
            yield from _split(paragraph)
            paragraph = [line.strip()]
            hang = breaks(line, width)[1]  # where its wrapped rows would start
        previous = line
    yield from _split(paragraph)


def _split(paragraph: Sequence[str]) -> Iterator[str]:
    if paragraph:
        # a list of valid values (an error's "(valid: a, b, ...)") is no sentence: its words are not counted
        yield from (_VALID.sub("(valid: ...)", s) for s in _SENTENCE_END.split(" ".join(paragraph)) if s)


def nested(sentence: str) -> bool:
    """A parenthesis opened inside another (outside backticks, where a command's own may nest)."""
    depth = 0
    for part in re.sub(r"`[^`]*`", "", sentence):
        if part == "(":
            depth += 1
            if depth > 1:
                return True
        elif part == ")":
            depth = max(depth - 1, 0)
    return False
